//! The failover service.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Buf;
use http::{Request, Response};
use http_body::Body;
use levee_core::classify::{Classify, ProviderClassifier};
use tower_service::Service;

use super::future::{ResponseFuture, TargetCopy};
use super::health::FailoverHandle;
use super::stack::TargetService;
use super::state::Common;
use super::target::BoxTargetService;
use crate::breaker::{PeekMemo, ResponseBody};
use crate::error::BoxError;

/// Sends each request to the first target that can take it, and on to the
/// next when one is throttled, out of quota, failing or rejects its key.
/// Built by [`Failover::builder`]; see the [module docs](super).
///
/// Every target calls the same service type `S` (through a breaker
/// classifying with `C`), so a call allocates nothing: each target's future
/// lives inside the failover's. Targets over different service types (a
/// hyper client for one provider, a reqwest one for another) are made one
/// type with [`Target::boxed`](super::Target::boxed), at one allocation per
/// call; `S` then defaults to the boxed type, [`BoxTargetService`].
///
/// Clones share the targets' state; a clone copies the targets' services
/// and makes its own ready copies the first time it is polled ready, then
/// calls them directly, so keep a clone per task (as the retry layer above
/// it does) rather than one per request.
pub struct Failover<B, RB, S = BoxTargetService<B, RB>, C = ProviderClassifier> {
    pub(crate) common: Arc<Common<B, TargetService<S, C>>>,
    /// This clone's copies of the targets' services, with its memo of its
    /// last peek at each (made on first `poll_ready`, in one allocation),
    /// and which of them are polled ready.
    copies: Vec<TargetCopy<TargetService<S, C>>>,
    ready: u64,
    _body: PhantomData<fn() -> RB>,
}

impl<B, RB, S, C> Failover<B, RB, S, C> {
    pub(crate) fn from_common(common: Arc<Common<B, TargetService<S, C>>>) -> Self {
        Failover {
            common,
            copies: Vec::new(),
            ready: 0,
            _body: PhantomData,
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

impl<B, RB, S: Clone, C: Clone> Clone for Failover<B, RB, S, C> {
    /// The clone shares the targets' state; its requests count references
    /// on a copy of its own, so clones on different threads share no
    /// count that every call writes.
    fn clone(&self) -> Self {
        Failover::from_common(Arc::new((*self.common).clone()))
    }
}

impl<B, RB, S, C> fmt::Debug for Failover<B, RB, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.common.meta, f)
    }
}

impl<B, RB, S, C> Service<Request<B>> for Failover<B, RB, S, C>
where
    B: Clone,
    S: Service<Request<B>, Response = Response<RB>> + Clone,
    S::Error: Into<BoxError>,
    RB: Body,
    RB::Data: Buf + 'static,
    RB::Error: Into<BoxError>,
    C: Classify + Clone,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<B, RB, TargetService<S, C>>;

    /// Always ready: which target a request goes to is decided per request.
    /// This polls each target's service once, so that `call` can call a
    /// ready one directly; a target that is not ready (or whose service
    /// failed) never holds up the others: if chosen, a fresh copy of its
    /// service is readied in the response future.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.copies.is_empty() {
            self.copies = self
                .common
                .entries
                .iter()
                .map(|e| TargetCopy {
                    service: e.service.clone(),
                    memo: PeekMemo::default(),
                })
                .collect();
        }
        for (i, copy) in self.copies.iter_mut().enumerate() {
            if self.ready & (1 << i) != 0 {
                continue;
            }
            match copy.service.poll_ready(cx) {
                Poll::Ready(Ok(())) => self.ready |= 1 << i,
                // A failed copy is replaced; the next poll tries the new one.
                Poll::Ready(Err(_)) => copy.service = self.common.entries[i].service.clone(),
                Poll::Pending => {}
            }
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        ResponseFuture::start(
            self.common.clone(),
            request,
            &mut self.copies,
            &mut self.ready,
        )
    }
}
