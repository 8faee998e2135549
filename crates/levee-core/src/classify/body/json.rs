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
    QuotaValue,
    QuotaMetric,
    Metadata,
    Raw,
    /// Baidu's and iFlytek's text, MiniMax's `status_msg`, FastAPI's `detail`.
    AltMessage,
    /// MiniMax's `base_resp`.
    BaseResp,
    /// iFlytek Spark's frame `header`.
    Header,
    /// A wait of its own, in seconds: `retry_after`, Hugging Face's `estimated_time`.
    WaitSeconds,
    /// A wait of its own, in milliseconds: `retry_after_ms`.
    WaitMillis,
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
    "quotaValue" => Key::QuotaValue,
    "quotaMetric" => Key::QuotaMetric,
    "metadata" => Key::Metadata,
    "raw" => Key::Raw,
    // Tencent Cloud API 3.0: `{"Response": {"Error": {"Code", "Message"}}}`.
    "Response" => Key::Response,
    "Error" => Key::Error,
    "Code" => Key::Code,
    "Message" => Key::Message,
    "error_msg" => Key::AltMessage,
    "errmsg" => Key::AltMessage,
    "status_msg" => Key::AltMessage,
    "msg" => Key::AltMessage,
    "detail" => Key::AltMessage,
    "base_resp" => Key::BaseResp,
    "status_code" => Key::ErrorCode,
    "header" => Key::Header,
    "retry_after" => Key::WaitSeconds,
    "retryAfter" => Key::WaitSeconds,
    "retry_after_seconds" => Key::WaitSeconds,
    "estimated_time" => Key::WaitSeconds,
    "retry_after_ms" => Key::WaitMillis,
    "retryAfterMs" => Key::WaitMillis,
    _ => Key::Other,
});

// === leaves ===

/// A number of some unit, as a provider writes it: an integer, a fraction
/// (`20.5`) or a numeric string.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Number(pub(super) Option<f64>);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_unit<E>(self) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_none<E>(self) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Number, E> {
                Ok(Number(Some(n as f64)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Number, E> {
                Ok(Number(Some(n as f64)))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Number, E> {
                Ok(Number(Some(n)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Number, E> {
                Ok(Number(s.trim().parse().ok()))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Number, A::Error> {
                drain_map(m)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Number, A::Error> {
                drain_seq(s)
            }
        }
        d.deserialize_any(V)
    }
}

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
