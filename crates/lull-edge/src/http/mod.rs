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
