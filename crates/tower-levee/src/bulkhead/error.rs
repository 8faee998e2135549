//! Error returned when a bulkhead refuses a request without sending it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use crate::error::{RefusalKind, rejection_response};

/// The compartment of the request's dependency had every permit taken (and,
/// with a `max_wait`, none freed in time). The request was not sent.
///
/// Like every Levee rejection it is an answer, not a failure: the retry
/// layer returns it at once, and a breaker never counts it.
#[derive(Clone)]
pub struct BulkheadFull {
    name: Arc<str>,
    limit: usize,
}

impl BulkheadFull {
    /// The hint [`retry_after`](Self::retry_after) gives: a permit frees as
    /// soon as any call in flight ends, which no one can predict, so this is
    /// short.
    pub const RETRY_AFTER: Duration = Duration::from_millis(100);

    /// A rejection by the compartment `name` holding `limit` permits.
    pub fn new(name: impl Into<Arc<str>>, limit: usize) -> Self {
        BulkheadFull {
            name: name.into(),
            limit,
        }
    }

    /// The compartment (dependency) that refused the request.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many calls the compartment admits at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How long to wait before trying again: [`Self::RETRY_AFTER`].
    pub fn retry_after(&self) -> Duration {
        Self::RETRY_AFTER
    }

    /// The HTTP status a server answers with: `503 Service Unavailable`
    /// ([`RefusalKind::BulkheadFull`]'s).
    pub fn status_code(&self) -> StatusCode {
        RefusalKind::BulkheadFull.status_code()
    }

    /// The stable code of an HTTP error body: `"bulkhead_full"`.
    pub fn code(&self) -> &'static str {
        RefusalKind::BulkheadFull.code()
    }

    /// An HTTP response for a server to send:
    /// [`status_code`](Self::status_code) and a `Retry-After` of 1 s (the
    /// 100 ms hint rounded up) around `body`.
    pub fn to_response<B>(&self, body: B) -> http::Response<B> {
        rejection_response(self.status_code(), self.retry_after(), body)
    }
}

impl fmt::Debug for BulkheadFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadFull")
            .field("name", &&*self.name)
            .field("limit", &self.limit)
            .finish()
    }
}

impl fmt::Display for BulkheadFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bulkhead `{}` full ({} calls in flight); retry after {:?}",
            self.name,
            self.limit,
            self.retry_after()
        )
    }
}

impl std::error::Error for BulkheadFull {}
