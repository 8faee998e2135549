//! `levee-drill classify`: one verdict per JSON line.
//!
//! Input, one case per line (the format of `provider-signals.json` minus
//! the expectations; unknown fields such as `expect_verdict` are ignored):
//!
//! ```text
//! {"status":429,"headers":{"retry-after":"7"},"body":"..","stream":false}
//! ```
//!
//! - `status`: required; `null` is a transport failure (optional
//!   `"transport": "connect" | "timeout" | "reset" | "other"`, default `other`);
//! - `headers`: optional object of strings (numbers and arrays of strings too);
//! - `body`: optional string; a non-stream body is cut to the 16 KiB peek
//!   the layers take;
//! - `stream`: optional; `true` feeds the body through the [`StreamScanner`];
//! - `dialect`: optional hint (`openai`, `anthropic`, … see [`Dialect::from_name`]).
//!
//! Output, one line per case: `{"verdict":"throttled","wait_ms":9816,
//! "reason":"openai:rate_limit_exceeded"}` (`wait_ms` is `null` when there
//! is no hint), or `{"error":"line 3: <what>"}` for a line that is not a
//! case; the other lines still run. Blank lines are skipped.

use std::io::{self, BufRead, Write};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use levee_core::classify::{
    Classification, Classify, Dialect, ProviderClassifier, ResponseView, StreamFormat,
    StreamScanner, TransportFailure,
};
use serde::Serialize;
use serde_json::{Map, Value};

/// How much of a non-2xx body the layers peek at by default.
pub const PEEK_BYTES: usize = 16 * 1024;

/// One case read from a line.
#[derive(Debug)]
pub struct Case {
    /// `None`: a transport failure.
    pub status: Option<StatusCode>,
    /// The transport failure when `status` is `None`.
    pub transport: TransportFailure,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Vec<u8>,
    /// Whether the body is a stream to scan.
    pub stream: bool,
    /// The caller's dialect hint.
    pub dialect: Option<Dialect>,
}

/// One output line.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Verdict {
    /// The verdict's name.
    pub verdict: &'static str,
    /// The wait hint in milliseconds.
    pub wait_ms: Option<u64>,
    /// The reason.
    pub reason: String,
}

impl From<Classification> for Verdict {
    fn from(c: Classification) -> Self {
        Verdict {
            verdict: c.verdict.as_str(),
            wait_ms: c
                .wait
                .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            reason: c.reason.as_str().to_owned(),
        }
    }
}

#[derive(Serialize)]
struct LineError {
    error: String,
}

fn header_values(name: &str, v: &Value) -> Result<Vec<HeaderValue>, String> {
    let one = |v: &Value| -> Result<HeaderValue, String> {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return Err(format!("header {name:?}: expected a string")),
        };
        HeaderValue::from_str(&s).map_err(|_| format!("header {name:?}: invalid value {s:?}"))
    };
    match v {
        Value::Array(items) => items.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

fn headers(v: Option<&Value>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    let obj = match v {
        None | Some(Value::Null) => return Ok(map),
        Some(Value::Object(o)) => o,
        Some(_) => return Err("\"headers\" must be an object".into()),
    };
    for (k, v) in obj {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("invalid header name {k:?}"))?;
        for value in header_values(k, v)? {
            map.append(name.clone(), value);
        }
    }
    Ok(map)
}

fn optional<'a, T>(
    obj: &'a Map<String, Value>,
    key: &str,
    what: &str,
    read: impl FnOnce(&'a Value) -> Option<T>,
) -> Result<Option<T>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => read(v)
            .map(Some)
            .ok_or_else(|| format!("{key:?} must be {what}")),
    }
}

impl Case {
    /// Reads a case from one JSON line.
    pub fn parse(line: &str) -> Result<Case, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
        let Value::Object(obj) = v else {
            return Err("expected a JSON object".into());
        };
        let status = match obj.get("status") {
            None => {
                return Err(
                    "missing \"status\" (a number, or null for a transport failure)".into(),
                );
            }
            Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|n| u16::try_from(n).ok())
                    .and_then(|n| StatusCode::from_u16(n).ok())
                    .ok_or("\"status\" must be a number from 100 to 999, or null")?,
            ),
        };
        let transport = optional(
            &obj,
            "transport",
            "connect, timeout, reset or other",
            |v| match v.as_str()? {
                "connect" => Some(TransportFailure::Connect),
                "timeout" => Some(TransportFailure::Timeout),
                "reset" => Some(TransportFailure::Reset),
                "other" => Some(TransportFailure::Other),
                _ => None,
            },
        )?;
        let body = optional(&obj, "body", "a string", Value::as_str)?.unwrap_or_default();
        let dialect = optional(
            &obj,
            "dialect",
            "a known dialect (openai, anthropic, …)",
            |v| Dialect::from_name(v.as_str()?),
        )?;
        Ok(Case {
            status,
            transport: transport.unwrap_or(TransportFailure::Other),
            headers: headers(obj.get("headers"))?,
            body: body.as_bytes().to_vec(),
            stream: optional(&obj, "stream", "true or false", Value::as_bool)?.unwrap_or(false),
            dialect,
        })
    }

    /// Classifies the case as the layers would: a transport failure, a
    /// stream through the scanner (a 2xx only: an error status is classified
    /// before any stream starts), or a response with its body peeked.
    pub fn classify(&self, classifier: &ProviderClassifier) -> Classification {
        let Some(status) = self.status else {
            return classifier.classify_transport(self.transport);
        };
        if self.stream && status.is_success() {
            let mut scanner = classifier
                .stream_scanner(status, &self.headers)
                .unwrap_or_else(|| {
                    StreamScanner::new(StreamFormat::Sse).with_classifier(classifier)
                });
            if self.dialect.is_some() {
                scanner = scanner.with_dialect(self.dialect);
            }
            scanner.feed(&self.body);
            return scanner.finish();
        }
        let peek = &self.body[..self.body.len().min(PEEK_BYTES)];
        let view = ResponseView::new(status, &self.headers, peek).with_dialect(self.dialect);
        classifier.classify_response(&view)
    }
}

/// Reads cases from `input` and writes one result line per case to
/// `output`. Fails only if reading or writing fails.
pub fn run(input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    let classifier = ProviderClassifier::default();
    let mut input = input;
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        n += 1;
        let result = std::str::from_utf8(&line)
            .map_err(|e| format!("not UTF-8: {e}"))
            .map(str::trim);
        let json = match result {
            Ok("") => continue,
            Ok(text) => match Case::parse(text) {
                Ok(case) => serde_json::to_string(&Verdict::from(case.classify(&classifier))),
                Err(what) => serde_json::to_string(&LineError {
                    error: format!("line {n}: {what}"),
                }),
            },
            Err(what) => serde_json::to_string(&LineError {
                error: format!("line {n}: {what}"),
            }),
        };
        writeln!(output, "{}", json.map_err(io::Error::other)?)?;
    }
    output.flush()
}
