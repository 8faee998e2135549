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
//!
//! A 2xx body that is not a stream is read for an error object in its
//! place, as a classifier with `peek_success` reads it (always: the input
//! is an answer someone logged, whoever the provider): a bare `{"error":
//! ..}` under a `200` is an error here, where a gateway reads it so only
//! for the hosts known to answer that way.
//!
//! With `--rules FILE` (a rules file, see `levee_core::classify::Rules`)
//! the user's rules are checked first, and each line says which decided:
//! `"rule":"acme-balance"`, or `"rule":null` when the built-in rules did.
//!
//! With `--jsonl FILE` (`-` for stdin) the cases are counted instead of
//! printed: per verdict, per reason, per rule, and the answers no rule
//! recognised (the verdict came from the status alone: a `status:<n>`
//! reason), with their line numbers, so a day of logged answers shows
//! what Levee would have done with them. See [`Report`].

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use levee_core::classify::{
    Classification, Classify, Dialect, ProviderClassifier, ResponseView, Rules, StreamFormat,
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
    /// With user rules: the name of the rule that decided, `None` (`null`)
    /// when the built-in rules did. Left out without user rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Option<String>>,
}

impl Verdict {
    /// The output line of `c`, naming its rule when `rules` are in use.
    pub fn of(c: &Classification, rules: Option<&Rules>) -> Self {
        Verdict {
            verdict: c.verdict.as_str(),
            wait_ms: c
                .wait
                .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            reason: c.reason.as_str().to_owned(),
            rule: rules.map(|r| {
                c.rule
                    .and_then(|i| r.get(i))
                    .map(|rule| rule.name().to_owned())
            }),
        }
    }
}

impl From<Classification> for Verdict {
    fn from(c: Classification) -> Self {
        Verdict::of(&c, None)
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

/// The classifier `classify` uses: the default, reading 2xx bodies, with
/// the user's `rules` first.
pub fn classifier(rules: Option<Rules>) -> ProviderClassifier {
    let builder = ProviderClassifier::builder().peek_success(true);
    match rules {
        Some(rules) => builder.rules(rules),
        None => builder,
    }
    .build()
}

/// Each line of `input`, numbered from 1: a case, or what is wrong with it.
/// Blank lines are skipped.
fn cases(input: impl BufRead) -> impl Iterator<Item = io::Result<(usize, Result<Case, String>)>> {
    let mut input = input;
    let mut line = Vec::new();
    let mut n = 0;
    std::iter::from_fn(move || {
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line) {
                Err(e) => return Some(Err(e)),
                Ok(0) => return None,
                Ok(_) => {}
            }
            n += 1;
            let case = match std::str::from_utf8(&line).map(str::trim) {
                Ok("") => continue,
                Ok(text) => Case::parse(text),
                Err(e) => Err(format!("not UTF-8: {e}")),
            };
            return Some(Ok((n, case)));
        }
    })
}

/// Reads cases from `input` and writes one result line per case to
/// `output`, classified with `rules` first when given. Fails only if
/// reading or writing fails.
pub fn run(input: impl BufRead, mut output: impl Write, rules: Option<Rules>) -> io::Result<()> {
    let named = rules.is_some();
    let classifier = classifier(rules);
    // An empty rules file is still rules in use: every line names its rule.
    let empty = Rules::default();
    let rules = named.then(|| classifier.rules().unwrap_or(&empty));
    for item in cases(input) {
        let (n, case) = item?;
        let json = match case {
            Ok(case) => serde_json::to_string(&Verdict::of(&case.classify(&classifier), rules)),
            Err(what) => serde_json::to_string(&LineError {
                error: format!("line {n}: {what}"),
            }),
        };
        writeln!(output, "{}", json.map_err(io::Error::other)?)?;
    }
    output.flush()
}

/// What `--jsonl` reports of a file of answers.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Report {
    /// Cases classified.
    pub answers: u64,
    /// Lines that were not a case.
    pub bad_lines: Vec<String>,
    /// Answers per verdict.
    pub verdicts: BTreeMap<&'static str, u64>,
    /// Answers per reason.
    pub reasons: BTreeMap<String, u64>,
    /// Answers per user rule (with `--rules`).
    pub rules: BTreeMap<String, u64>,
    /// Answers no rule recognised: their verdict came from the status
    /// alone (`status:<n>`). At most [`Report::UNRECOGNISED_KEPT`] listed.
    pub unrecognised: Vec<Unrecognised>,
    /// How many answers were unrecognised in all.
    pub unrecognised_count: u64,
}

/// `text` with anything that looks like a key masked (`sk-…`, `Bearer …`,
/// `AIza…`): providers echo part of a rejected key in their answers.
fn masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((at, lead)) = ["sk-", "Bearer ", "bearer ", "AIza"]
        .iter()
        .filter_map(|lead| rest.find(lead).map(|at| (at, *lead)))
        .min()
    {
        out.push_str(&rest[..at + lead.len()]);
        out.push('…');
        let tail = &rest[at + lead.len()..];
        let key = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*')))
            .unwrap_or(tail.len());
        rest = &tail[key..];
    }
    out.push_str(rest);
    out
}

/// One answer no rule recognised.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Unrecognised {
    /// Its line in the input.
    pub line: usize,
    /// Its status.
    pub status: u16,
    /// The verdict the status gave.
    pub verdict: &'static str,
    /// The start of its body (at most 160 characters).
    pub body: String,
}

impl Report {
    /// How many unrecognised answers are listed.
    pub const UNRECOGNISED_KEPT: usize = 50;

    /// Counts every case of `input`, classified with `rules` first.
    pub fn of(input: impl BufRead, rules: Option<Rules>) -> io::Result<Report> {
        let classifier = classifier(rules);
        let mut report = Report::default();
        for item in cases(input) {
            let (n, case) = item?;
            let case = match case {
                Ok(case) => case,
                Err(what) => {
                    report.bad_lines.push(format!("line {n}: {what}"));
                    continue;
                }
            };
            let c = case.classify(&classifier);
            report.answers += 1;
            *report.verdicts.entry(c.verdict.as_str()).or_default() += 1;
            *report
                .reasons
                .entry(c.reason.as_str().to_owned())
                .or_default() += 1;
            if let Some(rule) = c.rule.and_then(|i| classifier.rules()?.get(i)) {
                *report.rules.entry(rule.name().to_owned()).or_default() += 1;
            }
            if let (Some(status), true) = (case.status, c.reason.as_str().starts_with("status:")) {
                report.unrecognised_count += 1;
                if report.unrecognised.len() < Report::UNRECOGNISED_KEPT {
                    let body = String::from_utf8_lossy(&case.body);
                    report.unrecognised.push(Unrecognised {
                        line: n,
                        status: status.as_u16(),
                        verdict: c.verdict.as_str(),
                        body: masked(&body.chars().take(160).collect::<String>()),
                    });
                }
            }
        }
        Ok(report)
    }

    /// The report as text, for a terminal.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let pct = |n: u64| 100.0 * n as f64 / self.answers.max(1) as f64;
        let _ = writeln!(out, "{} answers", self.answers);
        let mut section = |title: &str, rows: Vec<(String, u64)>| {
            if rows.is_empty() {
                return;
            }
            let _ = writeln!(out, "\n{title}");
            let mut rows = rows;
            rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            for (name, n) in rows {
                let _ = writeln!(out, "  {n:>8}  {:>5.1}%  {name}", pct(n));
            }
        };
        section(
            "by verdict",
            self.verdicts
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
        );
        section(
            "by reason",
            self.reasons.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        );
        section(
            "by your rules",
            self.rules.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        );
        let _ = writeln!(
            out,
            "\nrecognised by no rule (verdict from the status alone): {} ({:.1}%)",
            self.unrecognised_count,
            pct(self.unrecognised_count)
        );
        for u in &self.unrecognised {
            let _ = writeln!(
                out,
                "  line {}: {} -> {}: {}",
                u.line, u.status, u.verdict, u.body
            );
        }
        if self.unrecognised_count > self.unrecognised.len() as u64 {
            let _ = writeln!(
                out,
                "  … and {} more",
                self.unrecognised_count - self.unrecognised.len() as u64
            );
        }
        for bad in &self.bad_lines {
            let _ = writeln!(out, "skipped {bad}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::masked;

    #[test]
    fn a_report_masks_what_looks_like_a_key_in_a_body() {
        assert_eq!(
            masked(
                r#"{"error":"Incorrect API key provided: sk-proj-AbC_123. Bearer xyz9 and AIzaSyD-x"}"#
            ),
            r#"{"error":"Incorrect API key provided: sk-…. Bearer … and AIza…"}"#
        );
        assert_eq!(masked("nothing secret"), "nothing secret");
    }
}
