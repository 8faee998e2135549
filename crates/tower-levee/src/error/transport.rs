//! How an inner service's error reads as a transport failure. A leaf.

use std::error::Error;
use std::io;

use levee_core::classify::TransportFailure;

use super::stream::StreamTimeout;

/// Reads what kind of transport failure an inner service's error is, walking
/// its source chain: a timeout (`tower::timeout::error::Elapsed`,
/// `tokio::time::error::Elapsed`, a [`StreamTimeout`],
/// `io::ErrorKind::TimedOut`), a connect error,
/// a reset, or anything else.
pub fn transport_failure(err: &(dyn Error + 'static)) -> TransportFailure {
    let mut cur: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.is::<tower::timeout::error::Elapsed>()
            || e.is::<tokio::time::error::Elapsed>()
            || e.is::<StreamTimeout>()
        {
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
    use crate::error::BoxError;

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
}
