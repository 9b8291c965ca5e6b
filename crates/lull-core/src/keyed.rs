//! [`Keyed`]: many keys' windows behind one deadline (one timer in a page).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::action::{Accepted, Action, DeadLetter, WindowId};
use crate::error::{DeadLetterError, RunError};
use crate::jitter::Jitter;
use crate::lane::{Env, Lane, Order, Reached};
use crate::policy::Policy;
use crate::sorted::{SortedMap, SortedSet};
use crate::status::Status;

/// One policy, many keys, one timer: e.g. autosave per form field.
///
/// Each key behaves exactly like its own [`Debouncer`](crate::Debouncer)
/// (same guarantees), but the group has a single
/// [`next_deadline`](Self::next_deadline), kept in an ordered index
/// (O(log n) per change, no scan), and window ids unique across the group.
/// [`handle_timeout`](Self::handle_timeout) serves due keys in deadline order
/// (ties by key order). Actions come out tagged with their key.
///
/// A key with nothing left to do (no window, run or dead letter, burst over,
/// fixed wait) is forgotten, so idle keys cost no memory. An idle adaptive key
/// keeps its learned rhythm, up to [`MAX_IDLE_KEYS`] of them: past that the
/// one idle longest is forgotten (it starts again from the initial wait), or
/// [`remove`](Self::remove) one yourself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keyed<K: Ord> {
    policy: Policy,
    clock: u64,
    next_window: u64,
    jitter: Jitter,
    lanes: SortedMap<K, Box<Lane>>,
    index: SortedSet<(u64, K)>,
    /// Idle keys still held (adaptive ones), by when they went idle.
    idle: SortedSet<(u64, K)>,
    actions: VecDeque<(K, Action)>,
}

/// Idle adaptive keys a [`Keyed`] group keeps at most (each holds its learned gaps).
pub const MAX_IDLE_KEYS: usize = 1_000;

impl<K: Ord + Clone> Keyed<K> {
    /// A new group. `seed` feeds the retry jitter.
    pub fn new(policy: Policy, seed: u64) -> Self {
        Keyed {
            policy,
            clock: 0,
            next_window: 0,
            jitter: Jitter::new(seed),
            lanes: SortedMap::new(),
            index: SortedSet::new(),
            idle: SortedSet::new(),
            actions: VecDeque::new(),
        }
    }

    /// The policy every key runs.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    fn tick(&mut self, now: u64) -> u64 {
        self.clock = now.max(self.clock);
        self.clock
    }

    /// Run `op` on `key`'s `lane` at the clamped `now`, in `order` with the
    /// lane's deadlines before it; then re-index the lane and put it back, unless dormant.
    fn with_lane<R>(
        &mut self,
        key: &K,
        mut lane: Box<Lane>,
        now: u64,
        order: Order,
        op: impl FnOnce(&mut Lane, u64, &mut Env<'_>) -> R,
    ) -> R {
        let now = self.tick(now);
        let before = lane.deadline();
        if let Some(since) = lane.idle_since() {
            self.idle.remove(&(since, key.clone()));
        }
        let Keyed { policy, next_window, jitter, lanes, index, idle, actions, .. } = self;
        let mut push = |action| actions.push_back((key.clone(), action));
        let mut env = Env { policy, next_window, jitter, out: &mut push };
        let result = lane.apply(now, order, &mut env, op);
        let after = lane.deadline();
        if before != after {
            if let Some(d) = before {
                index.remove(&(d, key.clone()));
            }
            if let Some(d) = after {
                index.insert((d, key.clone()));
            }
        }
        if !lane.is_dormant(now, policy) {
            if let Some(since) = lane.idle_since() {
                idle.insert((since, key.clone()));
            }
            lanes.insert(key.clone(), lane);
        }
        while idle.len() > MAX_IDLE_KEYS {
            if let Some((_, oldest)) = idle.pop_first() {
                lanes.remove(&oldest);
            }
        }
        result
    }

    /// [`with_lane`](Self::with_lane) on a key the group holds.
    fn step<R>(
        &mut self,
        key: &K,
        now: u64,
        order: Order,
        op: impl FnOnce(&mut Lane, u64, &mut Env<'_>) -> R,
    ) -> Option<R> {
        let lane = self.lanes.remove(key)?;
        Some(self.with_lane(key, lane, now, order, op))
    }

    /// Accept one event for `key` at `now`.
    pub fn event(&mut self, key: K, now: u64) -> Accepted {
        let lane = self.lanes.remove(&key).unwrap_or_else(|| Box::new(Lane::new(&self.policy)));
        self.with_lane(&key, lane, now, Order::DeadlinesFirst, |lane, now, env| lane.event(now, env))
    }

    /// The group's deadline is reached: serve every key due by `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        let now = self.tick(now);
        while let Some((deadline, key)) = self.index.first().cloned() {
            if deadline > now {
                break;
            }
            self.step(&key, now, Order::DeadlinesFirst, |lane, now, env| lane.expire(now, Reached::AtOrBefore, env));
        }
    }

    /// The earliest deadline of any key (ms).
    pub fn next_deadline(&self) -> Option<u64> {
        self.index.first().map(|(deadline, _)| *deadline)
    }

    /// The next action and the key it is for, oldest first.
    pub fn poll_action(&mut self) -> Option<(K, Action)> {
        self.actions.pop_front()
    }

    /// Fire `key`'s open window now.
    pub fn flush(&mut self, key: &K, now: u64) {
        self.step(key, now, Order::DeadlinesFirst, |lane, now, env| lane.flush(now, env));
    }

    /// Fire every key's open window now, in key order (e.g. the page is being hidden).
    pub fn flush_all(&mut self, now: u64) {
        for key in self.lanes.keys().cloned().collect::<Vec<_>>() {
            self.flush(&key, now);
        }
    }

    /// Drop `key`'s open and queued windows and end its burst, overdue or not.
    pub fn cancel(&mut self, key: &K, now: u64) {
        self.step(key, now, Order::OperationFirst, |lane, _, env| lane.cancel(env));
    }

    /// [`cancel`](Self::cancel) every key.
    pub fn cancel_all(&mut self, now: u64) {
        for key in self.lanes.keys().cloned().collect::<Vec<_>>() {
            self.cancel(&key, now);
        }
    }

    fn check_run(&self, key: &K, window: WindowId, now: u64) -> Result<(), RunError> {
        let lane = self.lanes.get(key).ok_or(RunError::NotInFlight(window))?;
        lane.check_in_flight(window, now.max(self.clock))
    }

    /// `key`'s run of `window` succeeded.
    ///
    /// # Errors
    ///
    /// [`RunError::NotInFlight`] unless that run is in flight; nothing changes.
    pub fn run_succeeded(&mut self, key: &K, window: WindowId, now: u64) -> Result<(), RunError> {
        self.check_run(key, window, now)?;
        self.step(key, now, Order::OperationFirst, |lane, now, env| lane.succeeded(now, env));
        Ok(())
    }

    /// `key`'s run of `window` failed.
    ///
    /// # Errors
    ///
    /// [`RunError::NotInFlight`] unless that run is in flight; nothing changes.
    pub fn run_failed(&mut self, key: &K, window: WindowId, now: u64) -> Result<(), RunError> {
        self.check_run(key, window, now)?;
        self.step(key, now, Order::OperationFirst, |lane, now, env| lane.failed(now, env));
        Ok(())
    }

    /// Run `key`'s dead-lettered `window` again.
    ///
    /// # Errors
    ///
    /// [`DeadLetterError::NotFound`] if `window` is not one of `key`'s dead letters.
    pub fn replay(&mut self, key: &K, window: WindowId, now: u64) -> Result<(), DeadLetterError> {
        let lane = self.lanes.get(key).ok_or(DeadLetterError::NotFound(window))?;
        lane.check_dead_letter(window)?;
        let replayed = self.step(key, now, Order::DeadlinesFirst, |lane, now, env| lane.replay(window, now, env));
        replayed.unwrap_or(Err(DeadLetterError::NotFound(window)))
    }

    /// Forget `key`'s dead-lettered `window` and return it.
    ///
    /// # Errors
    ///
    /// [`DeadLetterError::NotFound`] if `window` is not one of `key`'s dead letters.
    pub fn discard(&mut self, key: &K, window: WindowId) -> Result<DeadLetter, DeadLetterError> {
        let now = self.clock;
        let discarded = self.step(key, now, Order::DeadlinesFirst, |lane, _, _| lane.discard(window));
        discarded.unwrap_or(Err(DeadLetterError::NotFound(window)))
    }

    /// Whether `key` has a timer armed or a window waiting.
    pub fn pending(&self, key: &K) -> bool {
        self.lanes.get(key).is_some_and(|lane| lane.pending())
    }

    /// The quiet period in force for `key` (ms): fixed, or as learned; `None`
    /// if the group does not hold it.
    pub fn wait_ms(&self, key: &K) -> Option<u64> {
        self.lanes.get(key).map(|lane| lane.wait_ms())
    }

    /// `key`'s full state, if the group holds it.
    pub fn status(&self, key: &K) -> Option<Status> {
        self.lanes.get(key).map(|lane| lane.status())
    }

    /// Whether the group holds `key` (an idle key it forgot is not held).
    pub fn contains(&self, key: &K) -> bool {
        self.lanes.get(key).is_some()
    }

    /// The keys the group holds, in order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.lanes.keys()
    }

    /// How many keys the group holds.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Whether the group holds no key.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// Forget `key` if it has no timer, window, run or dead letter (its learned
    /// rhythm and counters go with it). Returns whether it is gone.
    pub fn remove(&mut self, key: &K) -> bool {
        match self.lanes.get(key).map(|lane| lane.idle_since()) {
            None => true, // not held
            Some(None) => false,
            Some(Some(since)) => {
                self.lanes.remove(key);
                self.idle.remove(&(since, key.clone()));
                true
            }
        }
    }
}

/// The serialised form; the deadline and idle indexes are rebuilt on load.
#[derive(Serialize)]
struct SnapshotRef<'a, K> {
    policy: &'a Policy,
    clock: u64,
    next_window: u64,
    jitter: &'a Jitter,
    lanes: Vec<(&'a K, &'a Lane)>,
    actions: &'a VecDeque<(K, Action)>,
}

#[derive(Deserialize)]
struct Snapshot<K> {
    policy: Policy,
    clock: u64,
    next_window: u64,
    jitter: Jitter,
    lanes: Vec<(K, Lane)>,
    actions: VecDeque<(K, Action)>,
}

impl<K: Ord + Serialize> Serialize for Keyed<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        SnapshotRef {
            policy: &self.policy,
            clock: self.clock,
            next_window: self.next_window,
            jitter: &self.jitter,
            lanes: self.lanes.iter().map(|(k, lane)| (k, &**lane)).collect(),
            actions: &self.actions,
        }
        .serialize(serializer)
    }
}

impl<'de, K: Ord + Clone + Deserialize<'de>> Deserialize<'de> for Keyed<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = Snapshot::<K>::deserialize(deserializer)?;
        let index = s.lanes.iter().filter_map(|(k, lane)| lane.deadline().map(|d| (d, k.clone()))).collect();
        let idle = s.lanes.iter().filter_map(|(k, lane)| lane.idle_since().map(|t| (t, k.clone()))).collect();
        Ok(Keyed {
            policy: s.policy,
            clock: s.clock,
            next_window: s.next_window,
            jitter: s.jitter,
            lanes: s.lanes.into_iter().map(|(k, lane)| (k, Box::new(lane))).collect(),
            index,
            idle,
            actions: s.actions,
        })
    }
}
