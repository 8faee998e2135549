//! Pacing: stop sending to a quota scope just before the provider would
//! answer `429`, using what its rate-limit headers say is left.
//!
//! A `429` costs a round trip, and OpenAI and Azure count a refused request
//! against the limit ("unsuccessful requests contribute to your per-minute
//! limit", [OpenAI](https://platform.openai.com/docs/guides/rate-limits)).
//! Yet every response, successful or not, already says how much of each
//! limit is left and when it is whole again
//! ([`RateLimits`]). An [`Allowance`]
//! keeps that per quota scope, counts down the requests (and estimated
//! tokens) sent since the provider last spoke, and says when the scope
//! should pause: when what is left of a limit reaches the [reserve](PaceConfig),
//! until enough of it has refilled. The layer closes the scope's throttle
//! gate for that long, with the reason `paced`: the same refusal as a
//! provider's 429, and never a breaker count.
//!
//! **Refill.** Providers replenish continuously (Anthropic documents a token
//! bucket; OpenAI's reset is "the time until the rate limit resets to its
//! initial state"), so a limit observed with `remaining` left and reset `r`
//! away regains `limit − remaining` over `r`, linearly. A pause lasts until
//! one unit above the reserve is back, not until the whole limit is: with
//! 60 RPM and nothing left that is about one second, not a minute. A limit
//! whose size is not reported pauses until its reset; one with no reset
//! (Mistral's) is never paced on: its 429 will say.
//!
//! **What the count misses.** A report is the provider's count when the
//! call it answers was admitted; by the time it arrives a latency later,
//! the calls sent since are not in it. A layer counts its calls in flight
//! to a provider that reports limits, subtracts them from each report
//! ([`Allowance::debit`]), and keeps room for as many again before the
//! next report ([`Allowance::paced_until_with`]).
//!
//! **Spreading.** A per-minute limit is not always counted per minute:
//! OpenAI's "may be quantized, meaning they are enforced over shorter
//! periods of time (e.g. 60,000 RPM may be enforced as 1,000 requests per
//! second)"; Azure OpenAI evaluates requests "over a small period of time,
//! typically 1 or 10 seconds"
//! ([Azure](https://learn.microsoft.com/azure/ai-foundry/openai/how-to/quota)),
//! and its `remaining-requests` header counts a 10-second window. A burst
//! that the reported count allows is then refused all the same. So a layer
//! also sends a scope's requests no faster than the rate the provider says
//! it refills at, in bursts of at most one second of it ([`Spacing`],
//! [`SPREAD_BURST`]): what a one-second quantum accepts, and so a
//! ten-second one too.
//!
//! **Headers are the provider's count, fleet-wide.** Every replica that
//! reads them paces on the same numbers, with no coordination. Between two
//! responses the count here only goes down (requests sent, tokens
//! estimated) and refills with time; a response replaces it unless it was
//! counted earlier than what is known (see [`Allowance::observe`]).
//!
//! **A limit stated in a 429.** Gemini's API sends no rate-limit headers,
//! but its 429 names the per-minute request quota it hit, with its value
//! ([`Classification::stated_limit`](crate::classify::Classification::stated_limit)):
//! a layer spreads at that rate as at a reported one.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use http::HeaderMap;
//! use levee_core::classify::hints::RateLimits;
//! use levee_core::clock::Timestamp;
//! use levee_core::pace::{Allowance, PaceConfig};
//!
//! let mut headers = HeaderMap::new();
//! headers.insert("x-ratelimit-limit-requests", "60".parse().unwrap());
//! headers.insert("x-ratelimit-remaining-requests", "2".parse().unwrap());
//! headers.insert("x-ratelimit-reset-requests", "59s".parse().unwrap());
//! let cfg = PaceConfig::default(); // a reserve of 2% of each limit, at least 1
//! let mut allowance = Allowance::default();
//! let now = Timestamp::ZERO;
//! allowance.observe(now, &RateLimits::read(&headers, SystemTime::now()));
//! assert_eq!(allowance.paced_until(&cfg, now), None); // 2 left, reserve 1
//! allowance.debit(now, 1, 0);
//! let (until, _) = allowance.paced_until(&cfg, now).expect("at the reserve");
//! // 59 of 60 missing, refilled over 59 s: a second gives one back.
//! assert_eq!(until.saturating_duration_since(now), Duration::from_secs(1));
//! ```

use std::time::Duration;

use crate::classify::hints::{Dimension, MAX_WINDOWS, Period, RateLimits, RateWindow};
use crate::clock::{Timestamp, duration_nanos};
use crate::config_error::ConfigError;

/// How much of a limit to leave unused. In a configuration file: a number
/// (`requests_reserve = 5`) or a percentage (`tokens_reserve = "2%"`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Reserve {
    /// A fixed number of requests or tokens.
    Count(u64),
    /// A share of the limit, in `[0, 1)`, rounded down; at least one unit
    /// when the limit is not zero.
    Share(f64),
}

impl Reserve {
    /// The units held back of a limit of `limit` (unknown: of nothing).
    pub fn of(self, limit: Option<u64>) -> u64 {
        match self {
            Reserve::Count(n) => n,
            Reserve::Share(share) => limit.map_or(0, |l| {
                let r = (l as f64 * share) as u64;
                r.max(u64::from(l > 0))
            }),
        }
    }

    fn validate(self, field: &'static str) -> Result<(), ConfigError> {
        match self {
            Reserve::Share(s) if !(s.is_finite() && (0.0..1.0).contains(&s)) => Err(
                ConfigError::new(field, format!("must be a share in [0, 1), got {s}")),
            ),
            _ => Ok(()),
        }
    }
}

/// When to pause a quota scope.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct PaceConfig {
    /// Whether to pace at all (default: yes). Off, a layer reads no
    /// rate-limit header on a success and reacts to 429s only.
    pub enabled: bool,
    /// Requests left unused of each request limit. Default: 2% of the
    /// limit, at least one: room for the requests already on their way
    /// when the count was read, and for other replicas sending meanwhile.
    pub requests_reserve: Reserve,
    /// Tokens left unused of each token limit. Default: 2% of the limit.
    pub tokens_reserve: Reserve,
    /// The longest pause pacing imposes (default 60 s); a limit that needs
    /// longer to refill is left to the provider's 429 and the gate.
    pub max_pause: Duration,
    /// Whether to spread requests at the rate the provider refills, in
    /// bursts of at most [`SPREAD_BURST`] of it (default: yes; see
    /// [`Spacing`]). Off, a burst is sent as long as the reported count
    /// allows it, and a provider that counts a shorter window than it
    /// reports answers `429`.
    pub spread: bool,
}

impl Default for PaceConfig {
    fn default() -> Self {
        PaceConfig {
            enabled: true,
            requests_reserve: Reserve::Share(0.02),
            tokens_reserve: Reserve::Share(0.02),
            max_pause: Duration::from_secs(60),
            spread: true,
        }
    }
}

impl PaceConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> PaceConfigBuilder {
        PaceConfigBuilder {
            config: PaceConfig::default(),
        }
    }

    /// Checks every field; the error names the first invalid one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.requests_reserve.validate("pace.requests_reserve")?;
        self.tokens_reserve.validate("pace.tokens_reserve")?;
        if self.max_pause.is_zero() {
            return Err(ConfigError::new(
                "pace.max_pause",
                "must be greater than zero, got 0s",
            ));
        }
        Ok(())
    }

    fn reserve(&self, w: &Tracked) -> u64 {
        match w.dimension {
            Dimension::Requests => self.requests_reserve.of(w.limit),
            _ => self.tokens_reserve.of(w.limit),
        }
    }

    #[doc(hidden)]
    /// The cheap test a layer makes on every response, without a lock:
    /// `None` when pacing is off. See [`PaceCheck`].
    pub fn check(&self) -> Option<PaceCheck> {
        if !self.enabled {
            return None;
        }
        let (mut share, mut count) = (PaceCheck::RECORD_SHARE, 1u64);
        for r in [self.requests_reserve, self.tokens_reserve] {
            match r {
                Reserve::Count(n) => count = count.max(n),
                Reserve::Share(s) => share = share.max(s),
            }
        }
        Some(PaceCheck {
            permille: (share * 1000.0).ceil().clamp(0.0, 1000.0) as u16,
            count: u32::try_from(count).unwrap_or(u32::MAX),
            spread: self.spread,
            share: 1,
        })
    }
}

/// Builds a validated [`PaceConfig`].
#[derive(Clone, Debug)]
pub struct PaceConfigBuilder {
    config: PaceConfig,
}

impl PaceConfigBuilder {
    /// Whether to pace at all.
    pub fn enabled(mut self, on: bool) -> Self {
        self.config.enabled = on;
        self
    }

    /// Requests left unused of each request limit.
    pub fn requests_reserve(mut self, reserve: Reserve) -> Self {
        self.config.requests_reserve = reserve;
        self
    }

    /// Tokens left unused of each token limit.
    pub fn tokens_reserve(mut self, reserve: Reserve) -> Self {
        self.config.tokens_reserve = reserve;
        self
    }

    /// The longest pause pacing imposes.
    pub fn max_pause(mut self, max: Duration) -> Self {
        self.config.max_pause = max;
        self
    }

    /// Whether to spread requests at the rate the provider refills.
    pub fn spread(mut self, on: bool) -> Self {
        self.config.spread = on;
        self
    }

    /// Validates and returns the config.
    pub fn build(self) -> Result<PaceConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}

#[doc(hidden)]
/// Whether a response's limits deserve a closer look: some limit is at or
/// under a bound no reserve exceeds, or has used half of itself, so that
/// its scope's allowance is worth recording (and shown in a layer's
/// health). The exact decision is [`GateState::pace`](crate::gate::GateState::pace),
/// under the scope's lock; most responses of a healthy scope pass this
/// test and take no lock. Eight bytes, kept by every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaceCheck {
    permille: u16,
    count: u32,
    spread: bool,
    /// The replicas sharing the provider's limits (1: this one alone).
    share: u16,
}

impl PaceCheck {
    /// The share of a limit in use from which its allowance is recorded.
    pub const RECORD_SHARE: f64 = 0.5;

    /// The most replicas a share divides among: what the packed word holds.
    pub const MAX_SHARE: u32 = (1 << 14) - 1;

    /// The check in one word, never 0 (for an atomic that says "none" with 0).
    pub fn to_bits(self) -> u64 {
        u64::from(self.share) << 50
            | u64::from(self.spread) << 49
            | 1 << 48
            | u64::from(self.permille) << 32
            | u64::from(self.count)
    }

    /// The check [`to_bits`](Self::to_bits) packed; `None` for 0.
    pub fn from_bits(bits: u64) -> Option<Self> {
        (bits != 0).then_some(PaceCheck {
            permille: (bits >> 32) as u16,
            count: bits as u32,
            spread: bits >> 49 & 1 != 0,
            share: ((bits >> 50) as u16).max(1),
        })
    }

    /// This check for one of `replicas` replicas of a service that share
    /// the provider's limits (a fleet): each spreads its requests at its
    /// share of the provider's rate, and keeps room before a report for
    /// the fleet's calls in flight, counted as `replicas` times its own.
    /// At least 1, at most [`MAX_SHARE`](Self::MAX_SHARE).
    pub fn with_share(mut self, replicas: u32) -> Self {
        self.share = replicas.clamp(1, Self::MAX_SHARE) as u16;
        self
    }

    /// The replicas sharing the provider's limits: see
    /// [`with_share`](Self::with_share).
    pub fn share(&self) -> u64 {
        u64::from(self.share)
    }

    /// Whether requests are spread ([`PaceConfig::spread`]).
    pub fn spreads(&self) -> bool {
        self.spread
    }

    /// Whether any limit in `limits` is near its reserve, or half used,
    /// counting what is `in_flight` that the provider had not counted yet.
    pub fn near(&self, limits: &RateLimits, in_flight: InFlight) -> bool {
        limits.iter().any(|w| {
            let Some(remaining) = w.remaining else {
                return false;
            };
            let remaining = remaining.saturating_sub(in_flight.of(w.dimension));
            remaining <= u64::from(self.count)
                || w.limit.is_some_and(|l| {
                    u128::from(remaining) * 1000 <= u128::from(l) * u128::from(self.permille)
                })
        })
    }
}

/// The longest burst [`Spacing`] lets through at once: one second of the
/// provider's rate, the shortest window a provider is documented to count.
pub const SPREAD_BURST: Duration = Duration::from_secs(1);

/// How far apart to send a scope's requests: the rate at which the
/// provider says its tightest short request limit refills, spent evenly
/// with bursts of at most [`SPREAD_BURST`] (the generic cell rate
/// algorithm of ITU-T I.371, a token bucket kept as one timestamp).
///
/// The rate is the limit over the window it counts
/// ([`span`](crate::classify::hints::RateWindow::span)): a minute's limit
/// spent a sixtieth a second, Azure's ten-second one a tenth. Only limits
/// counted over a minute or less are spread (a daily limit is not enforced
/// per second), and not one whose reset is further away than its window.
/// Spreading is per process: N replicas together send N times the rate
/// (the count in the headers is fleet-wide; the spread is not), unless
/// they know they are N ([`PaceCheck::with_share`], which a fleet sets)
/// and each spreads at its share ([`times`](Self::times)).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use http::HeaderMap;
/// use levee_core::classify::hints::RateLimits;
/// use levee_core::clock::Timestamp;
/// use levee_core::pace::Spacing;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-ratelimit-limit-requests", "600".parse().unwrap());
/// headers.insert("x-ratelimit-remaining-requests", "590".parse().unwrap());
/// headers.insert("x-ratelimit-reset-requests", "1s".parse().unwrap());
/// let spacing = Spacing::of(&RateLimits::read(&headers, SystemTime::now())).unwrap();
/// assert_eq!(spacing.interval(), Duration::from_millis(100)); // 600 a minute
///
/// // A second's worth at once, then one every 100 ms.
/// let now = Timestamp::ZERO;
/// let mut next = now;
/// for _ in 0..10 {
///     next = spacing.admit(next, now).expect("within the burst");
/// }
/// let again = spacing.admit(next, now).unwrap_err();
/// assert_eq!(again.saturating_duration_since(now), Duration::from_millis(100));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spacing {
    interval: u64,
}

impl Spacing {
    /// The spacing `limits` call for, if any limit says its rate.
    pub fn of(limits: &RateLimits) -> Option<Spacing> {
        const SHORT: Duration = Duration::from_secs(60);
        limits
            .iter()
            .filter(|w| w.dimension == Dimension::Requests)
            .filter_map(|w| {
                let span = w.span.filter(|s| *s <= SHORT)?;
                // A reset beyond the window says the header counts a longer
                // one (Groq's unnamed requests are per day).
                if w.reset.is_some_and(|r| r > span) {
                    return None;
                }
                Spacing::per(w.limit?, span)
            })
            .max_by_key(|s| s.interval)
    }

    /// The spacing of `requests` per `window` (`None` for no requests or
    /// a window too short to space them).
    pub fn per(requests: u64, window: Duration) -> Option<Spacing> {
        Some(duration_nanos(window) / requests.max(1))
            .filter(|&interval| interval > 0 && requests > 0)
            .map(|interval| Spacing { interval })
    }

    /// The spacing for one of `replicas` replicas sending to the same
    /// limits: each at its share of the rate.
    pub fn times(self, replicas: u64) -> Spacing {
        Spacing {
            interval: self.interval.saturating_mul(replicas.max(1)),
        }
    }

    /// A spacing of `interval` between requests (`None` for zero).
    pub fn from_interval(interval: Duration) -> Option<Spacing> {
        Some(duration_nanos(interval))
            .filter(|&n| n > 0)
            .map(|interval| Spacing { interval })
    }

    /// The time between two requests at the provider's rate.
    pub fn interval(self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// Admits a request at `now` when the next one was due at `next`: the
    /// next due instant after it, or, refused, when one is admitted again.
    pub fn admit(self, next: Timestamp, now: Timestamp) -> Result<Timestamp, Timestamp> {
        let next = next.max(now).as_nanos();
        let tolerance = duration_nanos(SPREAD_BURST).saturating_sub(self.interval);
        if next - now.as_nanos() > tolerance {
            return Err(Timestamp::from_nanos(next - tolerance));
        }
        Ok(Timestamp::from_nanos(next.saturating_add(self.interval)))
    }
}

/// Calls sent that a provider's latest report did not count yet, and the
/// tokens they were estimated to use ([`estimate_tokens`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InFlight {
    /// Requests.
    pub requests: u64,
    /// Their estimated tokens.
    pub tokens: u64,
}

impl InFlight {
    /// `requests` calls in flight, estimated to use `tokens` tokens.
    pub const fn new(requests: u64, tokens: u64) -> Self {
        InFlight { requests, tokens }
    }

    fn of(self, dimension: Dimension) -> u64 {
        match dimension {
            Dimension::Requests => self.requests,
            _ => self.tokens,
        }
    }

    /// Both counts times `n`.
    pub fn times(self, n: u64) -> Self {
        InFlight {
            requests: self.requests.saturating_mul(n),
            tokens: self.tokens.saturating_mul(n),
        }
    }
}

/// One limit as last reported, counted down since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tracked {
    dimension: Dimension,
    period: Period,
    limit: Option<u64>,
    /// Left when observed, less what was sent since.
    remaining: u64,
    observed: Timestamp,
    reset_at: Option<Timestamp>,
}

impl Tracked {
    /// What is left at `now`: the count, plus what refilled since it was
    /// read (linearly up to the limit by the reset).
    fn available(&self, now: Timestamp) -> u64 {
        let (Some(limit), Some(reset_at)) = (self.limit, self.reset_at) else {
            return self.remaining;
        };
        if now >= reset_at {
            return limit;
        }
        let span = duration_nanos(reset_at.saturating_duration_since(self.observed));
        let gone = duration_nanos(now.saturating_duration_since(self.observed));
        let missing = limit.saturating_sub(self.remaining);
        let refilled = (u128::from(missing) * u128::from(gone) / u128::from(span.max(1))) as u64;
        self.remaining.saturating_add(refilled).min(limit)
    }

    /// When `needed` units are left again, if the reset says.
    fn back_at(&self, needed: u64) -> Option<Timestamp> {
        let reset_at = self.reset_at?;
        let Some(limit) = self.limit.filter(|&l| l > self.remaining) else {
            return Some(reset_at);
        };
        if needed >= limit {
            return Some(reset_at);
        }
        let span = u128::from(duration_nanos(
            reset_at.saturating_duration_since(self.observed),
        ));
        let short = u128::from(needed.saturating_sub(self.remaining));
        let missing = u128::from(limit - self.remaining);
        // Rounded up: never reopen a nanosecond early.
        let nanos = (short * span).div_ceil(missing);
        Some(Timestamp::from_nanos(
            self.observed
                .as_nanos()
                .saturating_add(u64::try_from(nanos).unwrap_or(u64::MAX)),
        ))
    }
}

/// What a quota scope has left of each limit its provider reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allowance {
    windows: [Option<Tracked>; MAX_WINDOWS],
}

impl Allowance {
    /// Takes in what a response reported at `now` (when its headers came).
    /// A report for the same limit and reset as the one known replaces it
    /// only with a lower count (it may have overtaken a later one); a later
    /// reset is a newer window and replaces it.
    pub fn observe(&mut self, now: Timestamp, limits: &RateLimits) {
        for w in limits.iter() {
            let Some(remaining) = w.remaining else {
                continue;
            };
            let fresh = Tracked {
                dimension: w.dimension,
                period: w.period,
                limit: w.limit,
                remaining,
                observed: now,
                reset_at: w.reset.map(|r| now.saturating_add(r)),
            };
            if let Some(slot) = self.slot(w) {
                *slot = Some(match slot {
                    Some(known) => merge(known, fresh),
                    None => fresh,
                });
            }
        }
    }

    /// Counts a request sent at `now`, estimated to use `tokens`, against
    /// every limit (token limits by the estimate). Limits whose reset has
    /// passed are whole again first.
    pub fn debit(&mut self, now: Timestamp, requests: u64, tokens: u64) {
        for t in self.windows.iter_mut().flatten() {
            let cost = match t.dimension {
                Dimension::Requests => requests,
                _ => tokens,
            };
            if cost == 0 {
                continue;
            }
            let left = t.available(now);
            *t = Tracked {
                remaining: left.saturating_sub(cost),
                observed: now,
                // The refill continues towards the same reset.
                ..*t
            };
        }
    }

    /// Until when the scope should pause at `now`, and for which limit: the
    /// latest instant any limit at or under its reserve has one unit above
    /// the reserve back, within [`max_pause`](PaceConfig::max_pause).
    pub fn paced_until(&self, cfg: &PaceConfig, now: Timestamp) -> Option<(Timestamp, Dimension)> {
        self.paced_until_with(cfg, now, InFlight::default())
    }

    /// [`paced_until`](Self::paced_until) keeping `headroom` more than the
    /// reserve: room for what will be sent before the provider's next
    /// report arrives.
    pub fn paced_until_with(
        &self,
        cfg: &PaceConfig,
        now: Timestamp,
        headroom: InFlight,
    ) -> Option<(Timestamp, Dimension)> {
        self.windows
            .iter()
            .flatten()
            .filter_map(|t| {
                let reserve = cfg.reserve(t).saturating_add(headroom.of(t.dimension));
                if t.available(now) > reserve {
                    return None;
                }
                let at = t.back_at(reserve.saturating_add(1))?;
                (at > now && at.saturating_duration_since(now) <= cfg.max_pause)
                    .then_some((at, t.dimension))
            })
            .max_by_key(|(at, _)| *at)
    }

    /// Each limit's count at `now`, for snapshots: dimension, period, what
    /// is left (with what refilled), the limit, and when it is whole.
    pub fn remaining(
        &self,
        now: Timestamp,
    ) -> impl Iterator<Item = (Dimension, Period, u64, Option<u64>, Option<Timestamp>)> + '_ {
        self.windows
            .iter()
            .flatten()
            .map(move |t| (t.dimension, t.period, t.available(now), t.limit, t.reset_at))
    }

    /// Whether nothing is known (no report yet).
    pub fn is_empty(&self) -> bool {
        self.windows[0].is_none()
    }

    fn slot(&mut self, w: &RateWindow) -> Option<&mut Option<Tracked>> {
        let at = self
            .windows
            .iter()
            .position(|t| t.is_none_or(|t| t.dimension == w.dimension && t.period == w.period))?;
        Some(&mut self.windows[at])
    }
}

/// What is known of a limit after a new report of it. A limit refills
/// towards its reset, and whatever a request uses pushes the reset later:
/// a report with an earlier reset than the one known was counted before it
/// (responses overtake each other) and is dropped; one with the same reset
/// counts the same window, and the lower count wins (requests sent since
/// the provider counted are in the known one); a later reset is newer.
fn merge(known: &Tracked, fresh: Tracked) -> Tracked {
    const SAME: Duration = Duration::from_secs(1);
    let (Some(k), Some(f)) = (known.reset_at, fresh.reset_at) else {
        return fresh;
    };
    if f.saturating_add(SAME) < k {
        *known
    } else if k.saturating_add(SAME) < f || known.limit != fresh.limit {
        fresh
    } else {
        Tracked {
            remaining: fresh.remaining.min(known.available(fresh.observed)),
            ..fresh
        }
    }
}

/// What a request will count against a token limit, estimated from its JSON
/// body before it is sent: its prompt at about four bytes a token
/// (OpenAI's rule of thumb for English), plus the most output it allows
/// (`max_tokens`, `max_completion_tokens` or `max_output_tokens`, whichever
/// is largest). That is what the providers reserve at admission: OpenAI
/// and Azure count "the maximum of max_tokens and the estimated number of
/// tokens based on the character count"
/// ([OpenAI](https://platform.openai.com/docs/guides/rate-limits)),
/// Anthropic counts `max_tokens` against its output limit until the
/// response ends. A body that names no output cap estimates its prompt
/// only. Reads the bytes once; allocates nothing.
pub fn estimate_tokens(body: &[u8]) -> u64 {
    let prompt = (body.len() as u64).div_ceil(4);
    let output = [
        &b"\"max_tokens\""[..],
        b"\"max_completion_tokens\"",
        b"\"max_output_tokens\"",
    ]
    .iter()
    .filter_map(|key| number_after(body, key))
    .max()
    .unwrap_or(0);
    prompt.saturating_add(output)
}

/// The whole number that follows `"key":` in `body`, if any.
fn number_after(body: &[u8], key: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(body, key)? + key.len();
    let rest = &body[at..];
    let rest = &rest[rest.iter().take_while(|c| c.is_ascii_whitespace()).count()..];
    let rest = rest.strip_prefix(b":")?;
    let rest = &rest[rest.iter().take_while(|c| c.is_ascii_whitespace()).count()..];
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits.min(19)])
        .ok()?
        .parse()
        .ok()
}
