//! The `tower-resilience` stack: tower-resilience 0.13's `RetryLayer` over
//! a failover across accounts, each behind its own `CircuitBreakerLayer`.
//!
//! Configured as the crate's documentation shows
//! (<https://docs.rs/tower-resilience-circuitbreaker/0.13.0>,
//! <https://docs.rs/tower-resilience/0.13.0/tower_resilience/patterns/retry/>):
//!
//! - **Circuit breaker**: the builder's defaults (the values of its first
//!   example): open when at least 50% of the last 100 calls failed (after
//!   100 calls), stay open 30 s, then one half-open call. What counts is
//!   what its docs classify for HTTP-like responses,
//!   `response.status() >= 500`, plus every `Err` (its default: transport
//!   errors, a stream that failed after its 200). So a 429 does *not*
//!   count, and neither does a 401: a user following these docs never
//!   opens on a revoked key.
//! - **Retry**: `max_attempts(3)` with `exponential_backoff(100 ms)` (×2),
//!   as its retry example; it retries 5xx and 429 answers and transport
//!   errors (its docs' "only retry 5xx, network errors" and "429 responses"
//!   cases), not an open circuit. Its backoff does not read `Retry-After`.
//! - **Failover**: the crate has none; the stack tries the accounts in
//!   order and moves on only when a breaker refuses
//!   (`CircuitBreakerError::OpenCircuit`), as `naive` does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_levee::BoxError;
use tower_resilience::circuitbreaker::{
    CircuitBreaker, CircuitBreakerError, CircuitBreakerLayer, CircuitState, FailureClassifier,
};
use tower_resilience::retry::{Retry, RetryLayer};

use super::TransitionLog;
use crate::dialect::SimBody;
use crate::outcome::{Fail, TransitionRecord, is_timeout, read_failure};
use crate::provider::{Provider, StreamCheck, TargetIndex, TargetService};
use crate::scenario::Scenario;

/// One account behind tower-resilience's circuit breaker.
pub type AccountBreaker = CircuitBreaker<StreamCheck<TargetService>, ServerErrors>;

/// A refusal or the last error: tower-resilience's own error type.
pub type StackError = CircuitBreakerError<BoxError>;

/// The whole stack: the crate's `Retry` over [`FirstAdmitted`].
pub type Stack = Retry<FirstAdmitted, ChatRequest, Response<SimBody>, StackError>;

/// The request the retry layer resends (it needs `Clone`, which
/// `http::Request` is not); each attempt builds its HTTP request.
#[derive(Clone, Copy, Debug)]
pub struct ChatRequest;

/// Counts as a failure what the crate's docs count for HTTP responses,
/// `status() >= 500`, and any error (its default). A named classifier
/// (`failure_classifier_type`) rather than a closure, so the stack's type
/// can be written down.
#[derive(Clone, Copy, Debug)]
pub struct ServerErrors;

impl FailureClassifier<Response<SimBody>, BoxError> for ServerErrors {
    fn classify(&self, answer: &Result<Response<SimBody>, BoxError>) -> bool {
        match answer {
            Ok(res) => res.status().is_server_error(),
            Err(_) => true,
        }
    }
}

fn state_name(state: CircuitState) -> &'static str {
    match state {
        CircuitState::Closed => "closed",
        CircuitState::Open => "open",
        CircuitState::HalfOpen => "half_open",
    }
}

/// Each attempt goes to the first account whose breaker admits it.
#[derive(Clone)]
pub struct FirstAdmitted {
    breakers: Vec<AccountBreaker>,
}

impl std::fmt::Debug for FirstAdmitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstAdmitted")
            .field("accounts", &self.breakers.len())
            .finish()
    }
}

impl Service<ChatRequest> for FirstAdmitted {
    type Response = Response<SimBody>;
    type Error = StackError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<SimBody>, StackError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StackError>> {
        // Each breaker is readied on its own in `call`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: ChatRequest) -> Self::Future {
        let breakers = self.breakers.clone();
        Box::pin(async move {
            for (i, breaker) in breakers.into_iter().enumerate() {
                let req = Request::post("/v1/chat/completions").body(Bytes::new());
                let req = req.map_err(|e| CircuitBreakerError::Inner(e.into()))?;
                match breaker.oneshot(req).await {
                    Err(CircuitBreakerError::OpenCircuit) => continue,
                    Ok(mut res) => {
                        res.extensions_mut().insert(TargetIndex(i));
                        return Ok(res);
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(CircuitBreakerError::OpenCircuit)
        })
    }
}

/// The `tower-resilience` stack of one run (of one replica).
pub struct TowerResilienceStack {
    svc: Stack,
    log: TransitionLog,
}

impl std::fmt::Debug for TowerResilienceStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TowerResilienceStack")
            .finish_non_exhaustive()
    }
}

impl TowerResilienceStack {
    /// Builds the stack over `provider`'s targets.
    pub fn new(sc: &Scenario, provider: &Provider, start: Instant) -> Result<Self, BoxError> {
        let log = TransitionLog::new(start);
        let mut breakers = Vec::with_capacity(sc.targets.len());
        for (i, target) in sc.targets.iter().enumerate() {
            let (name, log) = (target.name.clone(), log.clone());
            let layer = CircuitBreakerLayer::builder()
                .name(target.name.clone())
                .failure_classifier_type(ServerErrors)
                .on_state_transition(move |from, to| {
                    log.breaker(&name, state_name(from), state_name(to), "tower-resilience");
                })
                .build()
                .map_err(|e| format!("tower-resilience circuit breaker: {e}"))?;
            breakers.push(layer.layer(StreamCheck(provider.target(i))));
        }
        let retry = RetryLayer::<ChatRequest, Response<SimBody>, StackError>::builder()
            .max_attempts(3)
            .exponential_backoff(Duration::from_millis(100))
            .retry_on(|e: &StackError| matches!(e, CircuitBreakerError::Inner(_)))
            .retry_on_response(|res: &Response<SimBody>| {
                res.status() == http::StatusCode::TOO_MANY_REQUESTS
                    || res.status().is_server_error()
            })
            .build();
        Ok(TowerResilienceStack {
            svc: retry.layer(FirstAdmitted { breakers }),
            log,
        })
    }

    /// The stack as a tower service: the crate's `Retry`.
    pub fn service(&self) -> &Stack {
        &self.svc
    }

    /// Each account's breaker, in the scenario's order (shared with the stack).
    pub fn breakers(&self) -> &[AccountBreaker] {
        &self.svc.get_ref().breakers
    }

    /// The breakers' transitions so far.
    pub fn transitions(&self) -> Vec<TransitionRecord> {
        self.log.records()
    }

    /// One request through the stack (the caller's deadline is the runner's).
    pub async fn call(&self) -> Result<usize, Fail> {
        match self.svc.clone().oneshot(ChatRequest).await {
            Ok(res) if res.status().is_success() => {
                Ok(res.extensions().get::<TargetIndex>().map_or(0, |t| t.0))
            }
            Ok(res) => Err(read_failure(res).await),
            Err(CircuitBreakerError::OpenCircuit) => Err(Fail::CircuitOpen),
            Err(CircuitBreakerError::Inner(e)) if is_timeout(&*e) => Err(Fail::Timeout),
            Err(CircuitBreakerError::Inner(_)) => Err(Fail::Upstream),
        }
    }
}
