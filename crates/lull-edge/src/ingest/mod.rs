//! Events on their way in, runtime-free: a batch of many keys' events
//! ([`batch`]: checked whole, grouped by key, answered per event) and
//! coalescing ([`coalesce`]: a key's single events and batches' shares that
//! arrive while its object request is in flight ride the next one). Both
//! turn one key object's answer into each producer request's own (a share's
//! entries, an event's entry), so they live together, beside the HTTP API
//! ([`crate::http`]) that routes and authorises them.

pub mod batch;
pub mod coalesce;
