//! The error returned when no target can take a request.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

pub use crate::error::RefusalKind;
use crate::error::rejection_response;
use crate::inline_str::ScopeName;

/// One target's refusal: which target, why, for which scope, until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    target: &'static str,
    kind: RefusalKind,
    scope: ScopeName,
    retry_after: Duration,
}

impl Refusal {
    /// `target`'s refusal of `kind` by `scope`, for `retry_after`.
    pub(crate) fn new(
        target: &'static str,
        kind: RefusalKind,
        scope: ScopeName,
        retry_after: Duration,
    ) -> Self {
        Refusal {
            target,
            kind,
            scope,
            retry_after,
        }
    }

    /// The target's name.
    pub fn target(&self) -> &str {
        self.target
    }

    /// Why it refused.
    pub fn kind(&self) -> RefusalKind {
        self.kind
    }

    /// The scope that refused: quota scope, billing scope, failure domain or
    /// bulkhead compartment.
    pub fn scope(&self) -> &str {
        self.scope.as_str()
    }

    /// How long until this target may take the request.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }
}

/// No target could take the request: every one was throttled, parked, open
/// or full. Nothing was sent.
///
/// [`retry_after`](Self::retry_after) is the earliest time any target
/// reopens, capped (300 s by default). As an HTTP answer
/// ([`status_code`](Self::status_code), [`code`](Self::code),
/// [`to_response`](Self::to_response)) it is its [`kind`](Self::kind)'s: a
/// `429 provider_rate_limited` when every target is only throttled — the
/// capacity exists and returns at a known time — and otherwise a `503`
/// with the code of the refusal that ends first among those that are not
/// throttles (`circuit_open`, `parked`, `bulkhead_full`).
///
/// The retry layer returns it at once, like every Levee rejection, except
/// when [`all_throttled`](Self::all_throttled) and the wait fits the
/// caller's deadline: then it retries at that instant.
#[derive(Clone)]
pub struct NoTargetAvailable {
    refusals: Arc<[Refusal]>,
    retry_after: Duration,
}

impl NoTargetAvailable {
    /// From every target's refusal, with `retry_after` capped at `cap`.
    pub(crate) fn new(refusals: Vec<Refusal>, cap: Duration) -> Self {
        let retry_after = refusals
            .iter()
            .map(Refusal::retry_after)
            .min()
            .unwrap_or(cap)
            .min(cap);
        NoTargetAvailable {
            refusals: refusals.into(),
            retry_after,
        }
    }

    /// Each target's refusal, in the order the targets were considered.
    pub fn refusals(&self) -> &[Refusal] {
        &self.refusals
    }

    /// The earliest time any target may take the request, capped.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// Whether every target refused only because it was throttled: the
    /// capacity is there and returns at [`retry_after`](Self::retry_after).
    pub fn all_throttled(&self) -> bool {
        !self.refusals.is_empty()
            && self
                .refusals
                .iter()
                .all(|r| r.kind == RefusalKind::Throttled)
    }

    /// Why no target could take the request, as one refusal:
    /// [`Throttled`](RefusalKind::Throttled) when every target is only
    /// throttled; otherwise the kind of the refusal that ends first among
    /// those that are not throttles (a throttle beside an open breaker
    /// says less about when the request can be served than the breaker).
    pub fn kind(&self) -> RefusalKind {
        if self.all_throttled() {
            return RefusalKind::Throttled;
        }
        self.refusals
            .iter()
            .filter(|r| r.kind != RefusalKind::Throttled)
            .min_by_key(|r| r.retry_after)
            .map_or(RefusalKind::CircuitOpen, |r| r.kind)
    }

    /// Whether a caller gains anything by coming back after
    /// [`retry_after`](Self::retry_after): not when every target is parked
    /// (see [`RefusalKind::worth_retrying`]).
    pub fn worth_retrying(&self) -> bool {
        self.refusals.is_empty() || self.refusals.iter().any(|r| r.kind.worth_retrying())
    }

    /// [`kind`](Self::kind)'s status: `429 Too Many Requests` when every
    /// target is only throttled, `503 Service Unavailable` otherwise.
    pub fn status_code(&self) -> StatusCode {
        self.kind().status_code()
    }

    /// [`kind`](Self::kind)'s stable code for an error body:
    /// `provider_rate_limited` when every target is only throttled, else
    /// `circuit_open`, `parked` or `bulkhead_full`.
    pub fn code(&self) -> &'static str {
        self.kind().code()
    }

    /// An HTTP response for a server to send: [`status_code`](Self::status_code)
    /// and a `Retry-After` in whole seconds, rounded up, around `body`.
    ///
    /// ```
    /// # use tower_levee::failover::NoTargetAvailable;
    /// fn answer(err: &NoTargetAvailable) -> http::Response<String> {
    ///     let body = format!(r#"{{"error":{{"code":"{}","message":"{err}"}}}}"#, err.code());
    ///     err.to_response(body)
    /// }
    /// ```
    pub fn to_response<B>(&self, body: B) -> http::Response<B> {
        rejection_response(self.status_code(), self.retry_after, body)
    }
}

impl fmt::Debug for NoTargetAvailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NoTargetAvailable")
            .field("refusals", &self.refusals)
            .field("retry_after", &self.retry_after)
            .finish()
    }
}

impl fmt::Display for NoTargetAvailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no target available")?;
        for (i, r) in self.refusals.iter().enumerate() {
            let sep = if i == 0 { ": " } else { ", " };
            write!(
                f,
                "{sep}{} {} (`{}`, {:?})",
                r.target, r.kind, r.scope, r.retry_after
            )?;
        }
        write!(f, "; retry after {:?}", self.retry_after)
    }
}

impl Error for NoTargetAvailable {}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(kind: RefusalKind, secs: u64) -> Refusal {
        Refusal {
            target: "t",
            kind,
            scope: ScopeName::copied("s"),
            retry_after: Duration::from_secs(secs),
        }
    }

    #[test]
    fn only_throttled_targets_make_a_429_with_the_earliest_reopen() {
        let e = NoTargetAvailable::new(
            vec![
                refusal(RefusalKind::Throttled, 7),
                refusal(RefusalKind::Throttled, 2),
            ],
            Duration::from_secs(300),
        );
        assert!(e.all_throttled());
        assert_eq!(e.retry_after(), Duration::from_secs(2));
        assert_eq!(e.status_code(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.code(), "provider_rate_limited");
        let res = e.to_response(());
        assert_eq!(res.headers()[http::header::RETRY_AFTER], "2");
    }

    #[test]
    fn a_parked_or_open_target_makes_a_503_and_the_wait_is_capped() {
        let e = NoTargetAvailable::new(
            vec![
                refusal(RefusalKind::Throttled, 900),
                refusal(RefusalKind::Parked, 86_400),
            ],
            Duration::from_secs(300),
        );
        assert!(!e.all_throttled());
        assert_eq!(e.kind(), RefusalKind::Parked);
        assert_eq!(e.retry_after(), Duration::from_secs(300));
        assert_eq!(e.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.code(), "parked");
        assert!(e.worth_retrying(), "the throttled target returns");
        assert_eq!(
            e.to_string(),
            "no target available: t throttled (`s`, 900s), t parked (`s`, 86400s); retry after 300s"
        );
    }

    #[test]
    fn the_refusal_that_ends_first_names_a_mixed_answer_and_only_parks_say_do_not_retry() {
        let cap = Duration::from_secs(300);
        let mixed = NoTargetAvailable::new(
            vec![
                refusal(RefusalKind::Parked, 3_600),
                refusal(RefusalKind::Throttled, 1),
                refusal(RefusalKind::CircuitOpen, 20),
            ],
            cap,
        );
        assert_eq!(mixed.kind(), RefusalKind::CircuitOpen);
        assert_eq!(mixed.code(), "circuit_open");
        assert_eq!(mixed.retry_after(), Duration::from_secs(1));
        assert!(mixed.worth_retrying());
        let parked = NoTargetAvailable::new(
            vec![
                refusal(RefusalKind::Parked, 3_600),
                refusal(RefusalKind::Parked, 60),
            ],
            cap,
        );
        assert_eq!(parked.kind(), RefusalKind::Parked);
        assert!(!parked.worth_retrying());
    }
}
