//! lull-core: the sans-I/O engine that settles bursts of events into one action.
//!
//! It decides *when* to act and nothing else: no clock, no timers, no I/O.
//! A driver (the browser package, the Durable Object) tells it the time in
//! milliseconds and asks what to do, in the shape of quinn-proto:
//!
//! - inputs: [`Debouncer::event`], [`Debouncer::handle_timeout`],
//!   [`Debouncer::flush`], [`Debouncer::cancel`], [`Debouncer::run_succeeded`],
//!   [`Debouncer::run_failed`], [`Debouncer::replay`];
//! - outputs: [`Debouncer::poll_action`] ([`Action::Fire`] and friends) and
//!   [`Debouncer::next_deadline`], the one timer to arm;
//! - a fast path: [`Debouncer::horizon`] says until when events only add to
//!   the open window, so a driver may count them on its side and hand them in
//!   later in one step ([`Debouncer::recorded`]);
//! - configuration: [`Debouncer::set_policy`] starts a new policy at the next burst;
//! - [`Lite`]: the same timing alone, for a function that runs synchronously;
//! - [`Budget`]: when a scheduled consumer pulls, naps and stops, so a run
//!   that starts once a minute behaves like one running all the time.
//!
//! `no_std` (with `alloc`): the same engine runs in a Worker, a browser and natively.
//!
//! The engine numbers events ([`Seq`]) and never stores payloads; a [`Fire`]
//! says which seqs it covers. [`Keyed`] holds many keys behind one deadline.
//! All state is `serde`-serialisable and restores to the same future.
//!
//! Timing follows `lodash.debounce` (checked against lodash itself), with
//! these deliberate differences: `flush` disarms the timer; time never goes
//! backwards (an earlier `now` counts as the latest seen); an operation after a
//! missed deadline first processes it, so a new burst starts a new window; and
//! runs have a lifecycle (singleton, retries, dead letters) lodash lacks.
//!
//! ```
//! use lull_core::{Action, Debouncer, PolicyConfig, Reason};
//!
//! let policy = PolicyConfig::debounce(300).build()?;
//! let mut engine = Debouncer::new(policy, 42);
//! engine.event(0);
//! engine.event(100);
//! assert_eq!(engine.next_deadline(), Some(300)); // armed once, at the first event
//! engine.handle_timeout(300); // not quiet yet: re-arms for the rest
//! assert_eq!(engine.next_deadline(), Some(400));
//! engine.handle_timeout(400);
//! let Some(Action::Fire(fire)) = engine.poll_action() else { unreachable!() };
//! assert_eq!((fire.reason, fire.span.count(), fire.at), (Reason::Quiet, 2, 400));
//! engine.run_succeeded(fire.window, 450)?; // the driver did the work
//! assert_eq!(engine.next_deadline(), None);
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

extern crate alloc;

mod action;
mod adaptive;
mod budget;
mod debouncer;
mod error;
mod jitter;
mod keyed;
mod lane;
mod lite;
mod policy;
mod rules;
mod sorted;
mod stats;
mod status;

pub use action::{Accepted, Action, DeadLetter, DropCause, Dropped, Fire, QueuedWindow, Reason, Seq, Span, WindowId};
pub use adaptive::{Adaptive, GAP_WINDOW, MIN_GAPS};
pub use budget::{
    Basis, Budget, BudgetConfig, BudgetError, DURATION_WINDOW, Limit, MAX_BATCH, MAX_MARGIN_PERCENT, Margin, Step,
    WARM_DURATIONS,
};
pub use debouncer::{Debouncer, Horizon};
pub use error::{DeadLetterError, RunError};
pub use keyed::{Keyed, MAX_IDLE_KEYS};
pub use lite::{LITE_MAX_ACTIONS, Lite, LiteAction};
pub use policy::{JitterMode, MAX_DURATION_MS, Overlap, Policy, PolicyConfig, PolicyError, Retry, Wait};
pub use stats::Stats;
pub use status::{Backlog, OpenWindow, RunStatus, Status};
