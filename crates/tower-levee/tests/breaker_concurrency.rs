//! Probe admission under real concurrency: many threads racing into a
//! half-open breaker never get more probes out than configured.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use http::{Request, Response};
use levee_core::breaker::{BreakerConfig, Cooldown};
use tower::{Service, ServiceExt};
use tower_levee::breaker::{BreakerLayer, CircuitOpen};

#[derive(Clone)]
struct Hanging(Arc<AtomicUsize>);

impl Service<Request<()>> for Hanging {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = std::future::Pending<Result<Response<String>, Infallible>>;
    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::pending()
    }
}

#[test]
fn racing_callers_never_exceed_the_half_open_probes() {
    for round in 0..20 {
        let calls = Arc::new(AtomicUsize::new(0));
        let config = BreakerConfig::builder()
            .half_open_probes(3)
            .cooldown(Cooldown::Custom(Arc::new(|_| Duration::ZERO)))
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        let refused = rt.block_on(async {
            let layer = BreakerLayer::builder().breaker(config).build().unwrap();
            layer.handle().open("api.openai.com");
            let svc = tower::Layer::layer(&layer, Hanging(calls.clone()));
            let start = Arc::new(tokio::sync::Barrier::new(64));
            let end = Arc::new(tokio::sync::Barrier::new(64));
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let mut svc = svc.clone();
                    let (start, end) = (start.clone(), end.clone());
                    tokio::spawn(async move {
                        start.wait().await;
                        let req = Request::get("https://api.openai.com/v1/responses")
                            .body(())
                            .unwrap();
                        let mut fut = Box::pin(svc.ready().await.unwrap().call(req));
                        let first =
                            std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
                        let refused =
                            matches!(first, Poll::Ready(Err(ref e)) if e.is::<CircuitOpen>());
                        // Hold every probe until all callers have tried: a
                        // dropped probe would hand its slot back.
                        end.wait().await;
                        refused
                    })
                })
                .collect();
            let mut refused = 0;
            for t in tasks {
                refused += usize::from(t.await.unwrap());
            }
            refused
        });
        let probes = calls.load(Ordering::SeqCst);
        assert_eq!(probes, 3, "round {round}: {probes} probes went out");
        assert_eq!(refused, 61, "round {round}");
    }
}
