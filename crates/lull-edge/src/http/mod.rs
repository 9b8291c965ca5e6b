//! The HTTP API, runtime-free: which operation a method and path ask for
//! ([`route`]; a batch of events: [`batch`]), who may ask for it ([`auth`], [`client_token`]), which web origins may call it
//! from a browser ([`cors`]), and the one error type every route answers
//! with ([`error`]).

pub mod auth;
pub mod batch;
pub mod client_token;
pub mod cors;
pub mod error;
pub mod route;

pub use error::ApiError;

/// An object's answer to the router (a key's or a gate's): its status, its
/// JSON text as the object wrote it, and its `Retry-After` seconds (on a
/// refusal). A coalesced producer's share of one has this form too: what its
/// own request would have had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body, as the object wrote it.
    pub body: String,
    /// Its `Retry-After` seconds (as the header's text), if the object sent them.
    pub retry_after: Option<String>,
}
