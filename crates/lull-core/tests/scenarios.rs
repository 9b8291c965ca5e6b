//! The reference scenarios of DESIGN.md, on a virtual clock, with
//! `wait = 10 s` and `max_wait = 60 s` (times in ms).
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use lull_core::{Action, Debouncer, PolicyConfig, Reason, Retry};
use support::{Runs, Sim};

const S: u64 = 1_000;

fn reference() -> PolicyConfig {
    PolicyConfig { max_wait: Some(60 * S), ..PolicyConfig::debounce(10 * S) }
}

#[test]
fn scenario_1_one_event_runs_once_after_wait() {
    let mut sim = Sim::new(reference(), Runs::Instant);
    sim.event_at(0);
    sim.advance_to(600 * S);
    assert_eq!(sim.fire_summary(), [(10 * S, "quiet", 1, 1)]);
}

#[test]
fn scenario_2_a_burst_runs_once_with_every_event() {
    let mut sim = Sim::new(reference(), Runs::Instant);
    for t in [0, 3, 7] {
        sim.event_at(t * S);
    }
    sim.advance_to(600 * S);
    assert_eq!(sim.fire_summary(), [(17 * S, "quiet", 1, 3)]);
    let fire = sim.last_fire();
    assert_eq!((fire.span.first_at, fire.span.last_at), (0, 7 * S));
}

#[test]
fn scenario_3_a_steady_stream_is_bounded_by_max_wait_and_never_starved() {
    let mut sim = Sim::new(reference(), Runs::Instant);
    for t in (0..=65).step_by(5) {
        sim.event_at(t * S);
    }
    sim.advance_to(600 * S);
    // Events at 0..=55 s are forced out at 60 s; 60 s and 65 s run once they go quiet.
    assert_eq!(sim.fire_summary(), [(60 * S, "max_wait", 1, 12), (75 * S, "quiet", 13, 14)]);
}

#[test]
fn scenario_4_an_event_after_a_run_starts_a_fresh_window() {
    let mut sim = Sim::new(reference(), Runs::Instant);
    sim.event_at(0);
    sim.advance_to(30 * S);
    sim.event_at(30 * S);
    sim.advance_to(600 * S);
    let fires = sim.fires();
    assert_eq!(sim.fire_summary(), [(10 * S, "quiet", 1, 1), (40 * S, "quiet", 2, 2)]);
    assert_ne!(fires[0].window, fires[1].window);
}

#[test]
fn scenario_5_events_during_a_run_make_exactly_one_follow_up_run() {
    // A run shorter than `wait`: the follow-up goes quiet after the run ended.
    let mut sim = Sim::new(reference(), Runs::Manual);
    sim.event_at(0);
    sim.advance_to(10 * S);
    let first = sim.last_fire().window;
    for t in [11, 12, 13] {
        sim.event_at(t * S);
    }
    sim.advance_to(15 * S);
    sim.succeed(first);
    sim.advance_to(600 * S);
    let follow_up = sim.last_fire();
    sim.succeed(follow_up.window);
    assert_eq!(sim.fire_summary(), [(10 * S, "quiet", 1, 1), (23 * S, "quiet", 2, 4)]);

    // A run longer than `wait`: the follow-up becomes due during the run, keeps
    // absorbing, and runs once, as soon as the first run ends.
    let mut sim = Sim::new(reference(), Runs::Manual);
    sim.event_at(0);
    sim.advance_to(10 * S);
    let first = sim.last_fire().window;
    for t in [11, 12, 13, 30, 35] {
        sim.event_at(t * S);
    }
    sim.advance_to(40 * S);
    sim.succeed(first);
    sim.advance_to(600 * S);
    assert_eq!(sim.fire_summary(), [(10 * S, "quiet", 1, 1), (40 * S, "quiet", 2, 6)]);
}

#[test]
fn scenario_6_a_failing_target_retries_dead_letters_and_survives_a_restart() {
    let config = PolicyConfig { retry: Retry::backoff(3, 2 * S, 30 * S), ..reference() };
    let mut sim = Sim::new(config, Runs::Manual);
    sim.event_at(0);
    sim.event_at(S);
    sim.advance_to(11 * S);
    let window = sim.last_fire().window;
    sim.fail(window);

    // Restart mid-backoff: the state goes through its snapshot.
    let snapshot = serde_json::to_string(&sim.engine).unwrap();
    let restored: Debouncer = serde_json::from_str(&snapshot).unwrap();
    let mut sim = Sim::from_engine(restored, sim.now, Runs::Manual);
    let retry_at = sim.engine.status().run.and_then(|r| r.retry_at).expect("backoff survives");
    sim.advance_to(retry_at);
    assert_eq!((sim.last_fire().reason, sim.last_fire().attempt), (Reason::Retry, 2));
    sim.fail(window);
    sim.advance_to(600 * S);
    sim.fail(window);
    let status = sim.engine.status();
    assert_eq!(status.dead_letters.len(), 1, "visible in status");
    assert_eq!(status.dead_letters[0].span.count(), 2, "nothing lost");
    assert!(sim.log.iter().any(|(_, a)| matches!(a, Action::DeadLettered(d) if d.window == window)));
    sim.replay(window);
    assert_eq!(sim.last_fire().reason, Reason::Replay);
    sim.succeed(window);
    assert!(sim.engine.status().dead_letters.is_empty());
}
