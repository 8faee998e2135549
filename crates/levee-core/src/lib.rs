//! The sans-IO policy engine behind Levee.
//!
//! Levee's one idea: **throttling is not failure**. A provider that answers
//! `429` is healthy and busy; a provider that times out, answers `5xx` or
//! `529`, or rejects the key is failing; a provider that says a spend cap or
//! quota is exhausted will keep refusing until the cap resets. Three
//! conditions, three mechanisms:
//!
//! | condition | mechanism | module |
//! |---|---|---|
//! | availability failure, rejected credential | breaker: count, open, cool off, probe | [`breaker`] |
//! | throttling (429 with a wait hint) | throttle gate: closed until the hinted instant, reopens without a probe | [`gate`] |
//! | quota or spend cap exhausted | park until the reset | [`park`] |
//!
//! Everything starts with [`classify`]: a provider response (status, headers,
//! a bounded peek of the body) or a transport failure becomes a
//! [`Verdict`](classify::Verdict), an optional wait hint and a short stable
//! reason. The state machines here take time from a [`Clock`](clock::Clock)
//! and do no IO, so they are deterministic and property-tested; the tower
//! layers in `tower-levee` drive them.
//!
//! ```
//! use http::{HeaderMap, StatusCode};
//! use levee_core::classify::{Classify, ProviderClassifier, ResponseView, Verdict};
//!
//! let classifier = ProviderClassifier::default();
//! let mut headers = HeaderMap::new();
//! headers.insert("retry-after", "7".parse().unwrap());
//! let body = br#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached"}}"#;
//! let c = classifier.classify_response(&ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &headers, body));
//! assert_eq!(c.verdict, Verdict::Throttled);
//! assert_eq!(c.wait, Some(std::time::Duration::from_secs(7)));
//! ```
//!
//! # Stability
//!
//! Types that may grow (a new verdict, a new state, a new field on a
//! record) are `#[non_exhaustive]`: match them with a wildcard arm, and
//! build configurations through their builders or `Default` and field
//! assignment. Items hidden from these docs (`#[doc(hidden)]`) are shared
//! with Levee's own crates and carry no semver promise.
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `serde` | every configuration and classification rule from TOML/JSON/YAML, durations in `humantime` form, errors that name the field |
#![cfg_attr(docsrs, feature(doc_cfg))]
// A type users can build or match in full cannot grow without a breaking
// release: each public one is `#[non_exhaustive]`, or exhaustive on purpose
// with an `#[allow]` that says why.
#![deny(clippy::exhaustive_enums, clippy::exhaustive_structs)]

/// The crates whose types or traits appear in this crate's API, at the
/// versions it was built with. Name them through here and a second,
/// mismatched version of one cannot creep into a build. `api/levee-core.txt`
/// lists them (`public dependency …`), and the snapshot check fails when
/// one is added or dropped.
pub mod deps {
    pub use fastrand;
    pub use http;
    #[cfg(feature = "serde")]
    pub use serde;
}

/// What a type with a stable name (`as_str`) implements, written once:
/// `Display`, comparison with a `&str` both ways, and `Serialize` as the
/// name (when the crate that calls it has a `serde` feature on). Internal:
/// shared with Levee's own crates, no semver promise.
#[doc(hidden)]
#[macro_export]
macro_rules! named {
    ($ty:ident) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, name: &str) -> bool {
                self.as_str() == name
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, name: &&str) -> bool {
                self.as_str() == *name
            }
        }

        impl PartialEq<$ty> for &str {
            fn eq(&self, value: &$ty) -> bool {
                *self == value.as_str()
            }
        }

        #[cfg(feature = "serde")]
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

pub mod answer;
pub mod breaker;
pub mod budget;
pub mod classify;
pub mod clock;
#[cfg(feature = "serde")]
pub mod config;
pub mod config_error;
pub mod gate;
mod json;
pub mod limit;
pub mod pace;
pub mod park;
pub mod request;
pub mod transition;
pub mod usage;
