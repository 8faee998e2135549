//! Two replicas of a service sharing a throttle through Redis: the first
//! is answered 429, the second refuses the same account without a call.
//! Starts its own `redis-server` on a free loopback port.
//!
//! Run: `cargo run -p levee-redis --example fleet`. The function below is
//! the README's "Running a fleet" code.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response};
use levee_redis::{BreakerPolicy, Fleet, FleetHandle, LocalRedis, RedisStore};
use tower::{BoxError, ServiceExt};
use tower_levee::breaker::{BreakerLayer, Throttled};

/// One replica's breaker layer, sharing its decisions with the fleet.
fn shared_breaker(url: &str, replica: &str) -> Result<(BreakerLayer, FleetHandle), BoxError> {
    let layer = BreakerLayer::new();
    let fleet = Fleet::builder()
        .namespace("chat-backend") // services sharing a Redis stay apart
        .replica(replica) // unique per replica: a pod name
        .policy(BreakerPolicy::Quorum(2)) // the default
        .attach(&layer.handle()) // or attach_named per failover target
        .spawn(RedisStore::open(url)?)?; // keep the handle alive
    Ok((layer, fleet))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let server = LocalRedis::start(None)?;
    let (a, fleet_a) = shared_breaker(&server.url(), "web-a")?;
    let (b, fleet_b) = shared_breaker(&server.url(), "web-b")?;
    while !(fleet_a.status().connected && fleet_b.status().connected) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Each replica's own upstream: OpenAI answers 429 with a 20 s wait.
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = {
        let calls = calls.clone();
        tower::service_fn(move |_req: Request<String>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                Ok::<_, BoxError>(
                    Response::builder()
                        .status(429)
                        .header("retry-after", "20")
                        .body(String::new())
                        .unwrap(),
                )
            }
        })
    };
    let req = || {
        Request::post("https://api.openai.com/v1/chat/completions")
            .body(r#"{"model":"gpt-4o"}"#.to_owned())
            .unwrap()
    };
    let replica_a = tower::ServiceBuilder::new()
        .layer(a)
        .service(upstream.clone());
    let replica_b = tower::ServiceBuilder::new().layer(b).service(upstream);

    let res = replica_a.oneshot(req()).await?;
    println!("web-a: {} from the provider", res.status());
    // The notice travels through Redis in well under a millisecond on
    // loopback: wait until web-b has it rather than race it.
    for _ in 0..1000 {
        if fleet_b.status().adopted > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let refused = replica_b
        .oneshot(req())
        .await
        .err()
        .filter(|e| e.is::<Throttled>());
    let refused = refused.ok_or("web-b never learned the throttle")?;
    println!("web-b: refused unsent: {refused}");
    println!(
        "provider calls: {} (web-b sent none); fleet: {:?}",
        calls.load(Ordering::SeqCst),
        fleet_b.status()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    Ok(())
}
