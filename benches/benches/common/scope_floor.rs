//! The least a breaker keyed by the provider's scope can do on a closed
//! call's success, as a reference for what Levee's `Breaker` costs over a
//! breaker with one state for everything (failsafe): find the request's
//! failure domain from its URI (the clone's last one compared inline, a
//! shared map on a miss), read whether anything is gated and whether the
//! domain is open, call, and on the answer tell a stream from a plain
//! response by its head and write nothing when a success changes nothing.
//! The body is wrapped, as a breaker that watches streams must wrap it.
//!
//! No tracker, no probe slot, no pacing, no latency estimate, no per-model
//! settings, no soft-failure hook, no events: not a breaker, a floor.
//! Shared by the criterion benches and the instruction counts (`percall`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use http::{Request, Response, header};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tower::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One failure domain's state: whether it is open, and its failures in a
/// row. Leaked, as Levee's are pooled, so a call holds no reference count.
#[derive(Debug, Default)]
struct Domain {
    open: AtomicBool,
    failures: AtomicU32,
}

/// What every clone shares: the domains by authority, and whether any scope
/// is gated.
#[derive(Debug, Default)]
struct Domains {
    by_authority: Mutex<HashMap<String, &'static Domain>>,
    any_gated: AtomicBool,
}

/// The clone's last domain, and the URI it was found by.
#[derive(Clone, Debug)]
struct Cached {
    authority: String,
    path: String,
    domain: &'static Domain,
}

/// A breaker keyed by scope, cut to what its closed success path must do.
#[derive(Clone, Debug)]
pub struct ScopeFloor<S> {
    inner: S,
    domains: Arc<Domains>,
    cached: Option<Cached>,
}

impl<S> ScopeFloor<S> {
    /// `inner` behind the floor.
    pub fn new(inner: S) -> Self {
        ScopeFloor {
            inner,
            domains: Arc::default(),
            cached: None,
        }
    }

    fn domain(&mut self, authority: &str, path: &str) -> &'static Domain {
        if let Some(c) = &self.cached
            && c.authority == authority
            && c.path == path
        {
            return c.domain;
        }
        let mut map = self.domains.by_authority.lock().unwrap();
        let domain = *map
            .entry(authority.to_owned())
            .or_insert_with(|| Box::leak(Box::default()));
        self.cached = Some(Cached {
            authority: authority.to_owned(),
            path: path.to_owned(),
            domain,
        });
        domain
    }
}

/// The breaker refused the call.
#[derive(Debug)]
pub struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Refused {}

impl<S, B, RB> Service<Request<B>> for ScopeFloor<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
{
    type Response = Response<FloorBody<RB>>;
    type Error = BoxError;
    type Future = FloorFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let uri = request.uri();
        let authority = uri.authority().map_or("default", |a| a.as_str());
        let domain = self.domain(authority, uri.path());
        if self.domains.any_gated.load(Ordering::Relaxed) || domain.open.load(Ordering::Acquire) {
            return FloorFuture::Refused;
        }
        FloorFuture::Calling {
            future: self.inner.call(request),
            domain,
        }
    }
}

pin_project! {
    /// The inner future and the domain its outcome goes to.
    #[project = FloorProj]
    pub enum FloorFuture<F> {
        Calling { #[pin] future: F, domain: &'static Domain },
        Refused,
    }
}

impl<F, RB, E> Future for FloorFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<FloorBody<RB>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (future, domain) = match self.project() {
            FloorProj::Calling { future, domain } => (future, *domain),
            FloorProj::Refused => return Poll::Ready(Err(Box::new(Refused))),
        };
        let response = match ready!(future.poll(cx)) {
            Ok(response) => response,
            Err(e) => {
                domain.failures.fetch_add(1, Ordering::Relaxed);
                return Poll::Ready(Err(e.into()));
            }
        };
        let stream = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if stream {
            return Poll::Ready(Ok(response.map(|body| FloorBody::Watched { body, domain })));
        }
        if response.status().is_success() {
            if domain.failures.load(Ordering::Relaxed) != 0 {
                domain.failures.store(0, Ordering::Relaxed);
            }
        } else {
            domain.failures.fetch_add(1, Ordering::Relaxed);
        }
        Poll::Ready(Ok(response.map(|body| FloorBody::Plain { body })))
    }
}

pin_project! {
    /// A body as it came, or a stream whose end the domain hears of.
    #[project = FloorBodyProj]
    pub enum FloorBody<B> {
        Plain { #[pin] body: B },
        Watched { #[pin] body: B, domain: &'static Domain },
    }
}

impl<B: Body> Body for FloorBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.project() {
            FloorBodyProj::Plain { body } => body.poll_frame(cx),
            FloorBodyProj::Watched { body, domain } => {
                let frame = ready!(body.poll_frame(cx));
                if matches!(frame, Some(Err(_))) {
                    domain.failures.fetch_add(1, Ordering::Relaxed);
                }
                Poll::Ready(frame)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            FloorBody::Plain { body } | FloorBody::Watched { body, .. } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            FloorBody::Plain { body } | FloorBody::Watched { body, .. } => body.size_hint(),
        }
    }
}
