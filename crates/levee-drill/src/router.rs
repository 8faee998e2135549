//! STAND-IN for `tower_levee::failover::Failover` (issue 5, being built on
//! branch `failover`): the levee stack's router until it lands on main.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use levee_core::classify::{Classification, Verdict};
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};
use tower_levee::BoxError;
use tower_levee::body::ResponseBody;
use tower_levee::breaker::Scope;
use tower_levee::retry::Deadline;

use crate::dialect::SimBody;
use crate::outcome::{rejection_kind, rejection_retry_after};
use crate::provider::TargetIndex;

/// One target's stack, boxed.
pub type TargetSvc = BoxCloneSyncService<Request<Bytes>, Response<ResponseBody<SimBody>>, BoxError>;

/// Which target served a response (set by the router).
#[derive(Clone, Copy, Debug)]
pub struct ServedBy(pub usize);

/// Set by the router when every target refused a request for different reasons.
#[derive(Clone, Debug, Default)]
pub struct NoTargetFlag(pub Arc<AtomicBool>);

/// STAND-IN for `tower_levee::failover::Failover` (issue 5), to be replaced
/// when it lands on main: sends to the first target whose layers admit the
/// request; when every target refuses and all only for throttling, waits
/// for the earliest reopen if it fits the caller's deadline.
#[derive(Clone)]
pub struct StandInRouter {
    pub(crate) targets: Arc<[(TargetSvc, Scope)]>,
}

impl std::fmt::Debug for StandInRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandInRouter")
            .field("targets", &self.targets.len())
            .finish()
    }
}

type RouterFuture =
    Pin<Box<dyn Future<Output = Result<Response<ResponseBody<SimBody>>, BoxError>> + Send>>;

impl Service<Request<Bytes>> for StandInRouter {
    type Response = Response<ResponseBody<SimBody>>;
    type Error = BoxError;
    type Future = RouterFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Bytes>) -> RouterFuture {
        let targets = self.targets.clone();
        let (parts, body) = req.into_parts();
        let deadline = parts.extensions.get::<Deadline>().copied();
        let flag = parts.extensions.get::<NoTargetFlag>().cloned();
        Box::pin(async move {
            for round in 1.. {
                let mut refusals: Vec<BoxError> = Vec::new();
                let mut last_429 = None;
                for (i, (svc, scope)) in targets.iter().enumerate() {
                    let mut r = Request::new(body.clone());
                    *r.method_mut() = parts.method.clone();
                    *r.uri_mut() = parts.uri.clone();
                    r.extensions_mut().insert(scope.clone());
                    r.extensions_mut().insert(TargetIndex(i));
                    match svc.clone().oneshot(r).await {
                        // A throttling 429 moves the request to the next
                        // target (seed 000): its gate is closed now anyway.
                        Ok(res) if is_throttled(&res) => last_429 = Some(res),
                        Ok(mut res) => {
                            res.extensions_mut().insert(ServedBy(i));
                            return Ok(res);
                        }
                        Err(e) if rejection_kind(&*e).is_some() => refusals.push(e),
                        Err(e) => return Err(e),
                    }
                }
                // Every target is only throttled: wait for the earliest
                // reopen when it fits the deadline (a fresh 429 closed its
                // gate just now: look again at once to learn its reopen).
                let only_throttled = refusals.iter().all(|e| e.is::<tower_levee::Throttled>());
                let wait = if last_429.is_some() {
                    Some(Duration::ZERO)
                } else {
                    refusals
                        .iter()
                        .filter_map(|e| rejection_retry_after(&**e))
                        .min()
                };
                if only_throttled
                    && round < MAX_ROUNDS
                    && let Some(wait) = wait
                    && deadline.is_none_or(|d| Instant::now() + wait <= d.0)
                {
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    continue;
                }
                if let Some(res) = last_429 {
                    return Ok(res);
                }
                let first = refusals.remove(0);
                let kind = rejection_kind(&*first);
                if refusals.iter().any(|e| rejection_kind(&**e) != kind)
                    && let Some(f) = &flag
                {
                    f.0.store(true, Ordering::Relaxed);
                }
                return Err(first);
            }
            unreachable!("the rounds are bounded")
        })
    }
}

/// Rounds of the stand-in router before it gives up waiting on throttles.
const MAX_ROUNDS: u32 = 20;

fn is_throttled<B>(res: &Response<B>) -> bool {
    res.extensions()
        .get::<Classification>()
        .is_some_and(|c| c.verdict == Verdict::Throttled)
}
