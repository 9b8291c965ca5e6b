//! The full engine: many keys behind one timer ([`lull_core::Keyed`]):
//! `debounceKeyed`, and `debounceAsync` and `bindSearch` on one key each.
//!
//! Keys cross as numbers the driver assigns; a key the group forgot (idle)
//! answers 0 to `keyed_has`, and the driver may forget its number too.

use lull_core::{Action, Keyed, Overlap, PolicyConfig, WindowId};

use crate::table::Table;
use crate::time::{ms, opt, opt_ms};
use crate::{actions, exports, policy};

static GROUPS: Table<Keyed<u32>> = Table::new();

pub(crate) fn live() -> u32 {
    GROUPS.live()
}

fn with<R>(h: u32, absent: R, f: impl FnOnce(&mut Keyed<u32>) -> R) -> R {
    GROUPS.with(h, absent, f)
}

/// A key as it crosses: a number from 0, or negative for every key.
fn one(key: f64) -> Option<u32> {
    (key >= 0.0).then_some(key as u32)
}

exports! {
    /// A new group: lodash's timing (see [`policy::timing`]); with
    /// `supersede` a newer run replaces a running one (else it waits for it),
    /// and a run not ended `timeout` ms after it fired has failed (negative:
    /// none). Its handle, or a negative [`policy::refusal`] code.
    pub fn keyed_create(
        seed: f64,
        wait: f64,
        max_wait: f64,
        leading: u32,
        trailing: u32,
        supersede: u32,
        timeout: f64,
    ) -> i32 {
        let config = PolicyConfig {
            overlap: if supersede != 0 { Overlap::Supersede } else { Overlap::Queue },
            run_timeout: opt_ms(timeout),
            ..policy::timing(wait, max_wait, leading, trailing).policy()
        };
        // The seed is the driver's `Math.random() * 2^53`, for the retry jitter.
        match config.build() {
            Ok(p) => GROUPS.add(Keyed::new(p, ms(seed))).map_or(policy::UNUSABLE, |h| h as i32),
            Err(e) => policy::refusal(&e),
        }
    }

    /// Let the group go.
    pub fn keyed_free(h: u32) {
        GROUPS.free(h)
    }

    /// One event for `key` at `now`: the window it joined.
    pub fn keyed_event(h: u32, key: u32, now: f64) -> f64 {
        with(h, -1.0, |g| g.event(key, ms(now)).window.0 as f64)
    }

    /// The group's timer went off at `now`.
    pub fn keyed_timeout(h: u32, now: f64) {
        with(h, (), |g| g.handle_timeout(ms(now)))
    }

    /// When the group's timer must go off next, or -1.
    pub fn keyed_deadline(h: u32) -> f64 {
        with(h, -1.0, |g| opt(g.next_deadline()))
    }

    /// The next action's kind; its key and fields through `action_*`. A
    /// dead letter is discarded as it is reported (a page keeps none: its
    /// callers were already told).
    pub fn keyed_poll(h: u32) -> u32 {
        match with(h, None, |g| {
            let polled = g.poll_action();
            if let Some((key, Action::DeadLettered(letter))) = &polled {
                let _ = g.discard(key, letter.window);
            }
            polled
        }) {
            Some((key, action)) => actions::note(Some(action), key),
            None => actions::note(None, 0),
        }
    }

    /// Fire `key`'s open window now; every key's for a negative `key`.
    pub fn keyed_flush(h: u32, key: f64, now: f64) {
        with(h, (), |g| match one(key) {
            Some(key) => g.flush(&key, ms(now)),
            None => g.flush_all(ms(now)),
        })
    }

    /// Drop `key`'s open window; every key's for a negative `key`.
    pub fn keyed_cancel(h: u32, key: f64, now: f64) {
        with(h, (), |g| match one(key) {
            Some(key) => g.cancel(&key, ms(now)),
            None => g.cancel_all(ms(now)),
        })
    }

    /// Forget `key` altogether (cancel it first).
    pub fn keyed_remove(h: u32, key: u32) {
        with(h, (), |g| {
            g.remove(&key);
        })
    }

    /// The run of `key`'s `window` ended at `now`, well (`ok`) or not: 1, or
    /// 0 if it was not in flight.
    pub fn keyed_ended(h: u32, key: u32, window: f64, ok: u32, now: f64) -> u32 {
        let (window, now) = (WindowId(ms(window)), ms(now));
        with(h, 0, |g| {
            let ended = if ok != 0 { g.run_succeeded(&key, window, now) } else { g.run_failed(&key, window, now) };
            ended.is_ok() as u32
        })
    }

    /// Whether `key` has a call pending (1 or 0); any key for a negative `key`.
    pub fn keyed_pending(h: u32, key: f64) -> u32 {
        with(h, 0, |g| match one(key) {
            Some(key) => g.pending(&key),
            None => g.keys().any(|k| g.pending(k)),
        } as u32)
    }

    /// The quiet period in force for `key` (ms, as learned with an adaptive
    /// wait), or -1 if the group does not hold it.
    pub fn keyed_wait(h: u32, key: u32) -> f64 {
        with(h, -1.0, |g| g.wait_ms(&key).map_or(-1.0, |ms| ms as f64))
    }

    /// Whether the group still holds `key` (1 or 0): an idle key is forgotten.
    pub fn keyed_has(h: u32, key: u32) -> u32 {
        with(h, 0, |g| g.contains(&key) as u32)
    }

    /// How many keys the group holds.
    pub fn keyed_len(h: u32) -> u32 {
        with(h, 0, |g| g.len() as u32)
    }
}
