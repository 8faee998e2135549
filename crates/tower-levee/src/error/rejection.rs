//! Finding a Levee rejection in an error: the one place that knows every
//! layer's rejection type, above the layers' `error.rs` files and below
//! their services.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use http::{Response, StatusCode};

use super::refusal::{RefusalKind, rejection_response};
use crate::breaker::error::{CircuitOpen, Parked, Throttled};
use crate::bulkhead::error::BulkheadFull;
use crate::client_limit::error::ClientLimited;
use crate::failover::error::NoTargetAvailable;

/// A Levee rejection, borrowed from the error that carries it: the request
/// was refused by a Levee layer and never sent.
///
/// [`find`](Self::find) looks for one in an error and its whole source
/// chain, so a rejection wrapped by another layer or a client's own error
/// type is still found. Every rejection reads the same way: its
/// [`kind`](Self::kind), [`scope`](Self::scope), [`retry_after`](Self::retry_after),
/// and its HTTP answer ([`status_code`](Self::status_code),
/// [`code`](Self::code), [`to_response`](Self::to_response)).
///
/// ```
/// use std::time::Duration;
/// use tower_levee::{BoxError, Throttled};
/// use tower_levee::error::{RefusalKind, Rejection};
///
/// let err: BoxError = Box::new(Throttled::new("org-a/gpt-4o", Duration::from_millis(1200)));
/// let rejection = Rejection::find(&*err).expect("a Levee rejection");
/// assert_eq!(rejection.kind(), RefusalKind::Throttled);
/// assert_eq!(rejection.scope(), Some("org-a/gpt-4o"));
/// assert_eq!(rejection.status_code(), 429);
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Rejection<'a> {
    /// Refused by an open breaker.
    CircuitOpen(&'a CircuitOpen),
    /// Refused by a closed throttle gate.
    Throttled(&'a Throttled),
    /// Refused by a parked billing scope.
    Parked(&'a Parked),
    /// Refused by a full bulkhead.
    BulkheadFull(&'a BulkheadFull),
    /// Refused by every target of a failover.
    NoTargetAvailable(&'a NoTargetAvailable),
    /// Refused because the caller is over its own limit.
    ClientLimited(&'a ClientLimited),
}

impl<'a> Rejection<'a> {
    /// The first Levee rejection in `err` or its source chain.
    pub fn find(err: &'a (dyn Error + 'static)) -> Option<Self> {
        let mut cur = Some(err);
        while let Some(e) = cur {
            if let Some(rejection) = Self::of(e) {
                return Some(rejection);
            }
            cur = e.source();
        }
        None
    }

    /// `err` itself as a rejection, if it is one.
    fn of(err: &'a (dyn Error + 'static)) -> Option<Self> {
        if let Some(e) = err.downcast_ref::<CircuitOpen>() {
            Some(Rejection::CircuitOpen(e))
        } else if let Some(e) = err.downcast_ref::<Throttled>() {
            Some(Rejection::Throttled(e))
        } else if let Some(e) = err.downcast_ref::<Parked>() {
            Some(Rejection::Parked(e))
        } else if let Some(e) = err.downcast_ref::<BulkheadFull>() {
            Some(Rejection::BulkheadFull(e))
        } else if let Some(e) = err.downcast_ref::<NoTargetAvailable>() {
            Some(Rejection::NoTargetAvailable(e))
        } else {
            err.downcast_ref::<ClientLimited>()
                .map(Rejection::ClientLimited)
        }
    }

    /// What refused; for [`NoTargetAvailable`], whose targets each refused
    /// for their own reason ([`NoTargetAvailable::refusals`]), its
    /// [`kind`](NoTargetAvailable::kind).
    pub fn kind(&self) -> RefusalKind {
        match self {
            Rejection::CircuitOpen(_) => RefusalKind::CircuitOpen,
            Rejection::Throttled(_) => RefusalKind::Throttled,
            Rejection::Parked(_) => RefusalKind::Parked,
            Rejection::BulkheadFull(_) => RefusalKind::BulkheadFull,
            Rejection::NoTargetAvailable(e) => e.kind(),
            Rejection::ClientLimited(_) => RefusalKind::ClientLimit,
        }
    }

    /// The scope that refused (failure domain, quota or billing scope,
    /// bulkhead compartment, or the caller's name); `None` for
    /// [`NoTargetAvailable`].
    pub fn scope(&self) -> Option<&'a str> {
        match *self {
            Rejection::CircuitOpen(e) => Some(e.scope()),
            Rejection::Throttled(e) => Some(e.scope()),
            Rejection::Parked(e) => Some(e.scope()),
            Rejection::BulkheadFull(e) => Some(e.name()),
            Rejection::NoTargetAvailable(_) => None,
            Rejection::ClientLimited(e) => Some(e.client()),
        }
    }

    /// How long until the request may be admitted.
    pub fn retry_after(&self) -> Duration {
        match self {
            Rejection::CircuitOpen(e) => e.retry_after(),
            Rejection::Throttled(e) => e.retry_after(),
            Rejection::Parked(e) => e.retry_after(),
            Rejection::BulkheadFull(e) => e.retry_after(),
            Rejection::NoTargetAvailable(e) => e.retry_after(),
            Rejection::ClientLimited(e) => e.retry_after(),
        }
    }

    /// Whether the caller gains anything by coming back after
    /// [`retry_after`](Self::retry_after): not when what refused is parked
    /// (every target of a [`NoTargetAvailable`]). See
    /// [`RefusalKind::worth_retrying`].
    pub fn worth_retrying(&self) -> bool {
        match self {
            Rejection::NoTargetAvailable(e) => e.worth_retrying(),
            other => other.kind().worth_retrying(),
        }
    }

    /// The HTTP status a server answers with: `429` or `503`
    /// ([`kind`](Self::kind)'s).
    pub fn status_code(&self) -> StatusCode {
        self.kind().status_code()
    }

    /// The stable code of an HTTP error body (`provider_rate_limited`,
    /// `parked`, `circuit_open`, `bulkhead_full`, `client_rate_limited`):
    /// [`kind`](Self::kind)'s.
    pub fn code(&self) -> &'static str {
        self.kind().code()
    }

    /// An HTTP response for a server to send: [`status_code`](Self::status_code)
    /// and a `Retry-After` in whole seconds, rounded up, around `body`.
    pub fn to_response<B>(&self, body: B) -> Response<B> {
        rejection_response(self.status_code(), self.retry_after(), body)
    }

    /// The rejection as the error it is.
    pub fn error(&self) -> &'a (dyn Error + Send + Sync + 'static) {
        match *self {
            Rejection::CircuitOpen(e) => e,
            Rejection::Throttled(e) => e,
            Rejection::Parked(e) => e,
            Rejection::BulkheadFull(e) => e,
            Rejection::NoTargetAvailable(e) => e,
            Rejection::ClientLimited(e) => e,
        }
    }
}

impl fmt::Display for Rejection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.error(), f)
    }
}

macro_rules! from_rejection {
    ($($ty:ident),*) => {$(
        impl<'a> From<&'a $ty> for Rejection<'a> {
            fn from(e: &'a $ty) -> Self {
                Rejection::$ty(e)
            }
        }
    )*};
}

from_rejection!(
    CircuitOpen,
    Throttled,
    Parked,
    BulkheadFull,
    NoTargetAvailable,
    ClientLimited
);

/// Whether `err`, or any error in its source chain, is a rejection made by
/// a Levee layer itself (the request was never sent), as opposed to an
/// error from the provider or the transport.
///
/// Levee's rejections are answers, not failures: they are never retried or
/// slept on (but for the one wait [`RetryBudgetLayer`](crate::RetryBudgetLayer)
/// knows is not blind), and never counted against a breaker. Use it in a
/// `tower::retry::Policy` of your own to return them untouched
/// ([`BudgetPolicy`](crate::retry::BudgetPolicy) does):
///
/// ```
/// use std::time::Duration;
/// use tower_levee::{BoxError, CircuitOpen};
/// use tower_levee::error::is_rejection;
///
/// let open: BoxError = Box::new(CircuitOpen::new("api.openai.com", Duration::from_secs(30)));
/// assert!(is_rejection(&*open));
/// let reset: BoxError = Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
/// assert!(!is_rejection(&*reset));
/// ```
pub fn is_rejection(err: &(dyn Error + 'static)) -> bool {
    Rejection::find(err).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{BoxError, transport_failure};
    use crate::test_util::Wrapped;
    use levee_core::classify::TransportFailure;

    #[test]
    fn levee_rejections_are_recognised_and_others_are_not() {
        let e: BoxError = Box::new(CircuitOpen::new("api.openai.com", Duration::from_secs(3)));
        assert!(is_rejection(&*e));
        let e: BoxError = Box::new(Throttled::new("org-a/gpt-4o", Duration::from_secs(3)));
        assert!(is_rejection(&*e));
        let e: BoxError = Box::new(Parked::new("org-a", Duration::from_secs(3)));
        assert!(is_rejection(&*e));
        let e: BoxError = Box::new(BulkheadFull::new("llm", 8));
        assert!(is_rejection(&*e));
        let e: BoxError = "boom".into();
        assert!(!is_rejection(&*e));
        assert_eq!(transport_failure(&*e), TransportFailure::Other);
    }

    #[test]
    fn a_rejection_deep_in_the_source_chain_is_found_with_its_kind_scope_and_wait() {
        let open: BoxError = Box::new(CircuitOpen::new("a", Duration::from_secs(1)));
        let wrapped: BoxError = Box::new(Wrapped(Box::new(Wrapped(open))));
        let found = Rejection::find(&*wrapped).expect("found under two wrappers");
        assert_eq!(
            (found.kind(), found.scope(), found.retry_after()),
            (RefusalKind::CircuitOpen, Some("a"), Duration::from_secs(1))
        );
        assert_eq!(found.code(), "circuit_open");
        assert_eq!(found.to_string(), "circuit open for `a`; retry after 1s");
        let other: BoxError = Box::new(Wrapped("boom".into()));
        assert!(Rejection::find(&*other).is_none());
    }
}
