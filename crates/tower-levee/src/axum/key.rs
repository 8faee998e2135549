//! The key a request presents, and the comparison that checks it.

use http::HeaderMap;
use http::header::AUTHORIZATION;

/// The key a request presents: `Authorization: Bearer <key>` (the scheme
/// in any case), else `x-api-key` or Azure's `api-key`; `None` when it
/// presents none, or an empty one.
///
/// ```
/// use http::HeaderMap;
/// use tower_levee::axum::presented_key;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("authorization", "bearer sk-ops".parse().unwrap());
/// assert_eq!(presented_key(&headers), Some(&b"sk-ops"[..]));
/// ```
pub fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(value) = headers.get(AUTHORIZATION) {
        let bytes = value.as_bytes();
        let prefix = b"bearer ";
        if bytes.len() > prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix) {
            return Some(bytes[prefix.len()..].trim_ascii()).filter(|k| !k.is_empty());
        }
    }
    ["x-api-key", "api-key"]
        .into_iter()
        .find_map(|name| headers.get(name))
        .map(|v| v.as_bytes().trim_ascii())
        .filter(|k| !k.is_empty())
}

/// Whether `presented` is `key`, in time that does not depend on where
/// they first differ (nor on `presented`'s length beyond its own). An
/// empty key matches nothing.
pub fn key_matches(key: &[u8], presented: &[u8]) -> bool {
    if key.is_empty() {
        return false;
    }
    let mut diff = key.len() ^ presented.len();
    for (i, &b) in presented.iter().enumerate() {
        diff |= usize::from(b ^ key[i % key.len()]);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_read_from_bearer_x_api_key_or_api_key_and_never_empty() {
        let with = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, value.parse().unwrap());
            presented_key(&h).map(<[u8]>::to_vec)
        };
        assert_eq!(with("authorization", "Bearer k1"), Some(b"k1".to_vec()));
        assert_eq!(with("authorization", "BEARER  k1 "), Some(b"k1".to_vec()));
        assert_eq!(with("x-api-key", "k2"), Some(b"k2".to_vec()));
        assert_eq!(with("api-key", "k3"), Some(b"k3".to_vec()));
        assert_eq!(with("x-api-key", ""), None);
        assert_eq!(with("authorization", "Bearer  "), None);
        assert_eq!(with("authorization", "Basic abc"), None);
    }

    #[test]
    fn keys_match_only_when_equal_and_never_when_empty() {
        assert!(key_matches(b"secret", b"secret"));
        assert!(!key_matches(b"secret", b"secreT"));
        assert!(!key_matches(b"secret", b"secre"));
        assert!(!key_matches(b"secret", b"secretsecret"));
        assert!(!key_matches(b"", b""));
        assert!(!key_matches(b"secret", b""));
    }
}
