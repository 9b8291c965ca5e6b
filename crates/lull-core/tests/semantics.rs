//! The window contract, one named test per rule: lodash's edge cases, lull's
//! deliberate differences from lodash, and the execution lifecycle.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use lull_core::{
    Action, Adaptive, DeadLetterError, Debouncer, DropCause, Horizon, JitterMode, Keyed, MAX_IDLE_KEYS, Overlap,
    PolicyConfig, PolicyError, Reason, Retry, RunError, Seq, Wait, WindowId,
};
use support::{Runs, Sim, policy};

fn debounce(wait: u64) -> PolicyConfig {
    PolicyConfig::debounce(wait)
}

fn leading(wait: u64) -> PolicyConfig {
    PolicyConfig { leading: true, ..debounce(wait) }
}

// ---- lodash's edge cases ---------------------------------------------------

#[test]
fn leading_and_trailing_with_one_call_fires_once() {
    let mut sim = Sim::new(PolicyConfig { trailing: true, ..leading(100) }, Runs::Instant);
    sim.event_at(0);
    sim.advance_to(10_000);
    assert_eq!(sim.fire_summary(), [(0, "leading", 1, 1)]);
}

#[test]
fn trailing_fires_only_if_called_again_within_wait() {
    let mut sim = Sim::new(leading(100), Runs::Instant);
    sim.event_at(0);
    sim.event_at(50);
    sim.advance_to(10_000);
    assert_eq!(sim.fire_summary(), [(0, "leading", 1, 1), (150, "quiet", 2, 2)]);
}

#[test]
fn max_wait_fires_inside_a_call_in_a_tight_loop() {
    // A synchronous loop: calls every 10 ms while no timer can run.
    let mut sim = Sim::new(PolicyConfig { max_wait: Some(200), ..debounce(100) }, Runs::Manual);
    sim.event_at(0);
    for _ in 0..20 {
        sim.stall(10);
        sim.event();
    }
    // The call at t=200 itself fired the window (lodash's "tight loop" branch), covering itself.
    assert_eq!(sim.fire_summary(), [(200, "max_wait", 1, 21)]);
}

#[test]
fn cancel_drops_the_window_and_resets_the_burst() {
    let mut sim = Sim::new(leading(100), Runs::Instant);
    sim.event_at(0); // leading fire
    sim.event_at(30);
    sim.event_at(60);
    sim.cancel();
    let dropped = sim.log.iter().find_map(|(_, a)| match a {
        Action::Dropped(d) => Some(*d),
        _ => None,
    });
    let dropped = dropped.expect("cancel reports what it dropped");
    assert_eq!((dropped.cause, dropped.span.first, dropped.span.last), (DropCause::Cancelled, Seq(2), Seq(3)));
    assert_eq!(sim.engine.next_deadline(), None);
    assert!(!sim.engine.pending());
    // The next call starts a fresh burst: a leading fire, though the last call was 10 ms ago.
    sim.event_at(70);
    sim.advance_to(10_000);
    assert_eq!(sim.fire_summary(), [(0, "leading", 1, 1), (70, "leading", 4, 4)]);
}

#[test]
fn flush_fires_now_and_disarms() {
    let mut sim = Sim::new(debounce(100), Runs::Instant);
    sim.event_at(0);
    sim.event_at(30);
    sim.advance_to(40);
    sim.flush();
    assert_eq!(sim.fire_summary(), [(40, "flush", 1, 2)]);
    assert_eq!(sim.engine.next_deadline(), None, "flush disarms the timer");
    assert!(!sim.engine.pending());
    sim.flush(); // nothing left: a no-op
    sim.advance_to(10_000);
    assert_eq!(sim.fires().len(), 1);
}

#[test]
fn flush_without_trailing_drops_like_lodash() {
    let mut sim = Sim::new(PolicyConfig { trailing: false, ..leading(100) }, Runs::Instant);
    sim.event_at(0);
    sim.event_at(10);
    sim.flush();
    assert_eq!(sim.fire_summary(), [(0, "leading", 1, 1)]);
    assert!(matches!(sim.log.last(), Some((_, Action::Dropped(d))) if d.cause == DropCause::NoTrailingEdge));
}

#[test]
fn wait_zero_coalesces_calls_of_the_same_tick() {
    let mut sim = Sim::new(debounce(0), Runs::Instant);
    sim.event_at(5);
    sim.event();
    sim.event();
    sim.advance(0); // the zero-delay timer runs after the current task
    assert_eq!(sim.fire_summary(), [(5, "quiet", 1, 3)]);
}

// ---- lull's deliberate differences from lodash -----------------------------

/// lodash#4648: lodash's `flush` leaves the old timer armed; with `maxWait`
/// (throttle) that stale timer later fires the next burst early (here at 64).
#[test]
fn difference_flush_disarms_the_old_timer() {
    let mut sim = Sim::new(PolicyConfig::throttle(64), Runs::Instant);
    sim.event_at(0); // leading fire, timer at 64
    sim.flush(); // nothing to fire
    assert_eq!(sim.engine.next_deadline(), None);
    sim.event_at(1);
    sim.event();
    sim.advance_to(10_000);
    assert_eq!(sim.fire_summary(), [(0, "leading", 1, 1), (65, "quiet", 2, 3)]);
}

/// lodash uses `Date.now()` and treats a clock that went back as a trailing
/// edge, firing at once; lull counts an earlier `now` as the latest seen.
#[test]
fn difference_time_never_goes_backwards() {
    let mut sim = Sim::new(debounce(100), Runs::Instant);
    sim.event_at(1_000);
    sim.engine.event(400); // the wall clock jumped back
    sim.engine.handle_timeout(450);
    sim.engine.handle_timeout(1_099);
    sim.drain();
    assert!(sim.fires().is_empty());
    sim.engine.handle_timeout(1_100);
    sim.drain();
    let fire = sim.last_fire();
    assert_eq!((fire.at, fire.span.count(), fire.span.last_at), (1_100, 2, 1_000));
}

/// lodash#6003: after the event loop was blocked past the deadline, lodash's
/// next call runs before the overdue timer and joins the old burst (no leading
/// fire; here lodash fires next at 44). lull serves the overdue deadline first:
/// the call starts a new window.
#[test]
fn difference_a_call_after_a_missed_deadline_starts_a_new_window() {
    let mut sim = Sim::new(leading(10), Runs::Instant);
    sim.event_at(0);
    sim.stall(34);
    sim.event();
    sim.advance_to(10_000);
    assert_eq!(sim.fire_summary(), [(0, "leading", 1, 1), (34, "leading", 2, 2)]);
}

/// lodash returns the previous call's (stale) result; lull tells each caller
/// which window it joined, so every caller of a window gets that window's result.
#[test]
fn events_in_one_turn_of_the_event_loop_leave_passed_deadlines_to_the_timer() {
    // debounce(fn) with lodash's 0 ms wait, called in a synchronous loop: no
    // timer can run inside the loop, so the calls coalesce into one run after it.
    let mut engine = Debouncer::new(policy(debounce(0)), 1);
    engine.event(0);
    for t in 1..=20 {
        engine.event_in_turn(t);
    }
    assert_eq!(engine.poll_action(), None, "nothing ran inside the loop");
    engine.handle_timeout(21); // the timer, once the turn is over
    let Some(Action::Fire(fire)) = engine.poll_action() else { panic!("one run after the loop") };
    assert_eq!((fire.at, fire.span.count()), (21, 21));
    // The same calls in separate turns: each finds the last one's timer missed
    // (lodash#6003's fix, right there, would make the loop a 1 ms throttle).
    let mut sim = Sim::new(debounce(0), Runs::Instant);
    for t in 0..=20 {
        sim.event_at(t);
    }
    assert_eq!(sim.fires().len(), 20);
}

#[test]
fn difference_every_event_knows_the_window_that_covers_it() {
    let mut sim = Sim::new(PolicyConfig { max_wait: Some(250), ..leading(100) }, Runs::Instant);
    let mut joined = Vec::new();
    for t in (0..1_000).step_by(40) {
        joined.push(sim.event_at(t));
    }
    sim.advance_to(10_000);
    let fires = sim.fires();
    for accepted in joined {
        let covering: Vec<_> = fires.iter().filter(|f| f.span.contains(accepted.seq)).collect();
        assert_eq!(covering.len(), 1);
        assert_eq!(covering[0].window, accepted.window);
    }
}

#[test]
fn far_future_times_saturate_instead_of_overflowing() {
    let mut sim = Sim::new(PolicyConfig { max_wait: Some(500), ..leading(100) }, Runs::Instant);
    sim.event_at(u64::MAX - 5);
    sim.event();
    assert_eq!(sim.engine.next_deadline(), Some(u64::MAX));
    sim.advance_to(u64::MAX);
    assert_eq!(sim.fire_summary().len(), 2);
}

// ---- execution lifecycle ---------------------------------------------------

#[test]
fn events_during_a_run_open_the_next_window_which_waits_for_the_run() {
    let mut sim = Sim::new(debounce(100), Runs::Manual);
    sim.event_at(0);
    sim.advance_to(100);
    let first = sim.last_fire().window;
    sim.event_at(150);
    sim.event_at(160);
    sim.advance_to(400); // due at 260, but the slot is taken
    assert_eq!(sim.fires().len(), 1, "never two runs at once");
    assert_eq!(sim.engine.status().open.and_then(|o| o.due), Some(Reason::Quiet));
    sim.event_at(410); // a due window keeps absorbing
    sim.succeed(first);
    assert_eq!(sim.fire_summary(), [(100, "quiet", 1, 1), (410, "quiet", 2, 4)]);
}

#[test]
fn seal_fires_the_open_window_as_full_and_the_next_event_opens_another() {
    let mut sim = Sim::new(debounce(100), Runs::Manual);
    sim.event_at(0);
    sim.event_at(10);
    sim.engine.seal(20);
    sim.drain();
    let sealed = sim.last_fire();
    assert_eq!((sealed.reason, sealed.span.count()), (Reason::Full, 2));
    let next = sim.event_at(30);
    assert_ne!(next.window, sealed.window, "the next event opens a new window");
    sim.advance_to(200); // it is due at 130, but the sealed window still runs
    assert_eq!(sim.engine.status().open.and_then(|o| o.due), Some(Reason::Quiet));
    sim.engine.seal(210); // a window already due keeps its reason and queues
    sim.drain();
    assert_eq!(sim.engine.queued().iter().map(|q| q.reason).collect::<Vec<_>>(), [Reason::Quiet]);
    sim.engine.seal(220); // nothing open: nothing happens
    sim.drain();
    assert_eq!(sim.fires().len(), 1);
    sim.succeed(sealed.window);
    assert_eq!(sim.fire_summary(), [(20, "full", 1, 2), (220, "quiet", 3, 3)]);
}

#[test]
fn supersede_replaces_the_running_window() {
    let mut sim = Sim::new(PolicyConfig { overlap: Overlap::Supersede, ..debounce(100) }, Runs::Manual);
    sim.event_at(0);
    sim.advance_to(100);
    let stale = sim.last_fire().window;
    sim.event_at(150);
    sim.advance_to(250);
    let fresh = sim.last_fire();
    assert_eq!(fresh.supersedes, Some(stale));
    assert_eq!(sim.engine.run_succeeded(stale, 260), Err(RunError::NotInFlight(stale)));
    sim.succeed(fresh.window);
    assert_eq!(sim.engine.stats().superseded, 1);
}

/// Found by the property test: a run's end reported after a missed deadline
/// applies to that run first; the overdue window then fires without superseding it.
#[test]
fn a_run_end_reported_late_is_applied_before_overdue_deadlines() {
    let config = PolicyConfig { overlap: Overlap::Supersede, ..leading(1) };
    let mut sim = Sim::new(config, Runs::Manual);
    sim.event_at(0); // leading fire: W1 runs
    sim.event(); // W2 opens, due at 1
    let first = sim.last_fire().window;
    sim.stall(2);
    sim.succeed(first);
    let second = sim.last_fire();
    assert_eq!((second.at, second.reason, second.supersedes), (2, Reason::Quiet, None));
    assert_eq!(sim.engine.stats().succeeded, 1);
    assert_eq!(sim.engine.status().run.map(|r| r.window), Some(second.window));
}

fn retrying(max_attempts: u32) -> PolicyConfig {
    PolicyConfig { retry: Retry::backoff(max_attempts, 100, 250), ..debounce(50) }
}

#[test]
fn retries_back_off_with_full_jitter_then_dead_letter_and_replay() {
    let mut sim = Sim::new(retrying(4), Runs::Manual);
    sim.event_at(0);
    sim.event_at(10);
    sim.advance_to(60);
    let window = sim.last_fire().window;
    let mut ceilings = Vec::new();
    for _ in 0..3 {
        let failed_at = sim.now;
        sim.fail(window);
        let Some((_, Action::RetryScheduled { at, attempt, .. })) = sim.log.last().copied() else {
            panic!("a retry is scheduled: {:?}", sim.log.last())
        };
        ceilings.push((attempt, at - failed_at));
        sim.advance_to(at);
        let retry = sim.last_fire();
        assert_eq!((retry.window, retry.reason, retry.attempt), (window, Reason::Retry, attempt));
    }
    for (attempt, delay) in &ceilings {
        let ceiling = [100, 200, 250][*attempt as usize - 2];
        assert!(*delay <= ceiling, "attempt {attempt}: delay {delay} over {ceiling}");
    }
    sim.fail(window);
    let status = sim.engine.status();
    assert_eq!(status.dead_letters.len(), 1);
    assert_eq!((status.dead_letters[0].window, status.dead_letters[0].attempts), (window, 4));
    assert_eq!(status.dead_letters[0].span.count(), 2, "the dead letter keeps its events");
    assert_eq!(sim.engine.stats().dead_lettered, 1);

    sim.replay(window);
    let replay = sim.last_fire();
    assert_eq!((replay.window, replay.reason, replay.attempt, replay.span.count()), (window, Reason::Replay, 1, 2));
    sim.succeed(window);
    assert!(sim.engine.status().dead_letters.is_empty());
}

#[test]
fn retry_jitter_is_full_and_reproducible_from_the_seed() {
    let delay = |seed: u64| {
        let mut engine = Debouncer::new(policy(retrying(2)), seed);
        engine.event(0);
        engine.handle_timeout(50);
        let Some(Action::Fire(fire)) = engine.poll_action() else { panic!("fires") };
        engine.run_failed(fire.window, 50).unwrap();
        match engine.poll_action() {
            Some(Action::RetryScheduled { at, .. }) => at - 50,
            other => panic!("retry expected: {other:?}"),
        }
    };
    assert_eq!(delay(9), delay(9));
    let delays: Vec<u64> = (0..2_000).map(delay).collect();
    assert!(delays.iter().all(|d| *d <= 100));
    let mean = delays.iter().sum::<u64>() as f64 / delays.len() as f64;
    assert!((45.0..55.0).contains(&mean), "uniform on 0..=100, mean {mean}");
    assert!(delays.contains(&0) && delays.contains(&100), "the whole range is drawn");
}

#[test]
fn retry_without_jitter_waits_exactly_the_ceiling_and_old_snapshots_mean_full_jitter() {
    let exact =
        PolicyConfig { retry: Retry { jitter: JitterMode::None, ..Retry::backoff(4, 100, 250) }, ..debounce(50) };
    for seed in [1, 2, 3] {
        let mut engine = Debouncer::new(policy(exact.clone()), seed);
        engine.event(0);
        engine.handle_timeout(50);
        let mut now = 50;
        let mut delays = Vec::new();
        while let Some(Action::Fire(fire)) = engine.poll_action() {
            now += 7;
            engine.run_failed(fire.window, now).unwrap();
            if let Some(Action::RetryScheduled { at, .. }) = engine.poll_action() {
                delays.push(at - now);
                now = at;
                engine.handle_timeout(now);
            }
        }
        assert_eq!(delays, [100, 200, 250], "seed {seed}: base, doubled, capped");
    }
    let old: Retry = serde_json::from_str(r#"{"max_attempts": 3, "base_ms": 10, "cap_ms": 20}"#).unwrap();
    assert_eq!(old, Retry::backoff(3, 10, 20));
    assert_eq!(old.jitter, JitterMode::Full);
}

#[test]
fn a_deferred_run_goes_again_as_the_same_attempt_and_spends_no_retry() {
    // Catches: a deferral counted as a failed attempt (attempt + 1, or a dead letter at max_attempts).
    let mut engine = Debouncer::new(policy(retrying(2)), 1);
    engine.event(0);
    engine.handle_timeout(50);
    let Some(Action::Fire(first)) = engine.poll_action() else { panic!("fires") };
    let mut now = 50;
    for _ in 0..5 {
        engine.run_deferred(first.window, now, now + 1_000).unwrap();
        assert_eq!(
            engine.poll_action(),
            Some(Action::RetryScheduled { window: first.window, attempt: 1, at: now + 1_000 }),
            "the same attempt, at the time given"
        );
        assert_eq!(engine.run_deferred(first.window, now, now), Err(RunError::NotInFlight(first.window)));
        now += 1_000;
        engine.handle_timeout(now);
        let Some(Action::Fire(again)) = engine.poll_action() else { panic!("fires again") };
        assert_eq!((again.window, again.attempt, again.reason, again.at), (first.window, 1, first.reason, now));
    }
    assert_eq!(engine.stats().windows, 1, "five deferrals, one window fired");
    // A real failure after deferrals is still attempt 1's: one retry left of max_attempts 2.
    engine.run_failed(first.window, now).unwrap();
    let Some(Action::RetryScheduled { attempt: 2, at, .. }) = engine.poll_action() else { panic!("a retry") };
    engine.handle_timeout(at);
    let Some(Action::Fire(retry)) = engine.poll_action() else { panic!("the retry fires") };
    assert_eq!((retry.attempt, retry.reason), (2, Reason::Retry));
    // Deferring the retry keeps its attempt and reason.
    engine.run_deferred(retry.window, at, at + 10).unwrap();
    engine.poll_action();
    engine.handle_timeout(at + 10);
    let Some(Action::Fire(again)) = engine.poll_action() else { panic!("fires again") };
    assert_eq!((again.attempt, again.reason), (2, Reason::Retry));
    engine.run_failed(again.window, at + 10).unwrap();
    assert!(matches!(engine.poll_action(), Some(Action::DeadLettered(_))), "attempt 2 of 2 failed: a dead letter");
}

#[test]
fn a_run_past_its_timeout_counts_as_failed() {
    let mut sim = Sim::new(PolicyConfig { run_timeout: Some(500), ..retrying(2) }, Runs::Manual);
    sim.event_at(0);
    sim.advance_to(50);
    let window = sim.last_fire().window;
    assert_eq!(sim.engine.next_deadline(), Some(550));
    sim.advance_to(550);
    assert!(sim.log.iter().any(|(_, a)| *a == Action::TimedOut { window, attempt: 1 }));
    assert_eq!(sim.engine.run_succeeded(window, 551), Err(RunError::NotInFlight(window)), "too late");
    let retry_at = sim.engine.status().run.and_then(|r| r.retry_at).expect("retry scheduled");
    sim.advance_to(retry_at);
    assert_eq!(sim.last_fire().attempt, 2);
    sim.succeed(window);
}

#[test]
fn a_new_policy_starts_with_the_next_burst_and_a_run_keeps_its_retry() {
    let exact = |attempts, base| Retry { jitter: JitterMode::None, ..Retry::backoff(attempts, base, base) };
    let old = PolicyConfig { retry: exact(2, 100), ..debounce(100) };
    let new = PolicyConfig { retry: exact(5, 700), ..debounce(300) };
    let mut sim = Sim::new(old.clone(), Runs::Manual);
    sim.event_at(0);
    sim.event_at(50);
    sim.engine.set_policy(policy(new.clone()), 60);
    assert_eq!(sim.engine.pending_policy(), Some(&policy(new.clone())), "a window is open: it waits");
    sim.advance_to(150);
    let first = sim.last_fire();
    assert_eq!((first.at, first.span.count()), (150, 2), "the open window keeps the old wait");
    assert_eq!(*sim.engine.policy(), policy(new.clone()), "taken once the burst is over");
    sim.event_at(200);
    sim.advance_to(1_000);
    assert_eq!(sim.fires().len(), 1, "the next window waits for the run");
    sim.fail(first.window);
    let Some((_, Action::RetryScheduled { at, .. })) = sim.log.last().copied() else { panic!("a retry") };
    assert_eq!(at, 1_100, "the run keeps the retry it started with");
    sim.advance_to(at);
    sim.fail(first.window);
    assert_eq!(sim.engine.status().dead_letters.len(), 1, "and its max_attempts");
    let second = sim.last_fire();
    assert_eq!((second.at, second.span.first_at), (1_100, 200), "due since 500 = 200 + the new wait");
    sim.fail(second.window);
    let Some((_, Action::RetryScheduled { at, .. })) = sim.log.last().copied() else { panic!("a retry") };
    assert_eq!(at, 1_800, "a run started after the change runs the new retry");
    sim.event_at(1_800);
    sim.engine.set_policy(policy(old.clone()), 1_800);
    assert!(sim.engine.pending_policy().is_some());
    sim.engine.set_policy(policy(new.clone()), 1_800);
    assert_eq!(sim.engine.pending_policy(), None, "setting the policy in force drops the pending one");
}

#[test]
fn the_horizon_says_until_when_events_only_add_to_the_window() {
    let mut engine =
        Debouncer::new(policy(PolicyConfig { max_wait: Some(130), max_batch: Some(10), ..debounce(100) }), 1);
    assert_eq!(engine.horizon(), None, "no window open: the next event starts a burst");
    engine.event(0);
    assert_eq!(
        engine.horizon(),
        Some(Horizon { until: 100, events: 8 }),
        "before the timer, and the batch stays under 10"
    );
    let last = engine.recorded(2, 60).unwrap();
    assert_eq!((last.seq, engine.next_deadline(), engine.poll_action()), (Seq(3), Some(100), None));
    engine.handle_timeout(100); // not quiet yet: re-armed for max_wait, at 130
    assert_eq!(engine.horizon(), Some(Horizon { until: 130, events: 6 }), "max_wait bounds it");
    engine.handle_timeout(130);
    assert!(matches!(engine.poll_action(), Some(Action::Fire(_))));
    assert_eq!(engine.horizon(), None, "the window fired: the next event opens one");
    let adaptive = PolicyConfig { wait: Wait::Auto(Adaptive::default()), ..debounce(100) };
    let mut engine = Debouncer::new(policy(adaptive), 1);
    engine.event(0);
    assert_eq!(engine.horizon(), None, "an adaptive wait learns from every gap");
}

#[test]
fn max_batch_fires_a_full_window_at_once() {
    let mut sim = Sim::new(PolicyConfig { max_batch: Some(3), ..debounce(100) }, Runs::Instant);
    for _ in 0..7 {
        sim.event();
    }
    sim.advance_to(10_000);
    assert_eq!(sim.fire_summary(), [(0, "full", 1, 3), (0, "full", 4, 6), (100, "quiet", 7, 7)]);
}

#[test]
fn full_windows_queue_behind_a_running_one_in_order() {
    let mut sim = Sim::new(PolicyConfig { max_batch: Some(2), ..debounce(100) }, Runs::Manual);
    sim.event();
    sim.event(); // full: fires, takes the slot
    for _ in 0..5 {
        sim.event_at(10);
    }
    let status = sim.engine.status();
    assert_eq!(status.queued.len(), 2);
    assert_eq!(status.open.map(|o| o.span.count()), Some(1));
    for t in [20, 30, 40] {
        sim.advance_to(t);
        let running = sim.last_fire().window;
        sim.succeed(running);
    }
    sim.advance_to(10_000);
    assert_eq!(sim.fire_summary(), [(0, "full", 1, 2), (20, "full", 3, 4), (30, "full", 5, 6), (110, "quiet", 7, 7)]);
}

#[test]
fn cancel_leaves_the_running_window_alone() {
    let mut sim = Sim::new(debounce(100), Runs::Manual);
    sim.event_at(0);
    sim.advance_to(100);
    let running = sim.last_fire().window;
    sim.event_at(120);
    sim.cancel();
    assert_eq!(sim.engine.status().run.map(|r| r.window), Some(running));
    sim.succeed(running);
    assert_eq!(sim.engine.stats().cancelled, 1);
}

#[test]
fn a_refused_call_changes_nothing() {
    let mut sim = Sim::new(retrying(1), Runs::Manual);
    sim.event_at(0);
    sim.advance_to(50);
    let running = sim.last_fire().window;
    sim.event_at(60);
    let before = serde_json::to_string(&sim.engine).unwrap();
    let stranger = WindowId(999);
    assert_eq!(sim.engine.run_succeeded(stranger, 70), Err(RunError::NotInFlight(stranger)));
    assert_eq!(sim.engine.run_failed(stranger, 70), Err(RunError::NotInFlight(stranger)));
    assert_eq!(sim.engine.replay(running, 70), Err(DeadLetterError::NotFound(running)));
    assert_eq!(sim.engine.discard(stranger), Err(DeadLetterError::NotFound(stranger)));
    assert_eq!(serde_json::to_string(&sim.engine).unwrap(), before);
    assert!(sim.engine.poll_action().is_none());
}

// ---- adaptive wait ---------------------------------------------------------

fn adaptive() -> PolicyConfig {
    PolicyConfig { wait: Wait::Auto(Adaptive::default()), ..debounce(0) }
}

#[test]
fn adaptive_wait_learns_the_median_gap_and_ignores_outliers() {
    let mut sim = Sim::new(adaptive(), Runs::Instant);
    assert_eq!(sim.engine.status().wait_ms, 300, "initial before enough gaps");
    let mut t = 0;
    for gap in [100, 100, 900, 100, 100, 100, 5_000, 100] {
        sim.event_at(t);
        t += gap;
    }
    sim.event_at(t);
    let status = sim.engine.status();
    assert_eq!(status.learned_gap_ms, Some(100), "a 900 ms pause does not move the median; 5 s is not learned");
    assert_eq!(status.wait_ms, 250, "2.5 × 100 ms");
}

#[test]
fn adaptive_wait_that_shrinks_moves_the_timer_earlier() {
    let mut sim = Sim::new(adaptive(), Runs::Instant);
    sim.event_at(0);
    assert_eq!(sim.engine.next_deadline(), Some(300), "the initial wait");
    for t in [10, 20, 30, 40] {
        sim.event_at(t);
    }
    // Four 10 ms gaps: 2.5 × 10 ms, clamped to the 100 ms minimum.
    assert_eq!(sim.engine.status().wait_ms, 100);
    assert_eq!(sim.engine.next_deadline(), Some(140));
    sim.advance_to(1_000);
    assert_eq!(sim.fire_summary(), [(140, "quiet", 1, 5)]);
}

#[test]
fn adaptive_wait_saves_requests_for_slow_typists_and_time_for_fast_ones() {
    let type_word = |config: PolicyConfig, gap: u64| {
        let mut sim = Sim::new(config, Runs::Instant);
        for i in 0..12 {
            sim.event_at(i * gap);
        }
        let last_key = 11 * gap;
        sim.advance_to(last_key + 10_000);
        (sim.fires().len(), sim.last_fire().at - last_key)
    };
    let fixed = debounce(300);
    // Slow typist (350 ms gaps): fixed 300 ms fires on every keystroke.
    let (fixed_fires, _) = type_word(fixed.clone(), 350);
    let (auto_fires, _) = type_word(adaptive(), 350);
    assert_eq!(fixed_fires, 12);
    assert!(auto_fires <= 5, "adaptive fired {auto_fires} times");
    // Fast typist (80 ms gaps): the result comes sooner after the last key.
    let (_, fixed_delay) = type_word(fixed, 80);
    let (_, auto_delay) = type_word(adaptive(), 80);
    assert_eq!((fixed_delay, auto_delay), (300, 200));
}

// ---- policy ----------------------------------------------------------------

#[test]
fn policy_validation_gives_typed_errors() {
    let bad = |config: PolicyConfig| config.build().unwrap_err();
    assert_eq!(
        bad(PolicyConfig { max_wait: Some(50), ..debounce(100) }),
        PolicyError::MaxWaitBelowWait { max_wait: 50, wait: 100 }
    );
    assert_eq!(bad(PolicyConfig { max_batch: Some(0), ..debounce(1) }), PolicyError::ZeroMaxBatch);
    assert_eq!(bad(PolicyConfig { retry: Retry::backoff(0, 0, 0), ..debounce(1) }), PolicyError::ZeroMaxAttempts);
    assert_eq!(
        bad(PolicyConfig { retry: Retry::backoff(2, 9, 1), ..debounce(1) }),
        PolicyError::RetryBaseAboveCap { base_ms: 9, cap_ms: 1 }
    );
    assert_eq!(bad(PolicyConfig { run_timeout: Some(0), ..debounce(1) }), PolicyError::ZeroRunTimeout);
    assert!(matches!(bad(debounce(1 << 60)), PolicyError::TooLarge { field: "wait", .. }));
    let auto = |a: Adaptive| PolicyConfig { wait: Wait::Auto(a), ..debounce(0) };
    assert_eq!(
        bad(auto(Adaptive { min_ms: 500, max_ms: 100, ..Adaptive::default() })),
        PolicyError::AutoMinAboveMax { min_ms: 500, max_ms: 100 }
    );
    assert_eq!(
        bad(auto(Adaptive { initial_ms: 5, ..Adaptive::default() })),
        PolicyError::AutoInitialOutOfRange { initial_ms: 5 }
    );
    assert_eq!(bad(auto(Adaptive { factor_percent: 0, ..Adaptive::default() })), PolicyError::AutoZeroFactor);
    assert_eq!(
        bad(PolicyConfig { max_wait: Some(999), ..auto(Adaptive::default()) }),
        PolicyError::MaxWaitBelowWait { max_wait: 999, wait: 1000 }
    );
    assert!(!bad(debounce(1 << 60)).to_string().is_empty());
}

#[test]
fn lodash_clamp_raises_max_wait_to_wait() {
    let config = PolicyConfig { max_wait: Some(50), ..debounce(100) }.clamp_max_wait();
    assert_eq!(config.max_wait, Some(100));
    assert!(config.build().is_ok());
    let throttle = PolicyConfig::throttle(200);
    assert_eq!((throttle.leading, throttle.trailing, throttle.max_wait), (true, true, Some(200)));
}

#[test]
fn a_policy_is_validated_again_when_deserialised() {
    let good = serde_json::to_string(&policy(PolicyConfig::throttle(100))).unwrap();
    assert!(serde_json::from_str::<lull_core::Policy>(&good).is_ok());
    let bad = good.replace("\"max_wait\":100", "\"max_wait\":5");
    let err = serde_json::from_str::<lull_core::Policy>(&bad).unwrap_err();
    assert!(err.to_string().contains("max_wait (5 ms) must be at least wait (100 ms)"), "{err}");
}

// ---- keyed -----------------------------------------------------------------

#[test]
fn keyed_serves_many_keys_behind_one_deadline() {
    let mut keyed: Keyed<&str> = Keyed::new(policy(debounce(100)), 1);
    keyed.event("title", 0);
    keyed.event("body", 30);
    keyed.event("title", 50);
    assert_eq!(keyed.next_deadline(), Some(100), "the earliest of all keys");
    let mut fired = Vec::new();
    let mut now = 0;
    while let Some(deadline) = keyed.next_deadline() {
        now = deadline;
        keyed.handle_timeout(now);
        while let Some((key, action)) = keyed.poll_action() {
            if let Action::Fire(fire) = action {
                fired.push((key, fire.at, fire.span.count()));
                keyed.run_succeeded(&key, fire.window, now).unwrap();
            }
        }
    }
    assert_eq!(fired, [("body", 130, 1), ("title", 150, 2)]);
    assert!(keyed.is_empty(), "idle keys are forgotten");
    assert_eq!(now, 150);
}

#[test]
fn keyed_flush_all_fires_every_key_and_ids_are_unique() {
    let mut keyed: Keyed<u32> = Keyed::new(policy(debounce(1_000)), 1);
    for key in 0..5 {
        keyed.event(key, 10);
    }
    keyed.flush_all(20);
    let mut windows = Vec::new();
    while let Some((key, action)) = keyed.poll_action() {
        let Action::Fire(fire) = action else { panic!("{action:?}") };
        assert_eq!((fire.reason, fire.at), (Reason::Flush, 20));
        windows.push(fire.window);
        keyed.run_succeeded(&key, fire.window, 20).unwrap();
    }
    windows.sort();
    windows.dedup();
    assert_eq!(windows.len(), 5);
    assert_eq!(keyed.next_deadline(), None);
}

#[test]
fn keyed_snapshot_restores_the_deadline_index() {
    let mut keyed: Keyed<String> = Keyed::new(policy(debounce(100)), 1);
    keyed.event("a".into(), 0);
    keyed.event("b".into(), 40);
    let json = serde_json::to_string(&keyed).unwrap();
    let restored: Keyed<String> = serde_json::from_str(&json).unwrap();
    assert_eq!(restored, keyed);
    assert_eq!(restored.next_deadline(), Some(100));
}

#[test]
fn a_keyed_group_keeps_at_most_max_idle_keys_and_forgets_the_one_idle_longest() {
    let mut keyed: Keyed<u64> = Keyed::new(policy(adaptive()), 1);
    let extra = 10;
    for k in 0..(MAX_IDLE_KEYS as u64 + extra) {
        let t = 1_000 + k;
        keyed.event(k, t);
        keyed.flush(&k, t);
        while let Some((key, action)) = keyed.poll_action() {
            if let Action::Fire(fire) = action {
                keyed.run_succeeded(&key, fire.window, t).unwrap();
            }
        }
    }
    assert_eq!(keyed.len(), MAX_IDLE_KEYS, "idle adaptive keys are bounded");
    assert!(keyed.keys().copied().eq(extra..MAX_IDLE_KEYS as u64 + extra), "the ones idle longest went first");
    // A forgotten key comes back as new: a window opens at its first event again.
    let again = keyed.event(0, 5_000);
    assert_eq!(keyed.status(&0).and_then(|s| s.open).map(|o| o.window), Some(again.window));
    assert_eq!(keyed.len(), MAX_IDLE_KEYS + 1, "a key with work to do is never forgotten for the bound");
}
