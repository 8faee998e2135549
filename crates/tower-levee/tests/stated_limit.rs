//! A provider that reports no limits in headers may state one in its 429
//! (Gemini's `QuotaFailure` names the per-minute request quota it hit,
//! with its value): the breaker layer spreads the scope's calls at that
//! rate from then on, as at a rate its headers report, refusing the rest
//! unsent (`Throttled`, reason `paced`); a fleet's replica at its share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use levee_core::pace::PaceConfig;
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::BreakerLayer;
use tower_levee::breaker::{FleetUpdate, ScopeEvent, Throttled};

/// Gemini's answer to a request over its per-minute quota of 600, with no
/// rate-limit header.
const RESOURCE_EXHAUSTED: &str = r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_paid_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"},"quotaValue":"600"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}]}}"#;

/// What the provider answered.
#[derive(Default)]
struct Counts {
    served: AtomicU64,
    throttled: AtomicU64,
}

/// An account admitting 600 requests a minute, enforced per second (a
/// bucket of 10 refilled continuously), that answers `429` past it.
fn provider(
    counts: Arc<Counts>,
) -> impl Service<Request<String>, Response = Response<String>, Error = BoxError, Future: Send> + Clone
{
    let bucket = Arc::new(Mutex::new((10.0f64, Instant::now())));
    tower::service_fn(move |_req: Request<String>| {
        let admitted = {
            let mut b = bucket.lock().unwrap();
            let now = Instant::now();
            b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * 10.0).min(10.0);
            b.1 = now;
            let ok = b.0 >= 1.0;
            if ok {
                b.0 -= 1.0;
            }
            ok
        };
        let (status, body) = if admitted {
            counts.served.fetch_add(1, Ordering::SeqCst);
            (200, r#"{"candidates":[]}"#)
        } else {
            counts.throttled.fetch_add(1, Ordering::SeqCst);
            (429, RESOURCE_EXHAUSTED)
        };
        async move {
            Ok::<_, BoxError>(
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(body.to_owned())
                    .unwrap(),
            )
        }
    })
}

fn request() -> Request<String> {
    Request::post(
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent",
    )
    .body(String::new())
    .unwrap()
}

/// A layer with `pace`, and how many times it paced a scope (its gate
/// closed with the reason `paced`, not by a 429).
fn layer(pace: PaceConfig) -> (BreakerLayer, Arc<AtomicU64>) {
    let paced = Arc::new(AtomicU64::new(0));
    let count = paced.clone();
    let layer = BreakerLayer::builder()
        .pace(pace)
        .on_event(move |e: &ScopeEvent| {
            if e.reason().starts_with("paced for") {
                count.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    (layer, paced)
}

/// Sends `n` calls 50 ms apart (20 a second, twice what the account
/// admits), each body read to its end; returns how many were refused
/// unsent.
async fn send_at_twice_the_rate<S>(svc: &S, n: u64) -> u64
where
    S: Service<Request<String>, Error = BoxError> + Clone,
    S::Response: Into<Response<tower_levee::body::ResponseBody<String>>>,
{
    let mut refused = 0;
    for _ in 0..n {
        match svc.clone().oneshot(request()).await {
            Ok(res) => {
                let res: Response<_> = res.into();
                res.into_body().collect().await.unwrap();
            }
            Err(e) => {
                assert!(e.is::<Throttled>(), "refused: Throttled, not {e}");
                refused += 1;
            }
        }
        tokio::time::advance(Duration::from_millis(50)).await;
    }
    refused
}

#[tokio::test(start_paused = true)]
async fn a_429_that_states_its_quota_spreads_the_scope_at_it() {
    let counts = Arc::new(Counts::default());
    let (breaker, paced) = layer(PaceConfig::default());
    let svc = breaker.layer(provider(counts.clone()));
    // The first burst meets the quota once: its 429 says 600 a minute.
    send_at_twice_the_rate(&svc, 40).await;
    let first = counts.throttled.load(Ordering::SeqCst);
    assert!(first >= 1, "the quota is met");
    // From then on, 10 a second with a second's burst: the account admits
    // every call sent, and the rest are refused unsent.
    let refused = send_at_twice_the_rate(&svc, 400).await;
    assert_eq!(
        counts.throttled.load(Ordering::SeqCst),
        first,
        "no more 429s"
    );
    assert!(refused >= 190, "{refused} refused unsent");
    assert!(paced.load(Ordering::SeqCst) >= 150);
    assert!(counts.served.load(Ordering::SeqCst) >= 200);
}

#[tokio::test(start_paused = true)]
async fn a_replica_of_a_fleet_spreads_at_its_share_of_the_stated_quota() {
    let counts = Arc::new(Counts::default());
    let (breaker, _) = layer(PaceConfig::default());
    let handle = breaker.handle();
    let svc = breaker.layer(provider(counts.clone()));
    // Two replicas: 5 a second each.
    handle.adopt(FleetUpdate::Replicas { count: 2 });
    send_at_twice_the_rate(&svc, 40).await;
    let served = counts.served.load(Ordering::SeqCst);
    send_at_twice_the_rate(&svc, 200).await;
    let served = counts.served.load(Ordering::SeqCst) - served;
    // 10 s at 5 a second, and a second's burst of 5.
    assert!((48..=56).contains(&served), "{served} served in 10 s");
}

#[tokio::test(start_paused = true)]
async fn without_spreading_the_stated_quota_is_left_to_the_gate() {
    let counts = Arc::new(Counts::default());
    let (breaker, paced) = layer(PaceConfig::builder().spread(false).build().unwrap());
    let svc = breaker.layer(provider(counts.clone()));
    send_at_twice_the_rate(&svc, 40).await;
    let first = counts.throttled.load(Ordering::SeqCst);
    send_at_twice_the_rate(&svc, 400).await;
    // Each reopened gate meets a bucket the last burst emptied.
    assert!(counts.throttled.load(Ordering::SeqCst) - first >= 8);
    assert_eq!(paced.load(Ordering::SeqCst), 0);
}
