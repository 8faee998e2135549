//! The pieces of levee-core's zero-copy JSON readers (error bodies, a
//! request's members, an answer's usage): visits that keep only the members
//! a rule reads and skip whatever they do not, so that one odd member never
//! loses a document. Building a `serde_json::Value` instead would allocate a
//! map per object and a string per key.

use std::fmt;

use serde_core::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

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
/// array by `$seq`; any scalar gives its `Default`. A type that borrows
/// from the document names the lifetime `'de`: `container!(Obj<'de>, ..)`.
macro_rules! container {
    ($ty:ty, map: $map:path, seq: $seq:path) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
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

/// `Deserialize` for the member names a reader tells apart, matched on the
/// name as the document holds it, without allocating:
/// `member_names!(Key { "model" => Key::Model, _ => Key::Other })`.
macro_rules! member_names {
    ($ty:ty { $($name:pat => $value:expr),+ $(,)? }) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a member name")
                    }
                    fn visit_str<E>(self, k: &str) -> Result<$ty, E> {
                        Ok(match k {
                            $($name => $value),+
                        })
                    }
                }
                d.deserialize_identifier(V)
            }
        }
    };
}

pub(crate) use {container, member_names, tolerant};

pub(crate) fn drain_map<'de, A: MapAccess<'de>, T: Default>(mut m: A) -> Result<T, A::Error> {
    while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(T::default())
}

pub(crate) fn drain_seq<'de, A: SeqAccess<'de>, T: Default>(mut s: A) -> Result<T, A::Error> {
    while s.next_element::<IgnoredAny>()?.is_some() {}
    Ok(T::default())
}

/// Skips a member's value.
pub(crate) fn skip<'de, A: MapAccess<'de>>(m: &mut A) -> Result<(), A::Error> {
    m.next_value::<IgnoredAny>().map(drop)
}

/// A scalar as the readers take it: a boolean, a non-negative integer, or
/// anything else (skipped, containers included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    Bool(bool),
    Count(u64),
    Other,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(b))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Scalar, E> {
                Ok(Scalar::Count(n))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_none<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Scalar, A::Error> {
                drain_map::<_, ()>(m).map(|()| Scalar::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Scalar, A::Error> {
                drain_seq::<_, ()>(s).map(|()| Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
}
