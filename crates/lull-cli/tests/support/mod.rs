//! Test support for the `lull` binary's tests.
pub mod fake_queue;
