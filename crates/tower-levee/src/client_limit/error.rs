//! The error returned when a caller is over its own limit.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use crate::error::{RefusalKind, rejection_response};

/// Which of a caller's limits refused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    /// Requests per minute.
    Requests,
    /// Tokens per minute.
    Tokens,
}

impl LimitKind {
    /// The stable lowercase name (`"requests"`, `"tokens"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            LimitKind::Requests => "requests",
            LimitKind::Tokens => "tokens",
        }
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The caller is over its requests or tokens per minute. The request was
/// not sent.
///
/// Like every Levee rejection it is an answer, not a failure: it is never
/// retried, and a breaker never counts it.
#[derive(Clone)]
pub struct ClientLimited {
    client: Arc<str>,
    limit: LimitKind,
    retry_after: Duration,
}

impl ClientLimited {
    /// `client`'s refusal by its `limit`, admitted again after `retry_after`.
    pub fn new(client: impl Into<Arc<str>>, limit: LimitKind, retry_after: Duration) -> Self {
        ClientLimited {
            client: client.into(),
            limit,
            retry_after,
        }
    }

    /// The caller's name (its [`ClientId`](super::ClientId)).
    pub fn client(&self) -> &str {
        &self.client
    }

    /// Which limit refused it.
    pub fn limit(&self) -> LimitKind {
        self.limit
    }

    /// How long until the caller is admitted again.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The HTTP status a server answers with: `429 Too Many Requests`
    /// ([`RefusalKind::ClientLimit`]'s).
    pub fn status_code(&self) -> StatusCode {
        RefusalKind::ClientLimit.status_code()
    }

    /// The stable code of an HTTP error body: `"client_rate_limited"`.
    pub fn code(&self) -> &'static str {
        RefusalKind::ClientLimit.code()
    }

    /// An HTTP response for a server to send: [`status_code`](Self::status_code)
    /// and a `Retry-After` in whole seconds, rounded up, around `body`.
    pub fn to_response<B>(&self, body: B) -> http::Response<B> {
        rejection_response(self.status_code(), self.retry_after, body)
    }
}

impl fmt::Debug for ClientLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientLimited")
            .field("client", &&*self.client)
            .field("limit", &self.limit)
            .field("retry_after", &self.retry_after)
            .finish()
    }
}

impl fmt::Display for ClientLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client `{}` is over its {}-per-minute limit; retry after {:?}",
            self.client, self.limit, self.retry_after
        )
    }
}

impl std::error::Error for ClientLimited {}
