//! [`ProviderClassifier`]: the default [`Classify`] implementation.

use std::cell::OnceCell;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};

use super::body::{self, ErrorFacts};
use super::headers::HeaderFacts;
use super::hints::LazyTime;
use super::rules::{self, Decision};
use super::stream::StreamScanner;
use super::{Classification, Classify, Dialect, ResponseView, dialect, hints};

/// The default classifier: knows the error dialects of the major LLM
/// providers (see the [module docs](super) for the rules).
///
/// ```
/// use std::time::Duration;
/// use levee_core::classify::ProviderClassifier;
///
/// let c = ProviderClassifier::builder()
///     .max_wait(Duration::from_secs(7 * 24 * 3600))
///     .quota_after(Duration::from_secs(2 * 3600))
///     .build();
/// assert_eq!(c.max_wait(), Duration::from_secs(7 * 24 * 3600));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ProviderClassifier {
    pub(crate) limits: Limits,
}

/// The two bounds a classification applies to waits, in nanoseconds
/// (saturating at about 584 years): every breaker call carries a copy of
/// its classifier, so it is kept to 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    max_wait: u64,
    quota_after: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(
            ProviderClassifier::DEFAULT_MAX_WAIT,
            ProviderClassifier::DEFAULT_QUOTA_AFTER,
        )
    }
}

impl Limits {
    fn new(max_wait: Duration, quota_after: Duration) -> Self {
        Limits {
            max_wait: crate::clock::duration_nanos(max_wait),
            quota_after: crate::clock::duration_nanos(quota_after),
        }
    }

    /// The cap on every wait hint.
    pub(crate) fn max_wait(&self) -> Duration {
        Duration::from_nanos(self.max_wait)
    }

    /// The wait beyond which a throttle is a quota.
    pub(crate) fn quota_after(&self) -> Duration {
        Duration::from_nanos(self.quota_after)
    }

    /// Rounded up to the millisecond, then capped.
    pub(crate) fn finish_wait(&self, wait: Duration) -> Duration {
        let millis = wait.as_nanos().div_ceil(1_000_000);
        let wait = u64::try_from(millis).map_or(Duration::MAX, Duration::from_millis);
        wait.min(self.max_wait())
    }

    /// The classification of an error found in a body or stream event:
    /// the wait in hint order (header, `RetryInfo`, message, reset headers),
    /// then the verdict from `decide`, then the reason.
    pub(crate) fn classify_facts<'a>(
        &self,
        facts: &ErrorFacts<'a>,
        header_wait: Option<Duration>,
        headers: Option<&HeaderMap>,
        reference: LazyTime<'_>,
        dialect: Option<Dialect>,
        decide: impl FnOnce(&str, Option<Duration>) -> Decision<'a>,
    ) -> Classification {
        let lower = facts.message.to_ascii_lowercase();
        let wait = header_wait
            .or(facts.retry_delay.filter(|d| !d.is_zero()))
            .or_else(|| hints::text_wait_lower(&lower, reference))
            .or_else(|| hints::reset_wait_lazy(headers?, reference))
            .map(|w| self.finish_wait(w));
        let d = decide(&lower, wait);
        let dialect = dialect.unwrap_or_else(|| dialect::from_body(facts.shape, &lower));
        Classification {
            verdict: d.verdict,
            wait,
            should_retry: None,
            reason: d.why.reason(dialect),
        }
    }
}

impl ProviderClassifier {
    /// The default sanity cap on waits: 366 days, so a yearly quota reset
    /// still fits and only absurd values are cut.
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(366 * 24 * 3600);

    /// The default bound past which a throttle is treated as a quota: one
    /// hour, the longest window providers rate-limit over (Anthropic's
    /// per-hour limits). A longer wait is a daily or monthly allowance.
    pub const DEFAULT_QUOTA_AFTER: Duration = Duration::from_secs(3600);

    /// A builder starting from the defaults.
    pub fn builder() -> ProviderClassifierBuilder {
        ProviderClassifierBuilder {
            limits: Limits::default(),
        }
    }

    /// The cap applied to every wait hint.
    pub fn max_wait(&self) -> Duration {
        self.limits.max_wait()
    }

    /// The wait beyond which a throttle is classified as a quota.
    pub fn quota_after(&self) -> Duration {
        self.limits.quota_after()
    }
}

/// Configures a [`ProviderClassifier`].
#[derive(Clone, Debug)]
pub struct ProviderClassifierBuilder {
    limits: Limits,
}

impl ProviderClassifierBuilder {
    /// Caps every wait hint (default [`ProviderClassifier::DEFAULT_MAX_WAIT`]).
    /// It is a sanity bound, not a policy: the gate and the retry layer apply
    /// their own caps.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.limits = Limits::new(max_wait, self.limits.quota_after());
        self
    }

    /// A throttle whose wait exceeds this is classified as a quota (default
    /// [`ProviderClassifier::DEFAULT_QUOTA_AFTER`]); `Duration::MAX` turns the
    /// rule off.
    pub fn quota_after(mut self, quota_after: Duration) -> Self {
        self.limits = Limits::new(self.limits.max_wait(), quota_after);
        self
    }

    /// The classifier.
    pub fn build(self) -> ProviderClassifier {
        ProviderClassifier {
            limits: self.limits,
        }
    }
}

impl Classify for ProviderClassifier {
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification {
        let status = response.status.as_u16();
        // The hot path: a success reads nothing and allocates nothing.
        if status < 400 {
            return Classification::success();
        }
        let headers = response.headers;
        let h = HeaderFacts::scan(headers);
        // Parsing `Date` costs more than the rest of the header work: only a
        // date-form hint asks for it.
        let date = OnceCell::new();
        let reference = &|| {
            *date.get_or_init(|| {
                h.date
                    .and_then(hints::http_date)
                    .or(response.now)
                    .unwrap_or_else(SystemTime::now)
            })
        };
        let header_wait = hints::explicit_wait(
            [h.retry_after_ms, h.x_ms_retry_after_ms, h.retry_after],
            reference,
        );
        let dialect = response.dialect.or(h.dialect);
        let should_retry = h.should_retry.and_then(hints::should_retry_value);
        let quota_after = self.limits.quota_after();
        body::read(response.body, |facts| {
            let aws = h.aws_error_type.or(facts.aws_type);
            let mut c = self.limits.classify_facts(
                facts,
                header_wait,
                Some(headers),
                reference,
                dialect,
                |lower, wait| rules::decide(status, facts, aws, lower, wait, quota_after),
            );
            c.should_retry = should_retry;
            c
        })
    }

    fn stream_scanner(&self, status: StatusCode, headers: &HeaderMap) -> Option<StreamScanner> {
        Some(StreamScanner::for_response(status, headers)?.with_classifier(self))
    }
}
