//! The pieces of a zero-copy JSON reader: the leaves and member names the
//! rules read, and visitors that skip whatever they do not.
//!
//! Building a `serde_json::Value` allocates a map per object and a string
//! per key, which cost more than everything else the classifier does. These
//! readers visit the body once, keep only the fields the rules read (their
//! strings borrowed from the body unless escaped) and skip the rest.

use std::borrow::Cow;
use std::fmt;

use serde_core::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

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

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E>(self, k: &str) -> Result<Key, E> {
                Ok(match k {
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
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

// === visitors ===

/// The visits every tolerant visitor shares: a value of an unexpected type
/// is skipped, not an error, so one odd member does not lose the body.
macro_rules! tolerant {
    ($other:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok($other)
        }
    };
}

/// `Deserialize` for a type read from a JSON object by `$map` and from an
/// array by `$seq`; any scalar gives its `Default`.
macro_rules! container {
    ($ty:ident, map: $map:path, seq: $seq:path) => {
        impl<'de> Deserialize<'de> for $ty<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty<'de>;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str(stringify!($ty))
                    }
                    tolerant!(Default::default());
                    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                        Ok(Default::default())
                    }
                    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                        Ok(Default::default())
                    }
                    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
                        $map(m)
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Self::Value, A::Error> {
                        $seq(s)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

pub(super) use {container, tolerant};

pub(super) fn drain_map<'de, A: MapAccess<'de>, T: Default>(mut m: A) -> Result<T, A::Error> {
    while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(T::default())
}

pub(super) fn drain_seq<'de, A: SeqAccess<'de>, T: Default>(mut s: A) -> Result<T, A::Error> {
    while s.next_element::<IgnoredAny>()?.is_some() {}
    Ok(T::default())
}

/// Skips a member's value.
pub(super) fn skip<'de, A: MapAccess<'de>>(m: &mut A) -> Result<(), A::Error> {
    m.next_value::<IgnoredAny>().map(drop)
}

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
