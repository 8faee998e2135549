//! A key that never shows itself: not in `Debug`, not in `Display`.

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;

/// A provider's, a client's or an operator's key. Its `Debug` prints
/// `Secret(..)`; the only way to the key is [`Secret::expose`], called where
/// a header is set or a presented key compared.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps `key`.
    pub fn new(key: &str) -> Self {
        Secret(key.into())
    }

    /// The key itself.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key as a header value marked sensitive (HTTP/2's HPACK never
    /// indexes it), with `prefix` before it (`"Bearer "`).
    pub fn header_value(&self, prefix: &str) -> Option<HeaderValue> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// Whether `presented` is this key, in time that does not depend on
    /// where they first differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        tower_levee::axum::key_matches(self.0.as_bytes(), presented)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_matches_only_itself_and_never_prints() {
        let s = Secret::new("sk-canary-123");
        assert!(s.matches(b"sk-canary-123"));
        assert!(!s.matches(b"sk-canary-124"));
        assert!(!s.matches(b"sk-canary-12"));
        assert!(!s.matches(b"sk-canary-1234"));
        assert!(!s.matches(b""));
        assert_eq!(format!("{s:?}"), "Secret(..)");
        assert!(s.header_value("Bearer ").unwrap().is_sensitive());
    }
}
