//! Bearer tokens: who a request comes from, and whether it may ask for an operation.

use crate::http::ApiError;

/// The least credential an operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// An ingest token (or the admin token): posting events.
    Ingest,
    /// The admin token: everything else.
    Admin,
}

/// Who a request's bearer token says it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The ingest token: may post events only.
    Ingest,
    /// The admin token: may do everything.
    Admin,
}

/// The configured tokens.
pub struct Tokens<'a> {
    /// `LULL_INGEST_TOKEN`.
    pub ingest: &'a str,
    /// `LULL_ADMIN_TOKEN`.
    pub admin: &'a str,
}

impl Tokens<'_> {
    /// Check an `Authorization` header for an operation that needs `need`:
    /// `401` without a known bearer token, `403` when the ingest token asks
    /// for more than posting events.
    pub fn authorize(&self, header: Option<&str>, need: Access) -> Result<Caller, ApiError> {
        let token = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).ok_or(ApiError::Unauthorized)?;
        let caller = if equal(token, self.admin) {
            Caller::Admin
        } else if equal(token, self.ingest) {
            Caller::Ingest
        } else {
            return Err(ApiError::Unauthorized);
        };
        if caller == Caller::Ingest && need == Access::Admin {
            return Err(ApiError::Forbidden);
        }
        Ok(caller)
    }
}

/// Whether `given` is the token `expected`, in time that depends on neither
/// (their SHA-256 digests are compared in constant time, so not even the
/// token's length leaks); an empty token never matches.
fn equal(given: &str, expected: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (Sha256::digest(given.as_bytes()), Sha256::digest(expected.as_bytes()));
    let same = a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    !expected.is_empty() & same
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_grant_ingest_or_admin() {
        let tokens = Tokens { ingest: "in-secret", admin: "ad-secret" };
        assert_eq!(tokens.authorize(Some("Bearer in-secret"), Access::Ingest), Ok(Caller::Ingest));
        assert_eq!(tokens.authorize(Some("Bearer ad-secret"), Access::Admin), Ok(Caller::Admin));
        assert_eq!(tokens.authorize(Some("Bearer in-secret"), Access::Admin), Err(ApiError::Forbidden));
        assert_eq!(tokens.authorize(Some("Bearer wrong"), Access::Ingest), Err(ApiError::Unauthorized));
        assert_eq!(tokens.authorize(Some("in-secret"), Access::Ingest), Err(ApiError::Unauthorized));
        assert_eq!(tokens.authorize(None, Access::Ingest), Err(ApiError::Unauthorized));
        let unset = Tokens { ingest: "", admin: "x" };
        assert_eq!(unset.authorize(Some("Bearer "), Access::Ingest), Err(ApiError::Unauthorized));
    }
}
