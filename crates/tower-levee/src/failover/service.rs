//! The failover service.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::builder::FailoverBuilder;
use super::future::ResponseFuture;
use super::health::FailoverHandle;
use super::state::Common;
use crate::BoxError;
use crate::body::ResponseBody;

/// Sends each request to the first target that can take it, and on to the
/// next when one is throttled, out of quota, failing or rejects its key.
/// Built by [`Failover::builder`]; see the [module docs](super).
///
/// Clones share the targets and their state; a clone costs one reference
/// count.
pub struct Failover<B, RB: Body> {
    pub(crate) common: Arc<Common<B, RB>>,
}

impl<B, RB: Body> Failover<B, RB> {
    /// A builder: add targets in failover order, the primary first.
    pub fn builder() -> FailoverBuilder<B, RB> {
        FailoverBuilder::new()
    }

    /// A handle on the targets' state: the health snapshot, and each
    /// target's breaker for manual control.
    pub fn handle(&self) -> FailoverHandle {
        FailoverHandle {
            meta: self.common.meta.clone(),
        }
    }
}

impl<B, RB: Body> Clone for Failover<B, RB> {
    fn clone(&self) -> Self {
        Failover {
            common: self.common.clone(),
        }
    }
}

impl<B, RB: Body> fmt::Debug for Failover<B, RB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.common.meta, f)
    }
}

impl<B, RB> Service<Request<B>> for Failover<B, RB>
where
    B: Clone,
    RB: Body,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<B, RB>;

    /// Always ready: which target a request goes to is decided per request,
    /// and the chosen target's readiness is awaited in the response future
    /// (a target that is not ready never holds up the others).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        ResponseFuture::new(self.common.clone(), request)
    }
}
