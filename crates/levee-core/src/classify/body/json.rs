//! A zero-copy reader of JSON error bodies.
//!
//! Building a `serde_json::Value` allocates a map per object and a string
//! per key, which cost more than everything else the classifier does. This
//! reader visits the body once, keeps only the fields the rules read (their
//! strings borrowed from the body unless escaped) and skips the rest.

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

/// The `error` member: an object, or the plain string some gateways send.
#[derive(Debug)]
pub(super) enum ErrorField<'de> {
    Obj(Box<Obj<'de>>),
    Str(Cow<'de, str>),
    Other,
}

/// An object at any level (body, `error`, `response`), with the members
/// the rules read.
#[derive(Debug, Default)]
pub(super) struct Obj<'de> {
    pub(super) error: Option<ErrorField<'de>>,
    /// OpenAI Responses `response.failed`: `response.error`.
    pub(super) response: Option<Box<Obj<'de>>>,
    /// Azure `innererror.code`.
    pub(super) inner_code: Option<Leaf<'de>>,
    pub(super) ty: Leaf<'de>,
    pub(super) object: Leaf<'de>,
    pub(super) aws_type: Leaf<'de>,
    pub(super) message: Leaf<'de>,
    pub(super) code: Leaf<'de>,
    pub(super) status: Leaf<'de>,
    pub(super) original_status: Leaf<'de>,
    pub(super) details: Details<'de>,
}

/// What `details` holds: Anthropic's `{error_code}`, or Google's typed list.
#[derive(Debug, Default)]
pub(super) struct Details<'de> {
    pub(super) error_code: Leaf<'de>,
    pub(super) info_reason: Leaf<'de>,
    pub(super) per_day: bool,
    pub(super) retry_delay: Leaf<'de>,
}

/// A whole body: an object, or Vertex's array whose first item is one.
pub(super) struct Body<'de> {
    pub(super) obj: Option<Box<Obj<'de>>>,
    pub(super) in_array: bool,
}

impl Body<'_> {
    const EMPTY: Body<'static> = Body {
        obj: None,
        in_array: false,
    };
}

// === keys ===

/// Member names the rules read, matched without allocating.
enum Key {
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
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

// === leaves ===

/// Implements the visits every "anything goes" visitor shares: scalars
/// become `$other`, containers are drained.
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

fn drain_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<(), A::Error> {
    while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut s: A) -> Result<(), A::Error> {
    while s.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
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
                drain_map(m).map(|()| Leaf::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Leaf<'de>, A::Error> {
                drain_seq(s).map(|()| Leaf::Other)
            }
        }
        d.deserialize_any(V)
    }
}

// === objects ===

/// Reads an object's members into `obj`, whatever level it is at. It fills
/// in place: an `Obj` is a few hundred bytes, and moving it costs more than
/// reading a short object.
fn read_obj<'de, A: MapAccess<'de>>(mut m: A, obj: &mut Obj<'de>) -> Result<(), A::Error> {
    while let Some(key) = m.next_key::<Key>()? {
        match key {
            Key::Error => obj.error = Some(m.next_value()?),
            Key::Response => obj.response = m.next_value::<Nested<'de>>()?.0,
            Key::InnerError => obj.inner_code = m.next_value::<Nested<'de>>()?.0.map(|o| o.code),
            Key::Type => obj.ty = m.next_value()?,
            Key::Object => obj.object = m.next_value()?,
            Key::AwsType => obj.aws_type = m.next_value()?,
            Key::Message => obj.message = m.next_value()?,
            Key::Code => obj.code = m.next_value()?,
            Key::Status => obj.status = m.next_value()?,
            Key::OriginalStatus => obj.original_status = m.next_value()?,
            Key::Details => obj.details = m.next_value()?,
            _ => {
                m.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(())
}

/// A boxed object, read in place.
fn boxed_obj<'de, A: MapAccess<'de>>(m: A) -> Result<Box<Obj<'de>>, A::Error> {
    let mut obj = Box::<Obj<'de>>::default();
    read_obj(m, &mut obj)?;
    Ok(obj)
}

/// An object member that may be an object (read) or anything else (skipped).
struct Nested<'de>(Option<Box<Obj<'de>>>);

impl<'de> Deserialize<'de> for Nested<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Nested<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            tolerant!(Nested(None));
            fn visit_u64<E>(self, _: u64) -> Result<Nested<'de>, E> {
                Ok(Nested(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Nested<'de>, E> {
                Ok(Nested(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Nested<'de>, A::Error> {
                boxed_obj(m).map(|o| Nested(Some(o)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Nested<'de>, A::Error> {
                drain_seq(s).map(|()| Nested(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for ErrorField<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ErrorField<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an error object or message")
            }
            tolerant!(ErrorField::Other);
            fn visit_u64<E>(self, _: u64) -> Result<ErrorField<'de>, E> {
                Ok(ErrorField::Other)
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<ErrorField<'de>, E> {
                Ok(ErrorField::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<ErrorField<'de>, E> {
                Ok(ErrorField::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<ErrorField<'de>, A::Error> {
                boxed_obj(m).map(ErrorField::Obj)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<ErrorField<'de>, A::Error> {
                drain_seq(s).map(|()| ErrorField::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Body<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Body<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON body")
            }
            tolerant!(Body::EMPTY);
            fn visit_u64<E>(self, _: u64) -> Result<Body<'de>, E> {
                Ok(Body::EMPTY)
            }
            fn visit_str<E>(self, _: &str) -> Result<Body<'de>, E> {
                Ok(Body::EMPTY)
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Body<'de>, A::Error> {
                let obj = Some(boxed_obj(m)?);
                Ok(Body {
                    obj,
                    in_array: false,
                })
            }
            // Vertex wraps the error in an array: read the first item.
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Body<'de>, A::Error> {
                let obj = s.next_element::<Nested<'de>>()?.and_then(|n| n.0);
                drain_seq(s)?;
                Ok(Body {
                    obj,
                    in_array: true,
                })
            }
        }
        d.deserialize_any(V)
    }
}

// === details ===

impl<'de> Deserialize<'de> for Details<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Details<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("error details")
            }
            tolerant!(Details::default());
            fn visit_u64<E>(self, _: u64) -> Result<Details<'de>, E> {
                Ok(Details::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Details<'de>, E> {
                Ok(Details::default())
            }
            // Anthropic: `{"error_code": ..}`.
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Details<'de>, A::Error> {
                let mut d = Details::default();
                while let Some(key) = m.next_key::<Key>()? {
                    match key {
                        Key::ErrorCode => d.error_code = m.next_value()?,
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(d)
            }
            // Google: `[{"@type": "…ErrorInfo", "reason"}, {"@type": "…QuotaFailure",
            // "violations": [{"quotaId"}]}, {"@type": "…RetryInfo", "retryDelay"}]`.
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Details<'de>, A::Error> {
                let mut d = Details::default();
                while let Some(item) = s.next_element::<DetailItem<'de>>()? {
                    let ty = item.ty.as_str().unwrap_or_default();
                    if ty.ends_with("ErrorInfo") && d.info_reason.as_str().is_none() {
                        d.info_reason = item.reason;
                    } else if ty.ends_with("QuotaFailure") {
                        d.per_day |= item.per_day;
                    } else if ty.ends_with("RetryInfo") {
                        d.retry_delay = item.retry_delay;
                    }
                }
                Ok(d)
            }
        }
        d.deserialize_any(V)
    }
}

/// One of Google's typed details; its `@type` may come after its fields.
#[derive(Default)]
struct DetailItem<'de> {
    ty: Leaf<'de>,
    reason: Leaf<'de>,
    retry_delay: Leaf<'de>,
    /// A `QuotaFailure` violation whose `quotaId` is per day.
    per_day: bool,
}

impl<'de> Deserialize<'de> for DetailItem<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DetailItem<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a typed detail")
            }
            tolerant!(DetailItem::default());
            fn visit_u64<E>(self, _: u64) -> Result<DetailItem<'de>, E> {
                Ok(DetailItem::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<DetailItem<'de>, E> {
                Ok(DetailItem::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<DetailItem<'de>, A::Error> {
                let mut item = DetailItem::default();
                while let Some(key) = m.next_key::<Key>()? {
                    match key {
                        Key::AtType => item.ty = m.next_value()?,
                        Key::Reason => item.reason = m.next_value()?,
                        Key::RetryDelay => item.retry_delay = m.next_value()?,
                        Key::Violations => item.per_day = m.next_value::<PerDay>()?.0,
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(item)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<DetailItem<'de>, A::Error> {
                drain_seq(s).map(|()| DetailItem::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether any violation (or nested member) has a per-day `quotaId`.
struct PerDay(bool);

impl<'de> Deserialize<'de> for PerDay {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PerDay;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("quota violations")
            }
            tolerant!(PerDay(false));
            fn visit_u64<E>(self, _: u64) -> Result<PerDay, E> {
                Ok(PerDay(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<PerDay, E> {
                Ok(PerDay(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<PerDay, A::Error> {
                let mut per_day = false;
                while let Some(key) = m.next_key::<Key>()? {
                    if let Key::QuotaId = key {
                        let id = m.next_value::<Leaf<'de>>()?;
                        per_day |= id.as_str().is_some_and(|id| id.contains("PerDay"));
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(PerDay(per_day))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<PerDay, A::Error> {
                let mut per_day = false;
                while let Some(v) = s.next_element::<PerDay>()? {
                    per_day |= v.0;
                }
                Ok(PerDay(per_day))
            }
        }
        d.deserialize_any(V)
    }
}
