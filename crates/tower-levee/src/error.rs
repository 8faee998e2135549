//! Errors shared by every layer, and how inner-service errors are read.

use std::error::Error;
use std::io;
use std::time::Duration;

use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

use levee_core::classify::TransportFailure;

use crate::breaker::{CircuitOpen, Parked, Throttled};
use crate::bulkhead::BulkheadFull;
use crate::failover::NoTargetAvailable;

/// The boxed error type every Levee layer returns.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// Whether `err` is a rejection made by a Levee layer itself (the request was
/// never sent), as opposed to an error from the provider or the transport.
///
/// Levee's rejections are answers, not failures: they are never retried or
/// slept on, and never counted against a breaker.
pub fn is_rejection(err: &(dyn Error + 'static)) -> bool {
    err.is::<CircuitOpen>()
        || err.is::<Throttled>()
        || err.is::<Parked>()
        || err.is::<BulkheadFull>()
        || err.is::<NoTargetAvailable>()
}

/// `wait` as a `Retry-After` value: whole seconds, rounded up.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// The one place a Levee rejection becomes an HTTP answer: `status` and a
/// `Retry-After` of `wait` in whole seconds, rounded up, around `body`.
pub(crate) fn rejection_response<B>(status: StatusCode, wait: Duration, body: B) -> Response<B> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(wait)));
    response
}

/// Reads what kind of transport failure an inner service's error is, walking
/// its source chain: a timeout (`tower::timeout::error::Elapsed`,
/// `tokio::time::error::Elapsed`, `io::ErrorKind::TimedOut`), a connect error,
/// a reset, or anything else.
pub fn transport_failure(err: &(dyn Error + 'static)) -> TransportFailure {
    let mut cur: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.is::<tower::timeout::error::Elapsed>() || e.is::<tokio::time::error::Elapsed>() {
            return TransportFailure::Timeout;
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return match io.kind() {
                io::ErrorKind::TimedOut => TransportFailure::Timeout,
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::NotConnected
                | io::ErrorKind::AddrNotAvailable
                | io::ErrorKind::HostUnreachable
                | io::ErrorKind::NetworkUnreachable => TransportFailure::Connect,
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => TransportFailure::Reset,
                _ => TransportFailure::Other,
            };
        }
        cur = e.source();
    }
    TransportFailure::Other
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[derive(Debug)]
    struct Wrapped(io::Error);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error")
        }
    }
    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 0);
        assert_eq!(retry_after_secs(Duration::from_millis(100)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
        let res = rejection_response(
            StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_millis(1500),
            (),
        );
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(res.headers()[RETRY_AFTER], "2");
    }

    #[test]
    fn timeout_elapsed_is_a_timeout() {
        let e: BoxError = Box::new(tower::timeout::error::Elapsed::new());
        assert_eq!(transport_failure(&*e), TransportFailure::Timeout);
    }

    #[test]
    fn refused_connection_deep_in_the_chain_is_a_connect_failure() {
        let e: BoxError = Box::new(Wrapped(io::Error::from(io::ErrorKind::ConnectionRefused)));
        assert_eq!(transport_failure(&*e), TransportFailure::Connect);
        let e: BoxError = Box::new(Wrapped(io::Error::from(io::ErrorKind::ConnectionReset)));
        assert_eq!(transport_failure(&*e), TransportFailure::Reset);
    }

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
}
