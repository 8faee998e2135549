//! The pieces of a zero-copy JSON reader: the leaves and member names the
//! rules read, and visitors that skip whatever they do not.
//!
//! Building a `serde_json::Value` allocates a map per object and a string
//! per key, which cost more than everything else the classifier does. These
//! readers visit the body once, keep only the fields the rules read (their
//! strings borrowed from the body unless escaped) and skip the rest.

use std::borrow::Cow;
use std::fmt;

use serde_core::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

pub(super) use crate::json::{container, drain_map, drain_seq, member_names, skip, tolerant};

/// A JSON leaf the rules read: a string, a non-negative integer, or
/// anything else (skipped).
#[derive(Debug, Default)]
pub(super) enum Leaf<'de> {
    Str(Cow<'de, str>),
    Num(u64),
    #[default]
    Other,
}

impl<'de> Leaf<'de> {
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Leaf::Str(s) => Some(s),
            _ => None,
        }
    }
}

// === keys ===

/// Member names the rules read, matched without allocating.
pub(super) enum Key {
    Error,
    Response,
    InnerError,
    Type,
    Object,
    AwsType,
    Message,
    Code,
    Status,
    OriginalStatus,
    Details,
    ErrorCode,
    AtType,
    Reason,
    RetryDelay,
    Violations,
    QuotaId,
    Metadata,
    Raw,
    Other,
}

member_names!(Key {
    "error" => Key::Error,
    "response" => Key::Response,
    "innererror" => Key::InnerError,
    "type" => Key::Type,
    "object" => Key::Object,
    "__type" => Key::AwsType,
    "message" => Key::Message,
    "code" => Key::Code,
    "status" => Key::Status,
    "originalStatusCode" => Key::OriginalStatus,
    "details" => Key::Details,
    "error_code" => Key::ErrorCode,
    "@type" => Key::AtType,
    "reason" => Key::Reason,
    "retryDelay" => Key::RetryDelay,
    "violations" => Key::Violations,
    "quotaId" => Key::QuotaId,
    "metadata" => Key::Metadata,
    "raw" => Key::Raw,
    _ => Key::Other,
});

// === leaves ===

impl<'de> Deserialize<'de> for Leaf<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Leaf<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            tolerant!(Leaf::Other);
            fn visit_u64<E>(self, n: u64) -> Result<Leaf<'de>, E> {
                Ok(Leaf::Num(n))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Leaf<'de>, E> {
                Ok(Leaf::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Leaf<'de>, E> {
                Ok(Leaf::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Leaf<'de>, A::Error> {
                drain_map(m)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Leaf<'de>, A::Error> {
                drain_seq(s)
            }
        }
        d.deserialize_any(V)
    }
}
