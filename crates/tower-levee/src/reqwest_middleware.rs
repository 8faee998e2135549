//! Levee's breaker, throttle gate and park as a
//! [reqwest-middleware](https://docs.rs/reqwest-middleware) middleware
//! (feature `reqwest-middleware`), for code that takes a
//! `ClientWithMiddleware`, such as rig.
//!
//! One engine, two front doors: [`LeveeMiddleware`] runs each request
//! through a [`BreakerLayer`]'s own service, so the verdicts, the scopes,
//! the [`BreakerHandle`], the events and the metrics are the layer's. A
//! refused request never reaches the rest of the chain.
//!
//! ```no_run
//! use reqwest_middleware::ClientBuilder;
//! use tower_levee::breaker::{BreakerLayer, Throttled};
//! use tower_levee::reqwest_middleware::LeveeMiddleware;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let levee = LeveeMiddleware::new(BreakerLayer::new());
//! let health = levee.handle();
//! let client = ClientBuilder::new(reqwest::Client::new()).with(levee).build();
//! match client.post("https://api.openai.com/v1/chat/completions").send().await {
//!     Err(reqwest_middleware::Error::Middleware(e)) if e.is::<Throttled>() => {
//!         println!("throttled: refused unsent");
//!     }
//!     other => println!("{:?}", other.map(|r| r.status())),
//! }
//! println!("{:?}", health.states());
//! # Ok(())
//! # }
//! ```
//!
//! A Levee refusal comes back as `reqwest_middleware::Error::Middleware`,
//! an `anyhow::Error` holding the Levee error itself (`e.is::<T>()`,
//! `e.downcast_ref::<T>()`); an error of the rest of the chain comes back
//! as it was. Put it first in the chain, so that a refusal costs nothing
//! after it.
//!
//! The middleware is the breaker layer only: the retry budget and the
//! bulkhead are not offered as middleware (yet). For those, use the tower
//! stack over [`HttpClient`](crate::reqwest::HttpClient).

use std::fmt;
use std::future::{Future, ready};
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Extensions;
use http_body_util::{BodyDataStream, BodyExt};
use reqwest_middleware::{Error, Middleware, Next, Result};
use tower::{Layer, ServiceExt};
use tower_service::Service;

use crate::BoxError;
use crate::breaker::scope::{is_json, model_of_json};
use crate::breaker::{BreakerHandle, BreakerLayer, CircuitOpen, Parked, Scope, Throttled};

/// The breaker, gate and park of one [`BreakerLayer`] as a reqwest
/// middleware. See the [module docs](self).
#[derive(Clone)]
pub struct LeveeMiddleware {
    layer: BreakerLayer,
}

impl LeveeMiddleware {
    /// Checks every request with `layer`'s state (shared with every other
    /// service the layer made).
    pub fn new(layer: BreakerLayer) -> Self {
        LeveeMiddleware { layer }
    }

    /// The layer's handle: health, admission checks, manual control.
    pub fn handle(&self) -> BreakerHandle {
        self.layer.handle()
    }
}

impl fmt::Debug for LeveeMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeveeMiddleware").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Middleware for LeveeMiddleware {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<reqwest::Response> {
        let mut req: http::Request<reqwest::Body> = req.try_into()?;
        // The scopes: a `Scope` the caller put in the chain's extensions,
        // else the model a JSON body names (an event then names it, and a
        // 429 gates that model's quota scope).
        if req.extensions().get::<Scope>().is_none() {
            let scope = extensions.get::<Scope>().cloned().or_else(|| {
                let body = req.body().as_bytes().filter(|_| is_json(req.headers()))?;
                Some(Scope::new().model(model_of_json(body)?))
            });
            if let Some(scope) = scope {
                req.extensions_mut().insert(scope);
            }
        }
        let rest = Rest {
            chain: Some((next, extensions)),
        };
        match self.layer.layer(rest).oneshot(req).await {
            Ok(res) => Ok(reqwest::Response::from(res.map(|body| {
                reqwest::Body::wrap_stream(BodyDataStream::new(
                    body.map_err(Into::<BoxError>::into),
                ))
            }))),
            Err(e) => Err(match e.downcast::<Error>() {
                Ok(chain) => *chain,
                Err(levee) => Error::Middleware(refusal(levee)),
            }),
        }
    }
}

/// A Levee error as an `anyhow::Error` that `is::<T>()` its own type (a
/// boxed error would only be `is::<Box<dyn Error>>`).
fn refusal(e: BoxError) -> anyhow::Error {
    let e = match e.downcast::<CircuitOpen>() {
        Ok(e) => return anyhow::Error::new(*e),
        Err(e) => e,
    };
    let e = match e.downcast::<Throttled>() {
        Ok(e) => return anyhow::Error::new(*e),
        Err(e) => e,
    };
    match e.downcast::<Parked>() {
        Ok(e) => anyhow::Error::new(*e),
        Err(e) => anyhow::Error::from_boxed(e),
    }
}

/// The rest of the middleware chain, as the one-call service the breaker
/// wraps.
struct Rest<'a> {
    chain: Option<(Next<'a>, &'a mut Extensions)>,
}

type RestFuture<'a> = Pin<
    Box<
        dyn Future<Output = std::result::Result<http::Response<reqwest::Body>, BoxError>>
            + Send
            + 'a,
    >,
>;

impl<'a> Service<http::Request<reqwest::Body>> for Rest<'a> {
    type Response = http::Response<reqwest::Body>;
    type Error = BoxError;
    type Future = RestFuture<'a>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<reqwest::Body>) -> RestFuture<'a> {
        let Some((next, extensions)) = self.chain.take() else {
            return Box::pin(ready(Err("the rest of the chain runs once".into())));
        };
        Box::pin(async move {
            let req = reqwest::Request::try_from(req)?;
            let res = next.run(req, extensions).await?;
            Ok(http::Response::from(res))
        })
    }
}
