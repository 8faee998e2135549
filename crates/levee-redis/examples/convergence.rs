//! How fast the fleet converges: one replica is throttled, how long until
//! every other replica refuses the scope? Three replicas, each its own
//! breaker layer and Redis connection, against a `redis-server` this
//! example starts on a free loopback port.
//!
//! Run: `cargo run --release -p levee-redis --example convergence [-- N]`
//! (N transitions, default 200). Prints p50, p90, p99 and the worst.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response};
use levee_redis::{Fleet, FleetHandle, RedisStore};
use tower::{BoxError, ServiceExt};
use tower_levee::breaker::{BreakerLayer, EventSubscriber, Origin};

/// When each scope was adopted, per observing replica.
type Adopted = Arc<Mutex<HashMap<String, Instant>>>;

struct Observer {
    adopted: Adopted,
    _fleet: FleetHandle,
}

fn replica(url: &str, id: &str) -> (BreakerLayer, FleetHandle, Adopted) {
    let layer = BreakerLayer::new();
    let adopted: Adopted = Arc::default();
    let seen = adopted.clone();
    layer.handle().subscribe(EventSubscriber::new(move |e| {
        if e.origin() == Origin::Fleet {
            seen.lock()
                .unwrap()
                .insert(e.scope().to_owned(), Instant::now());
        }
    }));
    let fleet = Fleet::builder()
        .namespace("convergence")
        .replica(id)
        .attach(&layer.handle())
        .spawn(RedisStore::open(url).unwrap())
        .unwrap();
    (layer, fleet, adopted)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let transitions: usize = std::env::args().nth(1).map_or(Ok(200), |n| n.parse())?;
    let server = levee_redis::LocalRedis::start(None)?;
    let url = server.url();
    let (throttled, origin_fleet, _) = replica(&url, "origin");
    let observers: Vec<Observer> = (0..2)
        .map(|i| {
            let (_, fleet, adopted) = replica(&url, &format!("observer-{i}"));
            Observer {
                adopted,
                _fleet: fleet,
            }
        })
        .collect();
    while !(origin_fleet.status().connected
        && observers.iter().all(|o| o._fleet.status().connected))
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let upstream = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, BoxError>(
            Response::builder()
                .status(429)
                .header("retry-after", "30")
                .body(String::new())
                .unwrap(),
        )
    });
    let svc = tower::ServiceBuilder::new()
        .layer(throttled)
        .service(upstream);
    let mut samples = Vec::with_capacity(transitions);
    for i in 0..transitions {
        let scope = format!("acct-{i}.example");
        let req =
            Request::post(format!("https://{scope}/v1/chat/completions")).body(String::new())?;
        let started = Instant::now();
        let res = svc.clone().oneshot(req).await?;
        assert_eq!(res.status(), 429);
        let deadline = started + Duration::from_secs(5);
        let converged = loop {
            let times: Vec<Option<Instant>> = observers
                .iter()
                .map(|o| o.adopted.lock().unwrap().get(&scope).copied())
                .collect();
            if times.iter().all(Option::is_some) {
                break times.into_iter().flatten().max();
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        };
        match converged {
            Some(at) => samples.push(at.saturating_duration_since(started)),
            None => println!("transition {i}: not converged within 5 s"),
        }
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "fleet convergence over {} transitions (3 replicas, loopback redis-server): p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        samples[samples.len() - 1]
    );
    Ok(())
}
