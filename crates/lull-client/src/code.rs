//! lull-edge's error codes ([`ErrorCode`]) and the open string enums the
//! API's answers use (a value this version does not know is kept).

/// A string enum of the API that may grow: unknown values are kept as `Other`.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A value this version does not know, as sent.
            Other(String),
        }

        impl $name {
            /// The value as the API writes it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(text) => text,
                }
            }

            /// The value the API writes as `text`.
            pub fn parse(text: &str) -> Self {
                match text {
                    $($text => $name::$variant,)*
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok($name::parse(&text))
            }
        }
    };
}
pub(crate) use open_enum;

open_enum! {
    /// lull-edge's error codes (openapi.yaml's `ErrorCode`), each with one status.
    ErrorCode {
        /// 404: the topic is not configured.
        UnknownTopic = "unknown_topic",
        /// 404: no such route, dead letter or window.
        NotFound = "not_found",
        /// 405: the route takes other methods.
        MethodNotAllowed = "method_not_allowed",
        /// 401: no token, an unknown one, or a client token that does not verify now.
        Unauthorized = "unauthorized",
        /// 403: a token outside its scope.
        Forbidden = "forbidden",
        /// 403: a browser origin `LULL_CORS_ORIGINS` does not list.
        OriginNotAllowed = "origin_not_allowed",
        /// 400: the body is not JSON.
        MalformedJson = "malformed_json",
        /// 413: a body over its limit.
        PayloadTooLarge = "payload_too_large",
        /// 413: a batch of more than 1,000 events.
        TooManyItems = "too_many_items",
        /// 400: the key breaks the key rules.
        InvalidKey = "invalid_key",
        /// 400: a query parameter unknown or out of range.
        BadQuery = "bad_query",
        /// 400: the body is JSON but not what the route takes.
        BadRequest = "bad_request",
        /// 400: an idempotency key that is not 1–200 printable ASCII characters.
        InvalidIdempotencyKey = "invalid_idempotency_key",
        /// 429: the key holds its topic's `max_pending_windows`.
        TooManyPending = "too_many_pending",
        /// 429: a client token holder's `events_per_minute` (or budget across keys) is spent.
        TooManyEvents = "too_many_events",
        /// 429: a queue topic keeps as many dead letters as it may.
        DeadLettersFull = "dead_letters_full",
        /// 409: a queue dead letter's replay is being sent.
        ReplayInProgress = "replay_in_progress",
        /// 409: an idempotency key came back with another body.
        IdempotencyKeyReused = "idempotency_key_reused",
        /// 409: minting a client token for a topic that accepts none.
        ClientTokensOff = "client_tokens_off",
        /// 503: storage or the alarm failed; nothing changed.
        Unavailable = "unavailable",
        /// 500: the worker's configuration is missing or invalid.
        Config = "config",
        /// 500: the runtime failed.
        Internal = "internal",
    }
}
