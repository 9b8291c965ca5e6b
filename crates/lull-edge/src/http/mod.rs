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

/// The request headers the router reads (every route's, the ones a body's
/// bound needs), fetched with the method and the URL in one call
/// ([`RequestParts`]); any other header is asked of the runtime when a route asks.
pub(crate) const READ_HEADERS: [&str; 5] =
    ["origin", "authorization", "idempotency-key", "content-length", "transfer-encoding"];

/// A request's method, URL and [`READ_HEADERS`] (each value, or `None` where
/// absent), as the runtime's side hands them over in one text
/// (`js/messages.mjs`: one part per line, a header's value after a `+`, an
/// absent one an empty line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequestParts {
    /// The method, as the runtime gives it.
    pub method: String,
    /// The URL, as the runtime gives it.
    pub url: String,
    /// Each of [`READ_HEADERS`], in its order.
    pub headers: [Option<String>; READ_HEADERS.len()],
}

impl RequestParts {
    /// The parts from their lines; `500 internal` if they are not as many as
    /// [`READ_HEADERS`] asks for, or a header's line is neither empty nor `+…`.
    pub(crate) fn from_lines(text: &str) -> Result<RequestParts, ApiError> {
        let bad = || ApiError::Internal(format!("the request's parts are not {} lines", READ_HEADERS.len() + 2));
        let mut lines = text.split('\n');
        let (method, url) = (lines.next().ok_or_else(bad)?, lines.next().ok_or_else(bad)?);
        let mut headers: [Option<String>; READ_HEADERS.len()] = Default::default();
        for header in &mut headers {
            let line = lines.next().ok_or_else(bad)?;
            *header = match line.strip_prefix('+') {
                Some(value) => Some(value.to_string()),
                None if line.is_empty() => None,
                None => return Err(bad()),
            };
        }
        if lines.next().is_some() {
            return Err(bad());
        }
        Ok(RequestParts { method: method.to_string(), url: url.to_string(), headers })
    }

    /// The header `name` (lower case) if it is one of [`READ_HEADERS`]: its
    /// value or `None` (absent); `Err(())` if it was not read.
    pub(crate) fn header(&self, name: &str) -> Result<Option<&str>, ()> {
        let at = READ_HEADERS.iter().position(|read| *read == name).ok_or(())?;
        Ok(self.headers[at].as_deref())
    }
}

/// How a request's body is read against its bound, by what its framing
/// declares. A body framed by its `Content-Length` is one the runtime reads
/// no further than that length, so one within the bound is read in one call;
/// any other (chunked, or no length at all) is read chunk by chunk
/// ([`BodyWithin`]) and refused at the first chunk past the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyRead {
    /// A `Content-Length` past the bound: `413`, before a byte is read.
    TooLarge,
    /// A `Content-Length` within the bound, and no `Transfer-Encoding` to
    /// override it: read in one call.
    Whole,
    /// No length that binds it: read chunk by chunk.
    Streamed,
}

impl BodyRead {
    /// The way to read a body whose request declared `content_length` and
    /// `transfer_encoding` (each header's value, if present), bound to `limit` bytes.
    pub(crate) fn of(content_length: Option<&str>, transfer_encoding: Option<&str>, limit: usize) -> BodyRead {
        match content_length.and_then(|n| n.trim().parse::<usize>().ok()) {
            Some(n) if n > limit => BodyRead::TooLarge,
            Some(_) if transfer_encoding.is_none() => BodyRead::Whole,
            _ => BodyRead::Streamed,
        }
    }
}

/// A request's body as it is read, chunk by chunk: `413 payload_too_large` at
/// the first chunk that would take it past its bound, before that chunk is
/// copied (the reader then stops reading and cancels the stream), so a body
/// without a `Content-Length` is never held past its bound.
#[derive(Debug)]
pub(crate) struct BodyWithin {
    limit: usize,
    bytes: Vec<u8>,
}

impl BodyWithin {
    /// An empty body, bound to `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        BodyWithin { limit, bytes: Vec::new() }
    }

    /// Take a chunk of `len` bytes, which `copy` writes into the slice it is
    /// given; `413` (nothing copied) if the body would pass its bound.
    pub(crate) fn push(&mut self, len: usize, copy: impl FnOnce(&mut [u8])) -> Result<(), ApiError> {
        let at = self.bytes.len();
        if len > self.limit - at {
            return Err(ApiError::PayloadTooLarge { limit: self.limit });
        }
        self.bytes.resize(at + len, 0);
        copy(&mut self.bytes[at..]);
        Ok(())
    }

    /// The body read.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_parts_are_read_from_their_lines() {
        let parts = RequestParts::from_lines("POST\nhttps://h/v1/x?a=1\n\n+Bearer t\n+\n+12\n").unwrap();
        assert_eq!((parts.method.as_str(), parts.url.as_str()), ("POST", "https://h/v1/x?a=1"));
        assert_eq!(parts.header("origin"), Ok(None), "absent");
        assert_eq!(parts.header("authorization"), Ok(Some("Bearer t")));
        assert_eq!(parts.header("idempotency-key"), Ok(Some("")), "present and empty is not absent");
        assert_eq!(parts.header("content-length"), Ok(Some("12")));
        assert_eq!(parts.header("transfer-encoding"), Ok(None));
        assert_eq!(parts.header("x-other"), Err(()), "not read: asked of the runtime");
        // A value may hold a `+` of its own; only the first marks it present.
        assert_eq!(RequestParts::from_lines("GET\nu\n++a\n\n\n\n").unwrap().header("origin"), Ok(Some("+a")));
        let five = "GET\nu\n\n\n\n\n";
        assert_eq!(RequestParts::from_lines(five).unwrap().headers, [None, None, None, None, None]);
        // Four headers, six, a line neither empty nor `+…`.
        for bad in ["", "GET", "GET\nu", "GET\nu\n\n\n\n", "GET\nu\n\n\n\n\n\n", "GET\nu\nx\n\n\n\n"] {
            assert_eq!(RequestParts::from_lines(bad).unwrap_err().code(), "internal", "{bad:?}");
        }
    }

    #[test]
    fn only_a_body_its_length_binds_within_the_bound_is_read_in_one_call() {
        use BodyRead::*;
        assert_eq!(BodyRead::of(Some("10"), None, 10), Whole, "exactly the bound");
        assert_eq!(BodyRead::of(Some(" 0 "), None, 10), Whole);
        assert_eq!(BodyRead::of(Some("11"), None, 10), TooLarge);
        assert_eq!(
            BodyRead::of(Some("11"), Some("chunked"), 10),
            TooLarge,
            "a length past the bound is refused anyway"
        );
        // A Transfer-Encoding overrides the length (RFC 9112 §6.3): the length binds nothing.
        assert_eq!(BodyRead::of(Some("5"), Some("chunked"), 10), Streamed);
        assert_eq!(BodyRead::of(None, Some("chunked"), 10), Streamed);
        assert_eq!(BodyRead::of(None, None, 10), Streamed);
        for odd in ["", "-1", "1e3", "0x10", "10, 10", "99999999999999999999999"] {
            assert_eq!(BodyRead::of(Some(odd), None, 10), Streamed, "{odd:?} is no length");
        }
    }

    #[test]
    fn a_body_is_taken_up_to_its_bound_and_refused_at_the_chunk_past_it() {
        let mut body = BodyWithin::new(10);
        let mut copied = 0;
        for chunk in [&b"abcd"[..], b"", b"efghij"] {
            body.push(chunk.len(), |into| {
                into.copy_from_slice(chunk);
                copied += chunk.len();
            })
            .unwrap();
        }
        let mut past = BodyWithin::new(10);
        past.push(6, |into| into.copy_from_slice(b"abcdef")).unwrap();
        let refused = past.push(5, |_| panic!("a chunk past the bound is not copied"));
        assert_eq!(refused, Err(ApiError::PayloadTooLarge { limit: 10 }));
        assert_eq!((body.into_bytes(), copied), (b"abcdefghij".to_vec(), 10), "exactly the bound is taken");
        let mut one_more = BodyWithin::new(10);
        one_more.push(10, |into| into.fill(b'x')).unwrap();
        assert_eq!(one_more.push(1, |_| ()).unwrap_err().code(), "payload_too_large");
        assert_eq!(one_more.into_bytes().len(), 10);
        assert_eq!(BodyWithin::new(0).push(usize::MAX, |_| ()).unwrap_err().status(), 413, "no overflow");
    }
}
