//! [`WorkersClock`]: the queue side's [`Clock`] (the consumer's and the gate
//! object's) over `Date.now()`, workers-rs' timer and the console.

use std::time::Duration;

use worker::{Delay, console_log};

use super::http::now_ms;
use crate::ports::Clock;

/// [`Clock`] over `Date.now()`, a timer and the console.
pub(super) struct WorkersClock;

impl Clock for WorkersClock {
    fn now(&self) -> u64 {
        now_ms()
    }

    async fn sleep(&self, ms: u64) {
        Delay::from(Duration::from_millis(ms)).await;
    }

    fn log(&self, line: &str) {
        console_log!("{line}");
    }
}
