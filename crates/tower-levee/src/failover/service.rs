//! The failover service.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::future::ResponseFuture;
use super::health::FailoverHandle;
use super::state::{Common, TargetService};
use crate::breaker::ResponseBody;
use crate::error::BoxError;

/// Sends each request to the first target that can take it, and on to the
/// next when one is throttled, out of quota, failing or rejects its key.
/// Built by [`Failover::builder`]; see the [module docs](super).
///
/// Clones share the targets' state; a clone copies the targets' services
/// (one allocation each) and makes its own ready copies the first time it
/// is polled ready, then calls them directly, so keep a clone per task (as
/// the retry layer above it does) rather than one per request.
pub struct Failover<B, RB: Body> {
    pub(crate) common: Arc<Common<B, RB>>,
    /// This clone's copies of the targets' services (made on first
    /// `poll_ready`), and which of them are polled ready.
    services: Vec<TargetService<B, RB>>,
    ready: u64,
}

impl<B, RB: Body> Failover<B, RB> {
    pub(crate) fn from_common(common: Arc<Common<B, RB>>) -> Self {
        Failover {
            common,
            services: Vec::new(),
            ready: 0,
        }
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
    /// The clone shares the targets' state; its requests count references
    /// on a copy of its own, so clones on different threads share no
    /// count that every call writes.
    fn clone(&self) -> Self {
        Failover::from_common(Arc::new((*self.common).clone()))
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

    /// Always ready: which target a request goes to is decided per request.
    /// This polls each target's service once, so that `call` can call a
    /// ready one directly; a target that is not ready (or whose service
    /// failed) never holds up the others: if chosen, a fresh copy of its
    /// service is readied in the response future.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.services.is_empty() {
            self.services = self
                .common
                .entries
                .iter()
                .map(|e| e.service.clone())
                .collect();
        }
        for (i, service) in self.services.iter_mut().enumerate() {
            if self.ready & (1 << i) != 0 {
                continue;
            }
            match service.poll_ready(cx) {
                Poll::Ready(Ok(())) => self.ready |= 1 << i,
                // A failed copy is replaced; the next poll tries the new one.
                Poll::Ready(Err(_)) => *service = self.common.entries[i].service.clone(),
                Poll::Pending => {}
            }
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        ResponseFuture::start(
            self.common.clone(),
            request,
            &mut self.services,
            &mut self.ready,
        )
    }
}
