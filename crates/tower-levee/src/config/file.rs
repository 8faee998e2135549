//! A configuration file read whole, with errors that say where.

use std::fmt;
use std::ops::Range;

use serde::de::DeserializeOwned;

/// Why a configuration file was refused, and where: the key (`route[0].targets[1]`,
/// `levee.breaker.threshold`), its line and column, and what is wrong, on
/// one line. Never the value of a key that names a secret's place: the
/// message is the parser's or the validator's, and neither repeats a value
/// it was not given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    key: String,
    at: Option<(usize, usize)>,
    message: String,
}

impl FileError {
    /// An error about `key`, found at byte `span` of `text`.
    pub fn at(
        text: &str,
        span: Option<Range<usize>>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        FileError {
            key: key.into(),
            at: span.and_then(|span| line_column(text, span.start)),
            message: message.into(),
        }
    }

    /// The key at fault (empty when the file as a whole is).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its 1-based line, when known.
    pub fn line(&self) -> Option<usize> {
        self.at.map(|(line, _)| line)
    }

    /// Its 1-based column, when known.
    pub fn column(&self) -> Option<usize> {
        self.at.map(|(_, column)| column)
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.key.as_str(), self.at) {
            ("", Some((line, column))) => {
                write!(f, "line {line}, column {column}: {}", self.message)
            }
            ("", None) => f.write_str(&self.message),
            (key, Some((line, column))) => {
                write!(
                    f,
                    "`{key}` (line {line}, column {column}): {}",
                    self.message
                )
            }
            (key, None) => write!(f, "`{key}`: {}", self.message),
        }
    }
}

impl std::error::Error for FileError {}

/// The 1-based line and column of byte `at` of `text`.
fn line_column(text: &str, at: usize) -> Option<(usize, usize)> {
    let before = text.get(..at)?;
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    Some((line, column))
}

/// Reads a TOML document into `T`, refusing it with the key, line and
/// column of the first thing wrong: a syntax error, an unknown key, a value
/// of the wrong type, or a value a configuration's validation refuses.
///
/// ```
/// use tower_levee::config::{LeveeConfig, from_toml};
///
/// let err = from_toml::<LeveeConfig>("[breaker]\nthreshold = 3\nhalf_open_probes = 0\n").unwrap_err();
/// assert_eq!(err.key(), "breaker.half_open_probes");
/// assert_eq!((err.line(), err.column()), (Some(3), Some(1)));
/// assert_eq!(err.message(), "must be at least 1, got 0");
///
/// let err = from_toml::<LeveeConfig>("[gate]\nmax_wiat = \"5m\"\n").unwrap_err();
/// assert_eq!(err.key(), "gate.max_wiat");
/// assert_eq!(err.line(), Some(2));
/// ```
pub fn from_toml<T: DeserializeOwned>(text: &str) -> Result<T, FileError> {
    let de = toml::de::Deserializer::parse(text)
        .map_err(|e| FileError::at(text, e.span(), "", first_line(e.message())))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = match e.path().to_string() {
            dot if dot == "." => String::new(),
            path => path,
        };
        let inner = e.into_inner();
        let mut message = first_line(inner.message());
        let mut key = key;
        let mut span = unknown_key_span(text, inner.span(), &message).or(inner.span());
        // A section's validation names its own field (`invalid
        // breaker.half_open_probes: …`) where the path stops at the section.
        if let Some((field, rest)) = message
            .strip_prefix("invalid ")
            .and_then(|m| m.split_once(": "))
            .filter(|(field, _)| !field.contains(' '))
        {
            let (head, tail) = field.split_once('.').unwrap_or((field, ""));
            if key == field || key.ends_with(&format!(".{field}")) {
                // The path already names it: say what is wrong once.
                message = rest.to_owned();
            } else if !tail.is_empty() && (key == head || key.ends_with(&format!(".{head}"))) {
                let name = tail.rsplit('.').next().unwrap_or(tail);
                if let Some(found) = key_span(text, inner.span(), name) {
                    span = Some(found);
                }
                key = format!("{key}.{tail}");
                message = rest.to_owned();
            }
        }
        FileError::at(text, span, key, message)
    })
}

/// Where an unknown key is written: toml places the error on the table
/// that holds it, so look for the key itself from there (`name =` at the
/// start of a line, or after a `{` or `,` in an inline table).
fn unknown_key_span(
    text: &str,
    table: Option<Range<usize>>,
    message: &str,
) -> Option<Range<usize>> {
    let (_, rest) = message.split_once("unknown field `")?;
    key_span(text, table, rest.split('`').next()?)
}

/// Where the key `name` is written within the table that starts at `table`.
fn key_span(text: &str, table: Option<Range<usize>>, name: &str) -> Option<Range<usize>> {
    // From the table (toml's span may cover only its `[header]`) to the
    // next header.
    let start = table?.start;
    let body = text.get(start..)?;
    let end = body
        .match_indices("\n[")
        .map(|(i, _)| i)
        .find(|&i| i > 0)
        .unwrap_or(body.len());
    let table = start..start + end;
    let within = &body[..end];
    let mut from = 0;
    while let Some(i) = within[from..].find(name) {
        let at = from + i;
        let before = within[..at].trim_end_matches([' ', '\t']);
        let after = within[at + name.len()..].trim_start_matches([' ', '\t']);
        if after.starts_with('=') && (before.is_empty() || before.ends_with(['\n', '{', ','])) {
            let start = table.start + at;
            return Some(start..start + name.len());
        }
        from = at + name.len();
    }
    None
}

/// toml renders some messages over several lines (a source line, a caret):
/// the first is the message.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or_default().to_owned()
}
