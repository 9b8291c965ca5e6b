//! The HTTP API, runtime-free: which operation a method and path ask for
//! ([`route`]), what the router does about it ([`plan`]: which object, which
//! call, under which credential, with what body bound), what happens to
//! events on their way in (a batch: [`batch`]; same-key events in flight
//! together: [`coalesce`]), who may ask for it ([`auth`], [`client_token`]), which web origins may call it
//! from a browser ([`cors`]); every route answers errors as the crate's
//! [`ApiError`] ([`crate::error`], re-exported here).

pub(crate) mod auth;
pub(crate) mod batch;
pub(crate) mod client_token;
pub(crate) mod coalesce;
pub(crate) mod cors;
pub(crate) mod plan;
pub(crate) mod route;

pub(crate) use crate::error::ApiError;

/// A request's JSON body read as `T`: `400 malformed_json` if it is not JSON
/// at all (judged as an event's body is), `400 bad_request` if it is JSON of
/// another shape than `shape` (the route's, as the message shows it). One
/// problem, one code, on every route that takes a body.
pub(crate) fn json_body<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8], shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| match serde_json::from_slice::<&serde_json::value::RawValue>(bytes) {
        Err(not_json) => ApiError::MalformedJson(not_json.to_string()),
        Ok(_) => ApiError::BadRequest(format!("the body must be {shape}: {e}")),
    })
}

/// An object's answer to the router (a key's or a gate's): its status, its
/// JSON text as the object wrote it, and its `Retry-After` seconds (on a
/// refusal). A coalesced producer's share of one has this form too: what its
/// own request would have had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ObjectAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body, as the object wrote it.
    pub body: String,
    /// Its `Retry-After` seconds (as the header's text), if the object sent them.
    pub retry_after: Option<String>,
}
