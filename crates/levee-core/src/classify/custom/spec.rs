//! Rules read from a file (feature `serde`): `[[rule]]` tables, each
//! checked as [`RuleBuilder::build`] checks one, every value where it is
//! written so the error names its key.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use super::{Rule, RuleBuilder, Rules, Statuses};
use crate::classify::verdict::Verdict;
use crate::config::de_error;

/// A rules file: `[[rule]]` tables, in order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesSpec {
    #[serde(default)]
    rule: Vec<Rule>,
}

impl<'de> Deserialize<'de> for Rules {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec = RulesSpec::deserialize(d)?;
        Rules::new(spec.rule).map_err(de_error)
    }
}

/// One `[[rule]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    name: String,
    verdict: Verdict,
    #[serde(default)]
    status: Option<OneOrMany<StatusSpec>>,
    #[serde(default)]
    code: OneOrMany<CodeSpec>,
    #[serde(default)]
    phrase: OneOrMany<Text>,
    #[serde(default)]
    field: OneOrMany<FieldSpec>,
    #[serde(default)]
    header: OneOrMany<HeaderSpec>,
    #[serde(default)]
    wait: Option<WaitSpec>,
    #[serde(default)]
    reason: Option<String>,
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = RuleSpec::deserialize(d)?;
        let mut b = Rule::builder(&s.name, s.verdict);
        for (low, high) in s.status.into_iter().flat_map(|s| s.0).map(|s| s.0) {
            b = b.statuses(low, high);
        }
        for code in s.code.0 {
            b = b.code(&code.0);
        }
        for phrase in s.phrase.0 {
            b = b.phrase(&phrase.0);
        }
        for f in s.field.0 {
            b = f.apply(b);
        }
        for h in s.header.0 {
            b = h.apply(b);
        }
        b = match s.wait {
            None => b,
            Some(WaitSpec::Fixed(d)) => b.wait(d),
            Some(WaitSpec::Field(f)) => match f.unit {
                UnitSpec::S => b.wait_field(&f.pointer.0),
                UnitSpec::Ms => b.wait_field_millis(&f.pointer.0),
            },
        };
        if let Some(reason) = &s.reason {
            b = b.reason(reason);
        }
        b.build().map_err(de_error)
    }
}

/// A scalar visit that reads the value as the one item.
macro_rules! forward_one {
    ($($visit:ident: $ty:ty),*) => {
        $(fn $visit<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            T::deserialize(de::IntoDeserializer::<E>::into_deserializer(v)).map(|t| OneOrMany(vec![t]))
        })*
    };
}

/// A value or a list of them: `status = 429` or `status = [402, 403]`.
struct OneOrMany<T>(Vec<T>);

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // `untagged` would hide the item's own error behind "did not match
        // any variant": a list is read as a list, anything else as one.
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value or a list of values")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = s.next_element()? {
                    items.push(item);
                }
                if items.is_empty() {
                    return Err(de::Error::custom(
                        "an empty list matches nothing: leave the key out",
                    ));
                }
                Ok(OneOrMany(items))
            }
            forward_one!(visit_str: &str, visit_string: String, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_bool: bool);
            fn visit_map<A: de::MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(m)).map(|t| OneOrMany(vec![t]))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A status, a class or a range, checked where it is written.
struct StatusSpec((u16, u16));

impl<'de> Deserialize<'de> for StatusSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StatusSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a status such as 429, \"4xx\" or \"400-403\"")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<StatusSpec, E> {
                let n = u16::try_from(n)
                    .map_err(|_| E::custom(format!("a status is 100 to 999, got {n}")))?;
                Statuses::range(n, n).map(StatusSpec).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<StatusSpec, E> {
                let n = u16::try_from(n)
                    .map_err(|_| E::custom(format!("a status is 100 to 999, got {n}")))?;
                Statuses::range(n, n).map(StatusSpec).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StatusSpec, E> {
                Statuses::parse_one(s).map(StatusSpec).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A code: a word, or a provider's number (`1113` or `"1113"`).
struct CodeSpec(String);

impl<'de> Deserialize<'de> for CodeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = CodeSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a code: a word or a number")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<CodeSpec, E> {
                if s.trim().is_empty() {
                    return Err(E::custom("must not be empty"));
                }
                Ok(CodeSpec(s.to_owned()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<CodeSpec, E> {
                Ok(CodeSpec(n.to_string()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<CodeSpec, E> {
                Ok(CodeSpec(n.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A non-empty text.
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(de::Error::custom("must not be empty"));
        }
        Ok(Text(s))
    }
}

/// `field = { pointer = "/error/kind", equals = "billing" }`: one test.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldSpec {
    pointer: Pointer,
    #[serde(default)]
    present: Option<bool>,
    #[serde(default)]
    equals: Option<OneOrMany<ScalarSpec>>,
    #[serde(default)]
    contains: Option<Text>,
}

impl FieldSpec {
    fn apply(self, b: RuleBuilder) -> RuleBuilder {
        let p = &self.pointer.0;
        match (self.present, self.equals, self.contains) {
            (None | Some(true), None, None) => b.field_present(p),
            (Some(false), None, None) => b.field_absent(p),
            (None, Some(values), None) => b.field_equals(p, values.0.iter().map(|v| v.0.as_str())),
            (None, None, Some(phrase)) => b.field_contains(p, &phrase.0),
            _ => b.fail(
                "rule.field",
                format!("field {p:?}: give one of present, equals or contains"),
            ),
        }
    }
}

/// A JSON pointer, checked where it is written.
struct Pointer(String);

impl<'de> Deserialize<'de> for Pointer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        super::pointer::parse(&s).map_err(de::Error::custom)?;
        Ok(Pointer(s))
    }
}

/// A value to compare with: a string, a number or a boolean, kept as text
/// for [`RuleBuilder::field_equals`].
struct ScalarSpec(String);

impl<'de> Deserialize<'de> for ScalarSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ScalarSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, a number or a boolean")
            }
            fn visit_str<E>(self, s: &str) -> Result<ScalarSpec, E> {
                Ok(ScalarSpec(s.to_owned()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<ScalarSpec, E> {
                Ok(ScalarSpec(n.to_string()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<ScalarSpec, E> {
                Ok(ScalarSpec(n.to_string()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<ScalarSpec, E> {
                Ok(ScalarSpec(n.to_string()))
            }
            fn visit_bool<E>(self, b: bool) -> Result<ScalarSpec, E> {
                Ok(ScalarSpec(b.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `header = "x-acme-quota"` or `{ name = "x-acme-error", equals = "quota" }`.
enum HeaderSpec {
    Name(String),
    Test(HeaderTestSpec),
}

impl<'de> Deserialize<'de> for HeaderSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read by its form, so that a mistake inside the table is named
        // (an untagged enum would only say no form matched).
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HeaderSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a header name, or { name = .., equals = .. | contains = .. }")
            }
            fn visit_str<E>(self, s: &str) -> Result<HeaderSpec, E> {
                Ok(HeaderSpec::Name(s.to_owned()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, m: A) -> Result<HeaderSpec, A::Error> {
                HeaderTestSpec::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(HeaderSpec::Test)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderTestSpec {
    name: String,
    #[serde(default)]
    equals: Option<String>,
    #[serde(default)]
    contains: Option<String>,
}

impl HeaderSpec {
    fn apply(self, b: RuleBuilder) -> RuleBuilder {
        match self {
            HeaderSpec::Name(name) => b.header_present(&name),
            HeaderSpec::Test(t) => match (t.equals, t.contains) {
                (None, None) => b.header_present(&t.name),
                (Some(v), None) => b.header_equals(&t.name, &v),
                (None, Some(v)) => b.header_contains(&t.name, &v),
                (Some(_), Some(_)) => b.fail(
                    "rule.header",
                    format!("header {:?}: give equals or contains, not both", t.name),
                ),
            },
        }
    }
}

/// `wait = "30s"` or `wait = { pointer = "/estimated_time", unit = "s" }`.
enum WaitSpec {
    Fixed(Duration),
    Field(WaitFieldSpec),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitFieldSpec {
    pointer: Pointer,
    #[serde(default)]
    unit: UnitSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "lowercase")]
enum UnitSpec {
    #[default]
    S,
    Ms,
}

impl<'de> Deserialize<'de> for WaitSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WaitSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"30s\", or { pointer = \"/retry_after\" }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<WaitSpec, E> {
                crate::config::duration::parse(s)
                    .map(WaitSpec::Fixed)
                    .map_err(E::custom)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, m: A) -> Result<WaitSpec, A::Error> {
                WaitFieldSpec::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(WaitSpec::Field)
            }
        }
        d.deserialize_any(V)
    }
}
