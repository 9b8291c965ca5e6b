//! A virtual-clock driver for the core's tests: it does what a real driver
//! does (arm the one timer at `next_deadline`, call `handle_timeout` there,
//! drain actions), with time advanced by the test instead of a real clock.
#![allow(dead_code)]

pub mod schedule;

use lull_core::{Accepted, Action, Debouncer, Fire, Policy, PolicyConfig, WindowId};

/// Runs end how: at once (a synchronous callback), or when the test says.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Runs {
    /// `run_succeeded` right after each fire, like a lodash callback.
    Instant,
    /// The test calls `succeed` / `fail`.
    Manual,
}

pub struct Sim {
    pub engine: Debouncer,
    pub now: u64,
    pub runs: Runs,
    /// Every action, with the time it was drained.
    pub log: Vec<(u64, Action)>,
}

pub fn policy(config: PolicyConfig) -> Policy {
    config.build().expect("test policy is valid")
}

impl Sim {
    pub fn new(config: PolicyConfig, runs: Runs) -> Self {
        Sim { engine: Debouncer::new(policy(config), 7), now: 0, runs, log: Vec::new() }
    }

    pub fn from_engine(engine: Debouncer, now: u64, runs: Runs) -> Self {
        Sim { engine, now, runs, log: Vec::new() }
    }

    /// Take the engine's pending actions (and end runs, with `Runs::Instant`).
    pub fn drain(&mut self) {
        while let Some(action) = self.engine.poll_action() {
            self.log.push((self.now, action));
            if let (Runs::Instant, Action::Fire(fire)) = (self.runs, action) {
                self.engine.run_succeeded(fire.window, self.now).expect("the fired run is in flight");
            }
        }
    }

    /// Let time pass to `t`, serving every deadline on time.
    pub fn advance_to(&mut self, t: u64) {
        while let Some(deadline) = self.engine.next_deadline().filter(|d| *d <= t) {
            self.now = self.now.max(deadline);
            self.engine.handle_timeout(self.now);
            self.drain();
        }
        self.now = self.now.max(t);
    }

    pub fn advance(&mut self, dt: u64) {
        self.advance_to(self.now + dt);
    }

    /// Let time pass with the event loop blocked: no deadline is served.
    pub fn stall(&mut self, dt: u64) {
        self.now += dt;
    }

    pub fn event(&mut self) -> Accepted {
        let accepted = self.engine.event(self.now);
        self.drain();
        accepted
    }

    pub fn event_at(&mut self, t: u64) -> Accepted {
        self.advance_to(t);
        self.event()
    }

    pub fn flush(&mut self) {
        self.engine.flush(self.now);
        self.drain();
    }

    pub fn cancel(&mut self) {
        self.engine.cancel(self.now);
        self.drain();
    }

    pub fn succeed(&mut self, window: WindowId) {
        self.engine.run_succeeded(window, self.now).expect("run in flight");
        self.drain();
    }

    pub fn fail(&mut self, window: WindowId) {
        self.engine.run_failed(window, self.now).expect("run in flight");
        self.drain();
    }

    pub fn replay(&mut self, window: WindowId) {
        self.engine.replay(window, self.now).expect("a dead letter");
        self.drain();
    }

    /// Every fire so far.
    pub fn fires(&self) -> Vec<Fire> {
        self.log
            .iter()
            .filter_map(|(_, a)| match a {
                Action::Fire(f) => Some(*f),
                _ => None,
            })
            .collect()
    }

    /// (time, reason, first seq, last seq) of every fire: compact for asserts.
    pub fn fire_summary(&self) -> Vec<(u64, &'static str, u64, u64)> {
        self.fires().iter().map(|f| (f.at, f.reason.as_str(), f.span.first.0, f.span.last.0)).collect()
    }

    /// The last fire.
    pub fn last_fire(&self) -> Fire {
        *self.fires().last().expect("something fired")
    }
}

/// A small deterministic generator for test traces (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`%.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Log-normal with this median and sigma (Box–Muller).
    pub fn log_normal(&mut self, median: f64, sigma: f64) -> f64 {
        let normal = (-2.0 * self.unit().ln()).sqrt() * (2.0 * std::f64::consts::PI * self.unit()).cos();
        median * (sigma * normal).exp()
    }
}
