//! One pass over the response headers, collecting what classification reads.
//!
//! A `HeaderMap` lookup hashes the name and probes; a response carries a
//! dozen headers and classification reads half a dozen names plus the
//! dialect markers, so a single walk is cheaper than the lookups.

use http::HeaderMap;

use super::dialect::{self, Dialect};

/// The headers classification reads (the first of each, as `get` would).
#[derive(Debug, Default)]
pub(crate) struct HeaderFacts<'h> {
    pub(crate) retry_after_ms: Option<&'h str>,
    pub(crate) x_ms_retry_after_ms: Option<&'h str>,
    pub(crate) retry_after: Option<&'h str>,
    pub(crate) date: Option<&'h str>,
    /// Bedrock's `x-amzn-ErrorType`.
    pub(crate) aws_error_type: Option<&'h str>,
    pub(crate) should_retry: Option<&'h str>,
    pub(crate) dialect: Option<Dialect>,
}

impl<'h> HeaderFacts<'h> {
    pub(crate) fn scan(headers: &'h HeaderMap) -> Self {
        let mut f = HeaderFacts::default();
        for (name, value) in headers {
            let slot = match name.as_str() {
                "retry-after-ms" => &mut f.retry_after_ms,
                "x-ms-retry-after-ms" => &mut f.x_ms_retry_after_ms,
                "retry-after" => &mut f.retry_after,
                "date" => &mut f.date,
                "x-amzn-errortype" => &mut f.aws_error_type,
                "x-should-retry" => &mut f.should_retry,
                n => {
                    f.dialect = dialect::better(f.dialect, dialect::marker(n));
                    continue;
                }
            };
            if slot.is_none() {
                *slot = value.to_str().ok();
            }
        }
        // `x-amzn-ErrorType` is itself a Bedrock marker, as is `x-ms-retry-after-ms` Azure's.
        if f.aws_error_type.is_some() {
            f.dialect = Some(Dialect::Bedrock);
        } else if f.x_ms_retry_after_ms.is_some() {
            f.dialect = dialect::better(f.dialect, Some(Dialect::Azure));
        }
        f
    }
}
