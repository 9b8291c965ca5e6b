//! [`WorkersClock`]: the queue side's [`Clock`] (the consumer's and the gate
//! object's) over `Date.now()`, workers-rs' timer, the console and
//! Analytics Engine ([`Points`]).

use std::time::Duration;

use worker::{Delay, console_log};

use super::http::now_ms;
use super::points::Points;
use crate::metrics::{Metrics, Point};
use crate::ports::Clock;

/// [`Clock`] over `Date.now()`, a timer, the console and data points.
pub(super) struct WorkersClock {
    /// Where data points go.
    pub points: Points,
}

impl Metrics for WorkersClock {
    fn point(&self, point: Point) {
        self.points.point(point);
    }
}

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
