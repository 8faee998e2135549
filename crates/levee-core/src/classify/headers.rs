//! One pass over the response headers, collecting what classification reads.
//!
//! A `HeaderMap` lookup hashes the name and probes; a response carries a
//! dozen headers and classification reads half a dozen names plus the
//! dialect markers, so a single walk is cheaper than the lookups.

use http::HeaderMap;

use super::dialect::Dialect;

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
                    f.dialect = better(f.dialect, marker(n));
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
            f.dialect = better(f.dialect, Some(Dialect::Azure));
        }
        f
    }
}

/// The dialect the headers name, if any.
pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Dialect> {
    headers
        .keys()
        .fold(None, |found, name| better(found, marker(name.as_str())))
}

/// The dialect a header name marks: `x-amzn-*` Bedrock, `anthropic-*`
/// Anthropic, `x-ms-*`/`azureml-*`/`apim-request-id` Azure, `x-groq-*` Groq,
/// `mistral-*` Mistral, `openai-*` OpenAI.
pub(crate) fn marker(name: &str) -> Option<Dialect> {
    // Every response carries a dozen headers: dispatch on two bytes before
    // comparing any prefix.
    let b = name.as_bytes();
    let (d, prefix) = match (b.first(), b.get(2)) {
        (Some(b'x'), Some(b'a')) => (Dialect::Bedrock, "x-amzn-"),
        (Some(b'x'), Some(b'm')) => (Dialect::Azure, "x-ms-"),
        (Some(b'x'), Some(b'g')) => (Dialect::Groq, "x-groq-"),
        (Some(b'a'), Some(b't')) => (Dialect::Anthropic, "anthropic-"),
        (Some(b'a'), Some(b'u')) => (Dialect::Azure, "azureml-"),
        (Some(b'a'), Some(b'i')) => (Dialect::Azure, "apim-request-id"),
        (Some(b'o'), Some(b'e')) => (Dialect::OpenAi, "openai-"),
        (Some(b'm'), Some(b's')) => (Dialect::Mistral, "mistral-"),
        _ => return None,
    };
    name.starts_with(prefix).then_some(d)
}

/// The stronger of two markers. Azure and the OpenAI-compatible providers
/// forward `openai-*` headers, so OpenAI's marker is the weakest; the
/// others do not mix in practice, and the first seen stays.
pub(crate) fn better(found: Option<Dialect>, new: Option<Dialect>) -> Option<Dialect> {
    match (found, new) {
        (None | Some(Dialect::OpenAi), Some(d)) => Some(d),
        (found, _) => found,
    }
}
