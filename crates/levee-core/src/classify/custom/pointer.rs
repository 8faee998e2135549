//! The values at a rule set's JSON pointers, read in one pass over a body.
//!
//! Every pointer of every rule goes into one tree of member names; the
//! body is visited once, descending only into members some pointer names
//! and skipping the rest unread, so fifty rules that each read a field cost
//! one walk of the body, not fifty, and nothing is built for what no rule
//! reads.

use std::fmt;

use serde_core::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A value found at a pointer.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum Found {
    /// Nothing there (or the body is not JSON).
    #[default]
    Absent,
    Str(String),
    Num(f64),
    Bool(bool),
    Null,
    /// An object or an array: present, with no scalar value.
    Container,
}

/// A JSON pointer (RFC 6901) split into its unescaped reference tokens.
pub(crate) fn parse(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!(
            "a JSON pointer starts with `/` (RFC 6901), got {pointer:?}"
        ));
    };
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                match c {
                    '~' => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(format!(
                                "`~` must be followed by 0 or 1 in a JSON pointer, got {pointer:?}"
                            ));
                        }
                    },
                    c => out.push(c),
                }
            }
            Ok(out)
        })
        .collect()
}

/// The tree of every pointer's tokens; a node that ends a pointer holds
/// its slot in the results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tree {
    children: Vec<(Box<str>, Tree)>,
    slots: Vec<usize>,
}

impl Tree {
    /// Adds `tokens`, whose value goes to `slot`.
    pub(crate) fn insert(&mut self, tokens: &[String], slot: usize) {
        match tokens.split_first() {
            None => self.slots.push(slot),
            Some((first, rest)) => {
                let i = match self.children.iter().position(|(k, _)| **k == **first) {
                    Some(i) => i,
                    None => {
                        self.children.push((first.as_str().into(), Tree::default()));
                        self.children.len() - 1
                    }
                };
                self.children[i].1.insert(rest, slot);
            }
        }
    }

    fn child(&self, key: &str) -> Option<&Tree> {
        self.children
            .iter()
            .find(|(k, _)| **k == *key)
            .map(|(_, t)| t)
    }

    /// The values at every pointer in `body`, by slot (`slots` of them);
    /// all absent when the body is not one JSON document.
    pub(crate) fn read(&self, body: &[u8], slots: usize) -> Vec<Found> {
        let mut found = vec![Found::Absent; slots];
        // An error framed as a server-sent event is read as the built-in
        // rules read it: its `data:`.
        let body = crate::classify::body::sse_data(body).unwrap_or(body);
        if !matches!(body.trim_ascii_start().first(), Some(b'{' | b'[')) {
            return found;
        }
        let mut de = serde_json::Deserializer::from_slice(body);
        let read = Walk {
            tree: self,
            found: &mut found,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end());
        if read.is_err() {
            // A cut or malformed body: what it said before the fault is
            // not trusted to be the document's, as the built-in reader
            // falls back to text for it.
            found.fill(Found::Absent);
        }
        found
    }
}

/// One node's visit: records the value for its slots, descends into the
/// members its children name.
struct Walk<'t, 'f> {
    tree: &'t Tree,
    found: &'f mut Vec<Found>,
}

impl Walk<'_, '_> {
    fn record(&mut self, value: Found) {
        for &slot in &self.tree.slots {
            self.found[slot] = value.clone();
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.tree.children.is_empty() && self.tree.slots.is_empty() {
            return d.deserialize_ignored_any(IgnoredAny).map(drop);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(mut self, v: bool) -> Result<(), E> {
        self.record(Found::Bool(v));
        Ok(())
    }
    fn visit_i64<E>(mut self, v: i64) -> Result<(), E> {
        self.record(Found::Num(v as f64));
        Ok(())
    }
    fn visit_u64<E>(mut self, v: u64) -> Result<(), E> {
        self.record(Found::Num(v as f64));
        Ok(())
    }
    fn visit_f64<E>(mut self, v: f64) -> Result<(), E> {
        self.record(Found::Num(v));
        Ok(())
    }
    fn visit_str<E>(mut self, v: &str) -> Result<(), E> {
        self.record(Found::Str(v.to_owned()));
        Ok(())
    }
    fn visit_unit<E>(mut self) -> Result<(), E> {
        self.record(Found::Null);
        Ok(())
    }
    fn visit_none<E>(mut self) -> Result<(), E> {
        self.record(Found::Null);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut m: A) -> Result<(), A::Error> {
        self.record(Found::Container);
        while let Some(child) = m.next_key_seed(Member(self.tree))? {
            match child {
                Some(tree) => m.next_value_seed(Walk {
                    tree,
                    found: self.found,
                })?,
                None => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut s: A) -> Result<(), A::Error> {
        self.record(Found::Container);
        let mut index = 0usize;
        loop {
            let key = index.to_string();
            let more = match self.tree.child(&key) {
                Some(tree) => s
                    .next_element_seed(Walk {
                        tree,
                        found: self.found,
                    })?
                    .is_some(),
                None => s.next_element::<IgnoredAny>()?.is_some(),
            };
            if !more {
                return Ok(());
            }
            index += 1;
        }
    }
}

/// A member's name, matched against a node's children as it is read,
/// without copying it.
struct Member<'t>(&'t Tree);

impl<'de, 't> DeserializeSeed<'de> for Member<'t> {
    type Value = Option<&'t Tree>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'t> Visitor<'_> for Member<'t> {
    type Value = Option<&'t Tree>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.child(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pointers: &[&str], body: &str) -> Vec<Found> {
        let mut tree = Tree::default();
        for (slot, p) in pointers.iter().enumerate() {
            tree.insert(&parse(p).unwrap(), slot);
        }
        tree.read(body.as_bytes(), pointers.len())
    }

    #[test]
    fn pointers_read_nested_members_array_items_and_escapes_in_one_pass() {
        let body = r#"{"base_resp":{"status_code":1008,"status_msg":"insufficient balance"},
            "a/b":{"m~n":true},"list":[{"x":1},{"x":"two"}],"f":20.5,"n":null}"#;
        let got = read(
            &[
                "/base_resp/status_code",
                "/base_resp/status_msg",
                "/a~1b/m~0n",
                "/list/1/x",
                "/f",
                "/n",
                "/missing",
                "/list",
                "",
            ],
            body,
        );
        assert_eq!(
            got,
            vec![
                Found::Num(1008.0),
                Found::Str("insufficient balance".into()),
                Found::Bool(true),
                Found::Str("two".into()),
                Found::Num(20.5),
                Found::Null,
                Found::Absent,
                Found::Container,
                Found::Container,
            ]
        );
    }

    #[test]
    fn a_body_that_is_not_one_json_document_has_no_values() {
        for body in ["upstream connect error", "{\"a\":1", "{\"a\":1} {}", ""] {
            assert_eq!(read(&["/a"], body), vec![Found::Absent], "{body:?}");
        }
    }

    #[test]
    fn a_pointer_must_start_with_a_slash_and_escape_tildes() {
        assert!(parse("error/code").unwrap_err().contains("starts with `/`"));
        assert!(parse("/a~2").unwrap_err().contains("`~` must be followed"));
        assert_eq!(parse("/a/~1/").unwrap(), vec!["a", "/", ""]);
    }
}
