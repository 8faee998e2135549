//! Short strings held inline: scope keys and names built per call, so the
//! hot path neither allocates nor touches a shared reference count. A leaf:
//! it imports nothing of the crate.

use std::fmt;
use std::sync::Arc;

/// A short string held inline up to `N` bytes, so the hot path neither
/// allocates nor touches a shared reference count; longer ones on the heap.
/// The bytes past an inline string's `len` are always zero: equality
/// compares whole arrays, and a copy takes them along.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum InlineStr<const N: usize> {
    Inline { len: u8, bytes: [u8; N] },
    Heap(Box<str>),
}

impl<const N: usize> InlineStr<N> {
    /// The empty string.
    pub(crate) const EMPTY: Self = InlineStr::Inline {
        len: 0,
        bytes: [0; N],
    };

    /// `parts` joined with `sep`.
    pub(crate) fn join(parts: &[&str], sep: char) -> Self {
        if let [only] = parts {
            return Self::copy(only);
        }
        let mut sep_buf = [0u8; 4];
        let sep = sep.encode_utf8(&mut sep_buf).as_bytes();
        let total: usize = parts.iter().map(|p| p.len()).sum::<usize>()
            + sep.len() * parts.len().saturating_sub(1);
        if total <= N && total <= usize::from(u8::MAX) {
            let mut bytes = [0u8; N];
            let mut at = 0;
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    bytes[at..at + sep.len()].copy_from_slice(sep);
                    at += sep.len();
                }
                bytes[at..at + p.len()].copy_from_slice(p.as_bytes());
                at += p.len();
            }
            InlineStr::Inline {
                len: total as u8,
                bytes,
            }
        } else {
            let sep = std::str::from_utf8(sep).unwrap_or("/");
            InlineStr::Heap(parts.join(sep).into_boxed_str())
        }
    }

    /// A copy of `s`.
    pub(crate) fn copy(s: &str) -> Self {
        match u8::try_from(s.len()) {
            Ok(len) if s.len() <= N => {
                let mut bytes = [0u8; N];
                bytes[..s.len()].copy_from_slice(s.as_bytes());
                InlineStr::Inline { len, bytes }
            }
            _ => InlineStr::Heap(s.into()),
        }
    }

    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Built only from whole `&str`s joined by a whole char.
            InlineStr::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default()
            }
            InlineStr::Heap(s) => s,
        }
    }

    /// A copy held in `M` bytes inline. Its bytes are copied, not checked
    /// again: they came from whole `&str`s.
    #[inline]
    pub(crate) fn resized<const M: usize>(&self) -> InlineStr<M> {
        match self {
            InlineStr::Inline { len, bytes } if usize::from(*len) <= M => {
                // A copy of fixed size, the zeros past `len` with it.
                let whole = M.min(N);
                let mut copy = [0u8; M];
                copy[..whole].copy_from_slice(&bytes[..whole]);
                InlineStr::Inline {
                    len: *len,
                    bytes: copy,
                }
            }
            longer => InlineStr::copy(longer.as_str()),
        }
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            InlineStr::Inline { len, bytes } => &bytes[..*len as usize],
            InlineStr::Heap(s) => s.as_bytes(),
        }
    }

    /// Whether this key equals `parts` joined by `sep`, without building it.
    /// Compares bytes: no UTF-8 check on the hot path.
    pub(crate) fn eq_join(&self, parts: &[&str], sep: char) -> bool {
        if let [only] = parts {
            return self.as_bytes() == only.as_bytes();
        }
        let mut sep_buf = [0u8; 4];
        let sep = sep.encode_utf8(&mut sep_buf).as_bytes();
        let mut rest = self.as_bytes();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                match rest.strip_prefix(sep) {
                    Some(r) => rest = r,
                    None => return false,
                }
            }
            match rest.strip_prefix(p.as_bytes()) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }
}

impl<const N: usize> AsRef<str> for InlineStr<N> {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> std::ops::Deref for InlineStr<N> {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> fmt::Debug for InlineStr<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The name of a scope that refused a request, as a rejection or a
/// failover's refusal carries it. A refusal by the layers copies its
/// scope's key inline (on the heap only when long), so that it allocates
/// its boxed error and nothing else and writes no shared reference count,
/// and a failover keeps it in its list of refusals; a name given as an
/// `Arc<str>` (a rejection built by hand) is shared.
#[derive(Clone)]
pub(crate) enum ScopeName {
    Shared(Arc<str>),
    // 46 bytes: a rejection is 64 in all, and a provider's host with a
    // model name fits (`api.anthropic.com/claude-sonnet-4-5-20250929`).
    Copied(InlineStr<46>),
}

impl ScopeName {
    /// A copy of `name`, inline when it fits.
    pub(crate) fn copied(name: &str) -> Self {
        ScopeName::Copied(InlineStr::copy(name))
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            ScopeName::Shared(name) => name,
            ScopeName::Copied(key) => key.as_str(),
        }
    }
}

/// A scope's key, as a lookup reads it and a refusal names it.
pub(crate) trait ScopeKey: AsRef<str> {
    /// The name a refusal of this key carries.
    fn to_scope_name(&self) -> ScopeName {
        ScopeName::copied(self.as_ref())
    }
}

impl ScopeKey for str {}

impl<const N: usize> ScopeKey for InlineStr<N> {
    /// Copied byte for byte: no second check that the key is UTF-8.
    #[inline]
    fn to_scope_name(&self) -> ScopeName {
        ScopeName::Copied(self.resized())
    }
}

impl<K: ScopeKey + ?Sized> ScopeKey for &K {
    #[inline]
    fn to_scope_name(&self) -> ScopeName {
        (**self).to_scope_name()
    }
}

/// Equal when the names are, however each is held.
impl PartialEq for ScopeName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ScopeName {}

impl fmt::Debug for ScopeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ScopeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::{InlineStr, ScopeKey};

    proptest::proptest! {
        /// A key copied into a refusal's name, inline or on the heap, reads
        /// as the key did, whatever its length and characters.
        #[test]
        fn a_keys_scope_name_reads_as_the_key(
            parts in proptest::collection::vec("\\PC{0,20}", 1..4),
        ) {
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let key = InlineStr::<54>::join(&parts, '/');
            let joined = parts.join("/");
            proptest::prop_assert_eq!(key.as_str(), joined.as_str());
            let (name, short) = (key.to_scope_name(), key.resized::<8>());
            proptest::prop_assert_eq!(name.as_str(), joined.as_str());
            proptest::prop_assert_eq!(short.as_str(), joined.as_str());
        }
    }
}
