//! Errors returned when the breaker layer refuses a request without sending it.
//!
//! Each one is also an HTTP answer for a server to send on
//! (`status_code`, `code`, `to_response`; an axum `IntoResponse` with the
//! `axum` feature), mapped once, by [`RefusalKind`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use crate::error::{RefusalKind, rejection_response};
use crate::inline_str::{ScopeKey, ScopeName};

macro_rules! rejection {
    ($(#[$doc:meta])* $name:ident, $kind:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            scope: ScopeName,
            retry_after: Duration,
        }

        impl $name {
            /// A rejection for `scope` that may be retried after `retry_after`.
            pub fn new(scope: impl Into<Arc<str>>, retry_after: Duration) -> Self {
                $name { scope: ScopeName::Shared(scope.into()), retry_after }
            }

            /// The scope that refused the request (failure domain, quota or billing scope).
            pub fn scope(&self) -> &str {
                self.scope.as_str()
            }

            /// How long until the scope may admit requests again.
            pub fn retry_after(&self) -> Duration {
                self.retry_after
            }

            #[doc = concat!("The HTTP status a server answers with: [`RefusalKind::", stringify!($kind), "`]'s.")]
            pub fn status_code(&self) -> StatusCode {
                RefusalKind::$kind.status_code()
            }

            #[doc = concat!("The stable code of an HTTP error body: [`RefusalKind::", stringify!($kind), "`]'s.")]
            pub fn code(&self) -> &'static str {
                RefusalKind::$kind.code()
            }

            /// An HTTP response for a server to send:
            /// [`status_code`](Self::status_code) and a `Retry-After` in
            /// whole seconds, rounded up, around `body`.
            pub fn to_response<B>(&self, body: B) -> http::Response<B> {
                rejection_response(self.status_code(), self.retry_after, body)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("scope", &self.scope())
                    .field("retry_after", &self.retry_after)
                    .finish()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($what, " for `{}`; retry after {:?}"), self.scope(), self.retry_after)
            }
        }

        impl std::error::Error for $name {}
    };
}

rejection!(
    /// The breaker of the request's failure domain is open (or half-open with
    /// every probe slot taken). The request was not sent.
    CircuitOpen,
    CircuitOpen,
    "circuit open"
);

rejection!(
    /// The throttle gate of the request's quota scope is closed: the provider
    /// asked us to wait. The request was not sent.
    Throttled,
    Throttled,
    "throttled"
);

rejection!(
    /// The request's billing scope is parked: a quota or spend cap is
    /// exhausted until it resets. The request was not sent.
    Parked,
    Parked,
    "parked (quota exhausted)"
);

/// A refusal before anything is boxed. A call boxes it at once
/// ([`into_error`](Self::into_error)); a router that peeks and goes on to
/// its next target keeps only this, so passing over a throttled, parked or
/// open target builds no error. The rejection it stands for is built only
/// for a caller that gets it.
#[derive(Clone, Debug)]
pub(crate) struct Refused {
    by: RefusedBy,
    scope: ScopeName,
    retry_after: Duration,
}

/// What in the breaker layer refused.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RefusedBy {
    Gate,
    Park,
    Breaker,
}

impl Refused {
    /// A refusal by `by` of the scope `key` names for this one call: its
    /// name is copied in (inline up to 46 bytes, so a provider's host and
    /// model need no allocation of their own).
    #[inline(always)]
    pub(crate) fn new(by: RefusedBy, key: impl ScopeKey, retry_after: Duration) -> Self {
        Refused {
            by,
            scope: key.to_scope_name(),
            retry_after,
        }
    }

    pub(crate) fn kind(&self) -> RefusalKind {
        match self.by {
            RefusedBy::Gate => RefusalKind::Throttled,
            RefusedBy::Park => RefusalKind::Parked,
            RefusedBy::Breaker => RefusalKind::CircuitOpen,
        }
    }

    pub(crate) fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The refusing scope's name, given up.
    pub(crate) fn into_scope(self) -> ScopeName {
        self.scope
    }

    /// The rejection a caller gets: [`Throttled`], [`Parked`] or [`CircuitOpen`].
    #[inline(always)]
    pub(crate) fn into_error(self) -> crate::error::BoxError {
        let Refused {
            by,
            scope,
            retry_after,
        } = self;
        match by {
            RefusedBy::Gate => Box::new(Throttled { scope, retry_after }),
            RefusedBy::Park => Box::new(Parked { scope, retry_after }),
            RefusedBy::Breaker => Box::new(CircuitOpen { scope, retry_after }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inline_str::InlineStr;
    use http::header::RETRY_AFTER;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_rejection_fits_one_64_byte_allocation_with_a_long_scope_name_inline() {
        assert!(std::mem::size_of::<Throttled>() <= 64);
        let long = "api.anthropic.com/claude-sonnet-4-5-20250929";
        let refused = Refused::new(RefusedBy::Gate, long, Duration::from_secs(1)).into_error();
        let throttled = refused
            .downcast_ref::<Throttled>()
            .expect("a gate's refusal");
        assert!(matches!(
            &throttled.scope,
            ScopeName::Copied(InlineStr::Inline { .. })
        ));
        assert_eq!(throttled.scope(), long);
        let longer = "x".repeat(47);
        let parked = Refused::new(RefusedBy::Park, longer.as_str(), Duration::ZERO).into_error();
        assert_eq!(
            parked.downcast_ref::<Parked>().expect("a park's").scope(),
            longer
        );
    }

    #[test]
    fn each_rejection_answers_with_its_status_code_and_wait() {
        let wait = Duration::from_millis(2_500);
        let open = CircuitOpen::new("api.openai.com", wait);
        let throttled = Throttled::new("api.openai.com/gpt-4o", wait);
        let parked = Parked::new("api.openai.com", wait);
        let cases = [
            (open.to_response(()), open.code(), 503, "circuit_open"),
            (
                throttled.to_response(()),
                throttled.code(),
                429,
                "provider_rate_limited",
            ),
            (parked.to_response(()), parked.code(), 503, "parked"),
        ];
        for (res, code, status, expected) in cases {
            assert_eq!(res.status(), status, "{expected}");
            assert_eq!(code, expected);
            assert_eq!(res.headers()[RETRY_AFTER], "3", "{expected}");
        }
    }
}
