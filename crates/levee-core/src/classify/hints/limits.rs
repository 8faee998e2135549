//! Rate-limit headers: how much of each limit a provider says is left, and
//! when it is whole again. Providers send them on every response, success
//! or not; one reading serves both the wait of a `429` (the reset of the
//! exhausted limit) and pacing before one.
//!
//! The families read (header names are lowercase on the wire in HTTP/2 and
//! as `http` stores them):
//!
//! | family | names | reset |
//! |---|---|---|
//! | OpenAI, Azure OpenAI, Groq, xAI | `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` | Go duration (`6m0s`, `12ms`) or seconds (Azure) |
//! | Cerebras | the same with a window, `-requests-day`, `-tokens-minute` | seconds |
//! | Mistral | `x-ratelimit-{limit,remaining}-{req,tokens}-{minute,month}` | none |
//! | Anthropic | `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}` | RFC 3339 instant |
//! | Together, OpenRouter | `x-ratelimit-{limit,remaining,reset}`, `x-tokenlimit-{limit,remaining}` | seconds, or epoch milliseconds (OpenRouter) |
//!
//! Sources: [OpenAI](https://platform.openai.com/docs/guides/rate-limits),
//! [Azure OpenAI](https://learn.microsoft.com/azure/ai-foundry/openai/how-to/quota),
//! [Anthropic](https://docs.anthropic.com/en/api/rate-limits),
//! [Groq](https://console.groq.com/docs/rate-limits),
//! [OpenRouter](https://openrouter.ai/docs/api-reference/limits).
//!
//! A value that is not a whole number (Azure's `-1` for "unknown", a list,
//! garbage) leaves that field unknown rather than reading as exhausted; a
//! reset in the past or further than [`MAX_RESET`] away is unknown; a
//! remaining above its limit is cut to the limit. Anthropic rounds the
//! tokens it reports left to the nearest thousand: such a window is
//! [`approximate`](RateWindow::approximate). Reading allocates nothing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;

use super::parse::{delay_seconds, go_duration, rfc3339};
use super::{LazyTime, until};
use crate::classify::dialect::Dialect;
use crate::classify::headers;

/// Resets further away than this are not believed (a month and a day).
pub const MAX_RESET: Duration = Duration::from_secs(31 * 24 * 3600);

/// The most windows one response is read for.
pub(crate) const MAX_WINDOWS: usize = 8;

/// What a limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Dimension {
    /// Requests.
    Requests,
    /// Tokens, input and output together (or the most restrictive token
    /// limit in force: Anthropic's `tokens` headers).
    Tokens,
    /// Input (prompt) tokens.
    InputTokens,
    /// Output (generated) tokens.
    OutputTokens,
}

impl Dimension {
    /// The name used in metrics and snapshots.
    pub const fn as_str(self) -> &'static str {
        match self {
            Dimension::Requests => "requests",
            Dimension::Tokens => "tokens",
            Dimension::InputTokens => "input_tokens",
            Dimension::OutputTokens => "output_tokens",
        }
    }
}

/// The period a limit is counted over, when its header names one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Period {
    /// Not named (OpenAI's and Anthropic's headers; usually a minute).
    Unnamed,
    /// `-minute`.
    Minute,
    /// `-hour`.
    Hour,
    /// `-day`.
    Day,
    /// `-month`.
    Month,
}

crate::named!(Dimension);
crate::named!(Period);

impl Period {
    /// The name used in metrics and snapshots (`""` when not named).
    pub const fn as_str(self) -> &'static str {
        match self {
            Period::Unnamed => "",
            Period::Minute => "minute",
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Month => "month",
        }
    }
}

/// One limit as a response reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateWindow {
    /// What it counts.
    pub dimension: Dimension,
    /// Over what period, if the header says.
    pub period: Period,
    /// The limit, if reported.
    pub limit: Option<u64>,
    /// What is left, if reported (never above the limit).
    pub remaining: Option<u64>,
    /// How long until the limit is whole again, from the response.
    pub reset: Option<Duration>,
    /// `remaining` is rounded (Anthropic's tokens: to the nearest thousand).
    pub approximate: bool,
    /// The window the limit counts, where the provider documents it: the
    /// period a header names; a minute for OpenAI's and Anthropic's unnamed
    /// limits (Groq's unnamed request limit is per day: its reset, longer
    /// than a minute, says so, and [`Spacing`](crate::pace::Spacing) leaves
    /// it); ten seconds for Azure OpenAI's requests
    /// (a response marked `apim-request-id`, `x-ms-*` or `azureml-*`),
    /// whose limit is a sixth of the deployment's RPM.
    pub span: Option<Duration>,
}

impl RateWindow {
    fn new(dimension: Dimension, period: Period) -> Self {
        RateWindow {
            dimension,
            period,
            limit: None,
            remaining: None,
            reset: None,
            approximate: false,
            span: None,
        }
    }

    /// Whether nothing is left.
    pub fn is_exhausted(&self) -> bool {
        self.remaining == Some(0)
    }
}

/// Every limit one response reports; empty for a provider that sends none
/// (Gemini, Vertex, Bedrock, DeepSeek).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimits {
    windows: [Option<RateWindow>; MAX_WINDOWS],
    /// Which family of headers each window came from: two families in one
    /// response (a proxy's and the provider's) stay apart.
    families: [Family; MAX_WINDOWS],
}

impl RateLimits {
    /// Reads `headers`; a reset given as an instant is measured from
    /// `reference` (the response's `Date`, see
    /// [`reference_time`](super::reference_time)).
    pub fn read(headers: &HeaderMap, reference: SystemTime) -> Self {
        Self::read_lazy(headers, &|| reference)
    }

    /// Whether `headers` has any rate-limit header this reads: a test of
    /// the names' prefixes, cheaper than building a reading.
    pub fn present(headers: &HeaderMap) -> bool {
        headers.keys().any(|name| {
            let n = name.as_str().as_bytes();
            n.starts_with(b"x-ratelimit-")
                || n.starts_with(b"anthropic-ratelimit-")
                || n.starts_with(b"x-tokenlimit-")
        })
    }

    /// [`read`](Self::read) with the reference computed only if a reset
    /// given as an instant needs it (most responses have none).
    pub fn read_lazy(headers: &HeaderMap, reference: &dyn Fn() -> SystemTime) -> Self {
        let mut limits = RateLimits::default();
        let mut azure = false;
        for (name, value) in headers {
            let Some((key, field)) = header_key(name.as_str()) else {
                azure |= headers::marker(name.as_str()) == Some(Dialect::Azure);
                continue;
            };
            let Ok(value) = value.to_str() else {
                continue;
            };
            let Some(window) = limits.slot(key) else {
                continue;
            };
            match field {
                Field::Limit => window.limit = count(value),
                Field::Remaining => window.remaining = count(value),
                Field::Reset => window.reset = reset(value, reference),
            }
            window.approximate =
                matches!(key.family, Family::Anthropic) && window.dimension != Dimension::Requests;
        }
        for (w, family) in limits.windows.iter_mut().zip(limits.families) {
            let Some(w) = w else { break };
            if let (Some(limit), Some(remaining)) = (w.limit, w.remaining) {
                w.remaining = Some(remaining.min(limit));
            }
            w.span = span(family, w.dimension, w.period, azure);
        }
        limits
    }

    /// The windows read, in the order their headers came.
    pub fn iter(&self) -> impl Iterator<Item = &RateWindow> {
        self.windows.iter().flatten()
    }

    /// Whether the response reported no limit.
    pub fn is_empty(&self) -> bool {
        self.windows[0].is_none()
    }

    /// The wait before every exhausted limit is whole again: the latest
    /// reset among windows with nothing left (a window with room says
    /// nothing about this refusal).
    pub fn exhausted_reset(&self) -> Option<Duration> {
        self.iter()
            .filter(|w| w.is_exhausted())
            .filter_map(|w| w.reset)
            .max()
    }

    fn slot(&mut self, key: Key) -> Option<&mut RateWindow> {
        let at = self.windows.iter().zip(&self.families).position(|(w, f)| {
            w.is_none_or(|w| {
                *f == key.family && w.dimension == key.dimension && w.period == key.period
            })
        })?;
        self.families[at] = key.family;
        Some(self.windows[at].get_or_insert(RateWindow::new(key.dimension, key.period)))
    }
}

/// The window a limit counts, where its provider documents it.
fn span(family: Family, dimension: Dimension, period: Period, azure: bool) -> Option<Duration> {
    const MINUTE: Duration = Duration::from_secs(60);
    match (family, period) {
        (Family::Bare, _) => None,
        (_, Period::Minute) => Some(MINUTE),
        (_, Period::Hour) => Some(MINUTE * 60),
        (_, Period::Day) => Some(MINUTE * 60 * 24),
        // Months differ; not a window to spread over.
        (_, Period::Month) => None,
        (Family::RateLimit, Period::Unnamed) if azure && dimension == Dimension::Requests => {
            Some(Duration::from_secs(10))
        }
        (_, Period::Unnamed) => Some(MINUTE),
    }
}

/// A whole number, or unknown (negative, fractional, a list, garbage).
fn count(value: &str) -> Option<u64> {
    let v = value.trim_ascii();
    (!v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()))
        .then(|| v.parse().ok())
        .flatten()
}

/// A reset: an RFC 3339 instant, a Go duration, or a number: seconds, or an
/// epoch in seconds or milliseconds when it is that large (no relative
/// reset is years long).
fn reset(value: &str, reference: LazyTime<'_>) -> Option<Duration> {
    let v = value.trim_ascii();
    let wait = if let Some(at) = rfc3339(v) {
        until(at, reference())
    } else if let Some(d) = go_duration(v) {
        Some(d)
    } else {
        let secs = delay_seconds(v)?;
        let epoch = |d: Duration| until(UNIX_EPOCH + d, reference());
        match secs.as_secs() {
            // The number was milliseconds.
            ms @ 1_000_000_000_000.. => epoch(Duration::from_millis(ms)),
            1_000_000_000.. => epoch(secs),
            _ => Some(secs),
        }
    };
    wait.filter(|w| !w.is_zero() && *w <= MAX_RESET)
}

// === header names ===

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Family {
    #[default]
    /// `x-ratelimit-<field>-<dimension>[-<period>]`.
    RateLimit,
    /// `x-ratelimit-<field>`, `x-tokenlimit-<field>` (no dimension named).
    Bare,
    /// `anthropic-ratelimit-*`.
    Anthropic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Limit,
    Remaining,
    Reset,
}

#[derive(Clone, Copy, Debug)]
struct Key {
    family: Family,
    dimension: Dimension,
    period: Period,
}

/// The window and field a header name reports, if it is a rate-limit
/// header this reads.
fn header_key(name: &str) -> Option<(Key, Field)> {
    if let Some(rest) = name.strip_prefix("anthropic-ratelimit-") {
        // `<dimension>-<field>`; the dimension has dashes of its own.
        let (dimension, field) = rest.rsplit_once('-')?;
        let dimension = match dimension {
            "requests" => Dimension::Requests,
            "tokens" => Dimension::Tokens,
            "input-tokens" => Dimension::InputTokens,
            "output-tokens" => Dimension::OutputTokens,
            _ => return None,
        };
        let key = Key {
            family: Family::Anthropic,
            dimension,
            period: Period::Unnamed,
        };
        return Some((key, field_of(field)?));
    }
    let (rest, default_dimension) = if let Some(rest) = name.strip_prefix("x-ratelimit-") {
        (rest, Dimension::Requests)
    } else {
        (name.strip_prefix("x-tokenlimit-")?, Dimension::Tokens)
    };
    // `<field>[-<dimension>[-<period>]]`.
    let mut parts = rest.splitn(3, '-');
    let field = field_of(parts.next()?)?;
    let mut family = Family::RateLimit;
    let dimension = match parts.next() {
        None => {
            family = Family::Bare;
            default_dimension
        }
        Some("requests" | "req") => Dimension::Requests,
        Some("tokens") => Dimension::Tokens,
        // OpenAI's `-project-tokens` (a project's own cap, beside the
        // organisation's), `-tokens_usage_based` and anything unknown.
        Some(_) => return None,
    };
    let period = match parts.next() {
        None => Period::Unnamed,
        Some("minute") => Period::Minute,
        Some("hour") => Period::Hour,
        Some("day") => Period::Day,
        Some("month") => Period::Month,
        // `tokens_usage_based` and anything else unknown.
        Some(_) => return None,
    };
    Some((
        Key {
            family,
            dimension,
            period,
        },
        field,
    ))
}

fn field_of(s: &str) -> Option<Field> {
    match s {
        "limit" => Some(Field::Limit),
        "remaining" => Some(Field::Remaining),
        "reset" => Some(Field::Reset),
        _ => None,
    }
}
