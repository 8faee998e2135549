//! The objects of an error body (the body, `error`, `response`), read with
//! the pieces of [`json`](super::json).

use std::borrow::Cow;
use std::fmt;

use serde_core::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::details::Details;
use super::json::{Key, Leaf, Number, container, drain_seq, skip, tolerant};

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
    /// The first of `error_msg`, `status_msg`, `msg`, `detail`: read when
    /// `message` says nothing.
    pub(super) alt_message: Leaf<'de>,
    pub(super) code: Leaf<'de>,
    pub(super) status: Leaf<'de>,
    /// Baidu's top-level `error_code`, MiniMax's `status_code`.
    pub(super) error_code: Leaf<'de>,
    /// An object beside the payload that holds the error: MiniMax's
    /// `base_resp`, iFlytek Spark's `header`, Naver CLOVA Studio's `status`.
    pub(super) envelope: Option<(Envelope, Box<Obj<'de>>)>,
    /// A wait in a field of its own, in seconds.
    pub(super) own_wait: Option<f64>,
    pub(super) original_status: Leaf<'de>,
    pub(super) details: Details<'de>,
    /// A gateway's `metadata.raw`: the upstream provider's own error,
    /// passed on as a string (OpenRouter).
    pub(super) upstream: Option<Box<Leaf<'de>>>,
    /// `raw`, read only inside `metadata`.
    pub(super) raw: Leaf<'de>,
}

/// Which envelope beside the payload an error came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Envelope {
    /// MiniMax's `base_resp`.
    BaseResp,
    /// iFlytek Spark's `header`.
    Header,
    /// Naver CLOVA Studio's `status` object.
    Status,
}

/// A whole body: an object, or Vertex's array whose first item is one.
#[derive(Default)]
pub(super) struct Body<'de> {
    pub(super) obj: Option<Box<Obj<'de>>>,
    pub(super) in_array: bool,
}

impl<'de> Deserialize<'de> for ErrorField<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The same visit as a leaf, but an object is read.
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
                drain_seq::<_, ()>(s).map(|()| ErrorField::Other)
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
            Key::Message => first(&mut obj.message, m.next_value()?),
            Key::AltMessage => first(&mut obj.alt_message, m.next_value()?),
            Key::Code => obj.code = m.next_value()?,
            Key::Status => match m.next_value::<StatusField<'de>>()? {
                StatusField::Leaf(leaf) => obj.status = leaf,
                StatusField::Obj(o) => envelope(obj, Envelope::Status, Some(o)),
            },
            Key::ErrorCode => obj.error_code = m.next_value()?,
            Key::BaseResp => envelope(obj, Envelope::BaseResp, m.next_value::<Nested<'de>>()?.0),
            Key::Header => envelope(obj, Envelope::Header, m.next_value::<Nested<'de>>()?.0),
            Key::WaitSeconds => obj.own_wait = obj.own_wait.or(m.next_value::<Number>()?.0),
            Key::WaitMillis => {
                let ms = m.next_value::<Number>()?.0;
                obj.own_wait = obj.own_wait.or(ms.map(|ms| ms / 1000.0));
            }
            Key::OriginalStatus => obj.original_status = m.next_value()?,
            Key::Details => obj.details = m.next_value()?,
            Key::Metadata => {
                obj.upstream = m.next_value::<Nested<'de>>()?.0.map(|o| Box::new(o.raw))
            }
            Key::Raw => obj.raw = m.next_value()?,
            _ => skip(&mut m)?,
        }
    }
    Ok(())
}

/// Keeps the first envelope an object gave.
fn envelope<'de>(obj: &mut Obj<'de>, kind: Envelope, nested: Option<Box<Obj<'de>>>) {
    if obj.envelope.is_none()
        && let Some(nested) = nested
    {
        obj.envelope = Some((kind, nested));
    }
}

/// Keeps the first string a member gave: `{"message": .., "Message": ..}`
/// or `{"msg": .., "detail": ..}` read the first.
fn first<'de>(slot: &mut Leaf<'de>, value: Leaf<'de>) {
    if slot.as_str().is_none_or(str::is_empty) {
        *slot = value;
    }
}

/// `status`: a word or number (Google's `RESOURCE_EXHAUSTED`, `429`), or an
/// object with the error in it.
enum StatusField<'de> {
    Leaf(Leaf<'de>),
    Obj(Box<Obj<'de>>),
}

impl<'de> Deserialize<'de> for StatusField<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StatusField<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a status")
            }
            tolerant!(StatusField::Leaf(Leaf::Other));
            fn visit_u64<E>(self, n: u64) -> Result<StatusField<'de>, E> {
                Ok(StatusField::Leaf(Leaf::Num(n)))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<StatusField<'de>, E> {
                Ok(StatusField::Leaf(Leaf::Str(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<StatusField<'de>, E> {
                Ok(StatusField::Leaf(Leaf::Str(Cow::Owned(s.to_owned()))))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<StatusField<'de>, A::Error> {
                boxed_obj(m).map(StatusField::Obj)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<StatusField<'de>, A::Error> {
                drain_seq::<_, ()>(s).map(|()| StatusField::Leaf(Leaf::Other))
            }
        }
        d.deserialize_any(V)
    }
}

/// A boxed object, read in place.
fn boxed_obj<'de, A: MapAccess<'de>>(m: A) -> Result<Box<Obj<'de>>, A::Error> {
    let mut obj = Box::<Obj<'de>>::default();
    read_obj(m, &mut obj)?;
    Ok(obj)
}

/// A member that may be an object (read) or anything else (skipped).
#[derive(Default)]
struct Nested<'de>(Option<Box<Obj<'de>>>);

fn nested_map<'de, A: MapAccess<'de>>(m: A) -> Result<Nested<'de>, A::Error> {
    Ok(Nested(Some(boxed_obj(m)?)))
}

container!(Nested<'de>, map: nested_map, seq: drain_seq);

fn body_map<'de, A: MapAccess<'de>>(m: A) -> Result<Body<'de>, A::Error> {
    let obj = Some(boxed_obj(m)?);
    Ok(Body {
        obj,
        in_array: false,
    })
}

/// Vertex wraps the error in an array: read the first item.
fn body_seq<'de, A: SeqAccess<'de>>(mut s: A) -> Result<Body<'de>, A::Error> {
    let obj = s.next_element::<Nested<'de>>()?.and_then(|n| n.0);
    drain_seq::<_, ()>(s)?;
    Ok(Body {
        obj,
        in_array: true,
    })
}

container!(Body<'de>, map: body_map, seq: body_seq);
