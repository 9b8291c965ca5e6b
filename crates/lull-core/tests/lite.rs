//! [`Lite`] against [`Debouncer`]: for any policy and any sequence of inputs,
//! the small engine fires and drops exactly what the full one does when each
//! run ends as it is polled — same calls, same reasons, same deadlines,
//! horizons and learned waits. The full one is held to lodash by the
//! differential test, so this carries lodash's timing over to `Lite`.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use lull_core::{Action, Adaptive, Debouncer, Lite, LiteAction, PolicyConfig, PolicyError, Reason, Retry, Wait};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// A call `dt` ms after the last input.
    Event(u64),
    /// A call in the same turn of the event loop as the last one.
    EventInTurn(u64),
    /// The timer goes off `late` ms after its deadline (or `dt` after now if none is armed).
    Timeout(u64),
    Flush(u64),
    Cancel(u64),
    /// `n` calls kept under the horizon, then handed in, the last `offset`
    /// ms (modulo the time left) after the last input.
    Kept(u64, u64),
    /// A call stamped `dt` ms before the last input (a driver's two clocks disagree).
    Back(u64),
    /// The timer goes off `dt` ms after the last input, due or not (browsers fire early past 2^31 ms).
    Early(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..120u64).prop_map(Op::Event),
        2 => (0..5u64).prop_map(Op::EventInTurn),
        4 => (0..40u64).prop_map(Op::Timeout),
        1 => (0..60u64).prop_map(Op::Flush),
        1 => (0..60u64).prop_map(Op::Cancel),
        2 => (1..8u64, 0..10_000u64).prop_map(|(n, offset)| Op::Kept(n, offset)),
        1 => (0..30u64).prop_map(Op::Back),
        1 => (0..30u64).prop_map(Op::Early),
    ]
}

fn policy() -> impl Strategy<Value = PolicyConfig> {
    let wait = prop_oneof![
        3 => (0..150u64).prop_map(Wait::Fixed),
        1 => (0..50u64, 0..200u64, 0..=100u64, 1..300u32).prop_map(|(min, extra, at, factor)| {
            Wait::Auto(Adaptive { factor_percent: factor, min_ms: min, max_ms: min + extra, initial_ms: min + extra * at / 100 })
        }),
    ];
    (wait, prop::option::of(0..250u64), any::<bool>(), prop::bool::weighted(0.85)).prop_map(
        |(wait, extra, leading, trailing)| PolicyConfig {
            max_wait: extra.map(|e| wait.longest() + e),
            wait,
            leading,
            trailing,
            ..PolicyConfig::debounce(0)
        },
    )
}

/// What an engine asked for: fire or drop, the window's last call, why.
type Step = (bool, u64, String);

/// Drain the full engine, ending each run as it is polled.
fn drain_full(engine: &mut Debouncer) -> Vec<Step> {
    let mut steps = Vec::new();
    while let Some(action) = engine.poll_action() {
        match action {
            Action::Fire(fire) => {
                steps.push((true, fire.span.last.0, format!("{:?}", fire.reason)));
                // The run ends at once: at the time it fired (the engine's clock).
                engine.run_succeeded(fire.window, fire.at).unwrap();
            }
            Action::Dropped(dropped) => steps.push((false, dropped.span.last.0, format!("{:?}", dropped.cause))),
            other => panic!("a sync debouncer never sees {other:?}"),
        }
    }
    steps
}

fn drain_lite(engine: &mut Lite) -> Vec<Step> {
    let mut steps = Vec::new();
    while let Some(action) = engine.poll_action() {
        steps.push(match action {
            LiteAction::Fire { last, reason } => (true, last.0, format!("{reason:?}")),
            LiteAction::Dropped { last, cause } => (false, last.0, format!("{cause:?}")),
        });
    }
    steps
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    #[test]
    fn lite_does_what_the_debouncer_does(config in policy(), ops in prop::collection::vec(op(), 1..80)) {
        let mut full = Debouncer::new(config.clone().build().unwrap(), 1);
        let mut lite = Lite::new(config).unwrap();
        let mut now = 1_000u64;
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Event(dt) => {
                    now += dt;
                    prop_assert_eq!(full.event(now).seq, lite.event(now));
                }
                Op::EventInTurn(dt) => {
                    now += dt;
                    prop_assert_eq!(full.event_in_turn(now).seq, lite.event_in_turn(now));
                }
                Op::Timeout(late) => {
                    now = full.next_deadline().map_or(now + late, |d| now.max(d + late));
                    full.handle_timeout(now);
                    lite.handle_timeout(now);
                }
                Op::Flush(dt) => {
                    now += dt;
                    full.flush(now);
                    lite.flush(now);
                }
                Op::Cancel(dt) => {
                    now += dt;
                    full.cancel(now);
                    lite.cancel(now);
                }
                Op::Back(dt) => {
                    prop_assert_eq!(full.event(now - dt).seq, lite.event(now - dt));
                }
                Op::Early(dt) => {
                    now += dt;
                    full.handle_timeout(now);
                    lite.handle_timeout(now);
                }
                Op::Kept(n, offset) => {
                    let (Some(a), Some(b)) = (full.horizon(), lite.horizon()) else { continue };
                    prop_assert_eq!(a, b);
                    // A driver keeps calls on its side only before the horizon; a call
                    // at or past it (possible here after `Back` events) goes to the engine.
                    if now >= a.until {
                        continue;
                    }
                    // Any time from now to just before the horizon.
                    let at = now + offset % (a.until - now);
                    prop_assert_eq!(full.recorded(n, at).map(|x| x.seq), lite.recorded(n, at));
                    now = at;
                }
            }
            prop_assert_eq!(drain_full(&mut full), drain_lite(&mut lite), "step {} ({:?})", i, op);
            prop_assert_eq!(full.next_deadline(), lite.next_deadline());
            prop_assert_eq!(full.pending(), lite.pending());
            prop_assert_eq!(full.horizon(), lite.horizon());
            prop_assert_eq!(full.wait_ms(), lite.wait_ms());
        }
    }
}

#[test]
fn lite_refuses_the_run_lifecycle() {
    let asks = [
        PolicyConfig { max_batch: Some(3), ..PolicyConfig::debounce(10) },
        PolicyConfig { retry: Retry::backoff(3, 10, 100), ..PolicyConfig::debounce(10) },
        PolicyConfig { run_timeout: Some(50), ..PolicyConfig::debounce(10) },
    ];
    for config in asks {
        assert_eq!(Lite::new(config).err(), Some(PolicyError::NotInLite));
    }
    let bad = PolicyConfig { max_wait: Some(5), ..PolicyConfig::debounce(10) };
    assert_eq!(Lite::new(bad).err(), Some(PolicyError::MaxWaitBelowWait { max_wait: 5, wait: 10 }));
}

/// A hand-checked burst, so the property above is not two engines agreeing on nothing.
#[test]
fn lite_runs_a_burst_once_after_the_quiet_period() {
    let mut lite = Lite::new(PolicyConfig::debounce(100)).unwrap();
    lite.event(0);
    lite.event(50);
    assert_eq!(lite.next_deadline(), Some(100));
    lite.handle_timeout(100);
    assert_eq!(lite.poll_action(), None, "not quiet yet");
    assert_eq!(lite.next_deadline(), Some(150));
    lite.handle_timeout(150);
    let fired = lite.poll_action();
    assert!(matches!(fired, Some(LiteAction::Fire { last, reason: Reason::Quiet }) if last.0 == 2), "{fired:?}");
    assert!(!lite.pending());
}

/// Calls handed in as kept under the horizon when they were not are refused,
/// and change nothing: with a 0 ms `max_wait` each would fire its own window,
/// more actions than one input may leave.
#[test]
fn lite_refuses_kept_calls_past_the_horizon() {
    let mut lite =
        Lite::new(PolicyConfig { max_wait: Some(100), leading: true, ..PolicyConfig::debounce(100) }).unwrap();
    assert_eq!(lite.recorded(3, 10), None, "no window open: no horizon");
    assert_eq!(lite.event(0), lull_core::Seq(1));
    assert!(matches!(lite.poll_action(), Some(LiteAction::Fire { reason: Reason::Leading, .. })));
    let until = lite.horizon().map(|h| h.until);
    assert_eq!(until, None, "the leading call fired: nothing open to add to");
    assert_eq!(lite.event(20), lull_core::Seq(2));
    let until = lite.horizon().expect("a window open").until;
    assert_eq!(lite.recorded(5, until), None, "at the horizon");
    assert_eq!((lite.poll_action(), lite.next_deadline()), (None, Some(100)), "nothing changed");
    assert_eq!(lite.recorded(5, until - 1), Some(lull_core::Seq(7)));
    assert_eq!(lite.poll_action(), None, "calls under the horizon only add to the window");
    lite.handle_timeout(100);
    assert!(matches!(lite.poll_action(), Some(LiteAction::Fire { last, .. }) if last.0 == 7));
}
