//! The access log: one line per request at `info`, under the target
//! `levee_gateway::access`, written straight to standard error.
//!
//! It goes past the `tracing` subscriber on purpose. The line is on every
//! request's path, and the subscriber escapes a message one character at a
//! time and formats each field through `core::fmt`: measured under
//! callgrind, that was 14,000 instructions a request, more than the rest of
//! the gateway's own work. So the subscriber's filter still decides
//! (`LEVEE_LOG=info,levee_gateway::access=off` turns it off), and the line,
//! in the subscriber's own layout, is built here by hand and written with
//! one call. No value it holds can contain a space or a line break: the
//! request id is checked, the path is a URI's, the names are the
//! configuration's, the rest are numbers and fixed words.

use std::io::Write;
use std::time::SystemTime;

/// The target the access log's lines are filed under.
pub(crate) const TARGET: &str = "levee_gateway::access";

/// Whether the subscriber's filter lets access lines through.
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: "levee_gateway::access", tracing::Level::INFO)
}

/// One access line, built field by field.
pub(crate) struct Line {
    text: String,
}

impl Line {
    /// A line stamped now.
    pub(crate) fn new() -> Self {
        let mut text = String::with_capacity(256);
        rfc3339(&mut text, SystemTime::now());
        text.push_str("  INFO ");
        text.push_str(TARGET);
        text.push(':');
        Line { text }
    }

    /// Adds `key=value`.
    pub(crate) fn pair(&mut self, key: &str, value: &str) -> &mut Self {
        self.text.push(' ');
        self.text.push_str(key);
        self.text.push('=');
        self.text.push_str(value);
        self
    }

    /// Adds `key=n`.
    pub(crate) fn number(&mut self, key: &str, n: u64) -> &mut Self {
        self.pair(key, itoa::Buffer::new().format(n))
    }

    /// Writes the line to standard error, in one call.
    pub(crate) fn write(mut self) {
        self.text.push('\n');
        // A log line that cannot be written is not worth failing a request.
        let _ = std::io::stderr().lock().write_all(self.text.as_bytes());
    }
}

/// `at` as RFC 3339 in UTC with microseconds: `2026-12-06T17:42:01.123456Z`.
fn rfc3339(out: &mut String, at: SystemTime) {
    use std::fmt::Write;
    // humantime formats into a fixed buffer: one `write_str`, no allocation.
    let _ = write!(out, "{}", humantime::format_rfc3339_micros(at));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        let cases = [
            (0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, "2000-02-29T00:00:00.000000Z"),
            (1_796_578_921, "2026-12-06T17:42:01.000000Z"),
            (4_107_542_399, "2100-02-28T23:59:59.000000Z"),
        ];
        for (secs, want) in cases {
            let mut out = String::new();
            rfc3339(&mut out, SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(out, want);
        }
        let mut out = String::new();
        rfc3339(
            &mut out,
            SystemTime::UNIX_EPOCH + Duration::from_micros(1_500_001),
        );
        assert_eq!(out, "1970-01-01T00:00:01.500001Z");
    }
}
