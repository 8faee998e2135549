//! A provider that answers each call with the next step of a script (the
//! last one repeats) and records when each call arrived: what the retry
//! tests drive, in paused time.
#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use levee_core::classify::Classification;
use tokio::time::Instant;
use tower::Service;

/// One scripted answer.
pub(crate) trait Answer: Clone + Send + Sync + 'static {
    /// The `n`-th call's answer (1 for the first).
    fn respond(&self, n: usize) -> Response<String>;
}

/// A status with the classification the breaker layer would attach.
impl Answer for (StatusCode, Option<Classification>) {
    fn respond(&self, _: usize) -> Response<String> {
        let mut response = Response::builder()
            .status(self.0)
            .body(String::new())
            .unwrap();
        if let Some(c) = &self.1 {
            response.extensions_mut().insert(c.clone());
        }
        response
    }
}

/// A status and a body, tagged `x-request-id: req-<n>`.
impl Answer for (u16, &'static str) {
    fn respond(&self, n: usize) -> Response<String> {
        Response::builder()
            .status(self.0)
            .header("x-request-id", format!("req-{n}"))
            .body(self.1.to_owned())
            .unwrap()
    }
}

#[derive(Clone)]
pub(crate) struct Provider<A> {
    calls: Arc<Mutex<Vec<Instant>>>,
    script: Arc<Vec<A>>,
}

impl<A: Answer> Provider<A> {
    pub(crate) fn new(script: Vec<A>) -> Self {
        Provider {
            calls: Arc::default(),
            script: Arc::new(script),
        }
    }

    /// When each call arrived.
    pub(crate) fn calls(&self) -> Vec<Instant> {
        self.calls.lock().unwrap().clone()
    }
}

impl<A: Answer> Service<Request<String>> for Provider<A> {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        let mut calls = self.calls.lock().unwrap();
        let step = &self.script[calls.len().min(self.script.len() - 1)];
        calls.push(Instant::now());
        std::future::ready(Ok(step.respond(calls.len())))
    }
}
