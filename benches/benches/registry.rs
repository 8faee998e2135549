//! A storm of new scopes: 5,000 calls, each to a failure domain not seen
//! before, each answered 503 (so every domain is busy and none can be
//! evicted). Below the cap (room for all) and above it (the cap reached by
//! 1,000 busy domains first): the per-key cost should be the same.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::time::Duration;

use bytes::Bytes;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::Full;
use tower::{Layer, Service, ServiceExt};
use tower_levee::BreakerLayer;

const NEW_KEYS: usize = 5_000;

fn unavailable(_: Request<()>) -> Ready<Result<Response<Full<Bytes>>, Infallible>> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"{}")));
    *res.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    ready(Ok(res))
}

fn call_to(host: &str) -> Request<()> {
    let mut req = Request::new(());
    *req.uri_mut() = format!("https://{host}/v1/chat/completions")
        .parse()
        .unwrap();
    req
}

async fn storm<S>(svc: &mut S, prefix: &str)
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    for i in 0..NEW_KEYS {
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(call_to(&format!("{prefix}{i}.example")))
            .await;
        std::hint::black_box(res.is_ok());
    }
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("registry");
    group.sample_size(10);
    for (name, max_keys, prefill) in [("below_cap", 100_000, 0), ("above_cap", 1_000, 1_000)] {
        group.bench_function(format!("{NEW_KEYS}_new_busy_domains/{name}"), |b| {
            b.iter_batched(
                || {
                    let layer = BreakerLayer::builder().max_keys(max_keys).build().unwrap();
                    let mut svc = layer.layer(tower::service_fn(unavailable));
                    rt.block_on(async {
                        for i in 0..prefill {
                            let req = call_to(&format!("old{i}.example"));
                            let _ = svc.ready().await.unwrap().call(req).await;
                        }
                    });
                    svc
                },
                |mut svc| rt.block_on(storm(&mut svc, "new")),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = group;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    targets = benches
}
criterion_main!(group);
