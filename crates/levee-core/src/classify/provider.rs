//! [`ProviderClassifier`]: the default [`Classify`] implementation.

use std::sync::Arc;
use std::time::Duration;

use super::body::{self, ErrorFacts};
use super::custom::{Answer, Rules, Seen};
use super::dialect::Dialect;
use super::hints::{self, LazyTime};
use super::rules::Decision;
use super::text::Lower;
use super::verdict::{Classification, StatedLimit, Verdict};

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
    /// The user's rules, checked first; shared, since every breaker call
    /// carries a copy of its classifier.
    pub(crate) rules: Option<Arc<Rules>>,
    /// Read 2xx bodies for an error object.
    pub(crate) peek_success: bool,
}

/// The two bounds a classification applies to waits, in nanoseconds
/// (saturating at about 584 years): every breaker call carries a copy of
/// its classifier, so they take 16 bytes (the rules are shared).
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
        crate::clock::ceil_millis(wait).min(self.max_wait())
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
            rules: None,
            peek_success: false,
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

    /// The user's rules, checked before the built-in ones.
    pub fn rules(&self) -> Option<&Rules> {
        self.rules.as_deref()
    }

    /// The classification of an error found in a body or stream event:
    /// the user's rules first; then the wait in hint order (header,
    /// `RetryInfo`, message, reset headers), the verdict from `decide`, and
    /// the reason.
    pub(crate) fn classify_facts<'a>(
        &self,
        facts: &ErrorFacts<'a>,
        seen: Seen<'_>,
        header_wait: Option<Duration>,
        reference: LazyTime<'_>,
        dialect: Option<Dialect>,
        decide: impl FnOnce(&Lower, Option<Duration>) -> Decision<'a>,
    ) -> Classification {
        let lower = Lower::new(facts.message, facts.upstream);
        let hint = || {
            header_wait
                .or(facts.retry_delay.filter(|d| !d.is_zero()))
                .or_else(|| hints::text_wait_lower(&lower, reference))
                .or_else(|| hints::reset_wait_lazy(seen.headers?, reference))
        };
        if let Some(rules) = &self.rules {
            let answer = Answer {
                seen,
                facts,
                lower: &lower,
            };
            if let Some(c) = rules.classify(&answer, hint, |w| self.limits.finish_wait(w)) {
                return c;
            }
        }
        let wait = hint().map(|w| self.limits.finish_wait(w));
        let d = decide(&lower, wait);
        // A request waiting cannot help (one larger than the window) keeps
        // no wait.
        let wait = wait.filter(|_| d.verdict != Verdict::Request);
        let dialect = dialect.unwrap_or_else(|| body::dialect_of(facts.shape, &lower));
        Classification {
            verdict: d.verdict,
            wait,
            should_retry: None,
            reason: d.why.reason(dialect),
            rule: None,
            stated_limit: facts
                .requests_per_minute
                .filter(|_| d.verdict == Verdict::Throttled)
                .and_then(|n| StatedLimit::new(n, Duration::from_secs(60))),
        }
    }
}

/// Whether the provider at `host` is known to answer `200` with an error
/// object in place of a completion, so its classifier should
/// [`peek_success`](ProviderClassifierBuilder::peek_success): Baidu Qianfan
/// (`*.baidubce.com`, [error codes](https://cloud.baidu.com/doc/qianfan-api/s/3m9b5lqft)),
/// MiniMax (`api.minimax.chat`, `api.minimaxi.com`, `api.minimax.io`,
/// [error codes](https://platform.minimax.io/docs/api-reference/errorcode)),
/// Tencent Cloud (`*.tencentcloudapi.com`,
/// [API 3.0 errors](https://cloud.tencentcloud.com/document/api/1729/101838)),
/// iFlytek Spark (`*.xf-yun.com`) and Sber's GigaChat
/// (`gigachat.devices.sberbank.ru`).
///
/// ```
/// assert!(levee_core::classify::answers_errors_with_200("aip.baidubce.com"));
/// assert!(!levee_core::classify::answers_errors_with_200("api.openai.com"));
/// ```
pub fn answers_errors_with_200(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let under = |domain: &str| host == domain || host.ends_with(&format!(".{domain}"));
    [
        "baidubce.com",
        "minimax.chat",
        "minimaxi.com",
        "minimax.io",
        "tencentcloudapi.com",
        "xf-yun.com",
        "gigachat.devices.sberbank.ru",
    ]
    .into_iter()
    .any(under)
}

/// Configures a [`ProviderClassifier`].
#[derive(Clone, Debug)]
pub struct ProviderClassifierBuilder {
    limits: Limits,
    rules: Option<Arc<Rules>>,
    peek_success: bool,
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

    /// Rules checked before the built-in ones: the first that matches an
    /// answer decides it (see [`Rules`]). An empty set is none.
    pub fn rules(mut self, rules: Rules) -> Self {
        self.rules = (!rules.is_empty()).then(|| Arc::new(rules));
        self
    }

    /// Reads the first bytes of every 2xx answer that is not a stream for
    /// an error object in place of the completion (default off). Some
    /// providers answer `200` with their errors: Baidu Qianfan
    /// (`error_code`/`error_msg`), MiniMax (a non-zero
    /// `base_resp.status_code`), Tencent Cloud (`Response.Error`), see
    /// [`answers_errors_with_200`]. It costs every success a bounded read
    /// of its body before the caller gets it, so turn it on for those
    /// providers only. (A stream's first event is read anyway.)
    ///
    /// [`answers_errors_with_200`]: super::answers_errors_with_200
    pub fn peek_success(mut self, on: bool) -> Self {
        self.peek_success = on;
        self
    }

    /// The classifier.
    pub fn build(self) -> ProviderClassifier {
        ProviderClassifier {
            limits: self.limits,
            rules: self.rules,
            peek_success: self.peek_success,
        }
    }
}
