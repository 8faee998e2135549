//! Errors returned when the breaker layer refuses a request without sending it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

macro_rules! rejection {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            scope: Arc<str>,
            retry_after: Duration,
        }

        impl $name {
            /// A rejection for `scope` that may be retried after `retry_after`.
            pub fn new(scope: impl Into<Arc<str>>, retry_after: Duration) -> Self {
                $name { scope: scope.into(), retry_after }
            }

            /// The scope that refused the request (failure domain, quota or billing scope).
            pub fn scope(&self) -> &str {
                &self.scope
            }

            /// How long until the scope may admit requests again.
            pub fn retry_after(&self) -> Duration {
                self.retry_after
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("scope", &&*self.scope)
                    .field("retry_after", &self.retry_after)
                    .finish()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($what, " for `{}`; retry after {:?}"), self.scope, self.retry_after)
            }
        }

        impl std::error::Error for $name {}
    };
}

rejection!(
    /// The breaker of the request's failure domain is open (or half-open with
    /// every probe slot taken). The request was not sent.
    CircuitOpen,
    "circuit open"
);

rejection!(
    /// The throttle gate of the request's quota scope is closed: the provider
    /// asked us to wait. The request was not sent.
    Throttled,
    "throttled"
);

rejection!(
    /// The request's billing scope is parked: a quota or spend cap is
    /// exhausted until it resets. The request was not sent.
    Parked,
    "parked (quota exhausted)"
);
