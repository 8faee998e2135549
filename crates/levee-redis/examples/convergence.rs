//! How fast the fleet converges, against a `redis-server` this example
//! starts on a free loopback port, each replica its own breaker layer and
//! Redis connection:
//! - a throttle: one replica is throttled, how long until two others
//!   refuse the scope;
//! - a probe's verdict: two replicas open on a dead domain, the one holding
//!   the fleet's probe lease finds it recovered; how long until the other
//!   admits calls;
//! - a probe lease given back: how long from its holder's release (and
//!   its `lease_freed` notice) until a waiting replica holds it, through
//!   the store calls the fleet makes;
//! - a probe lease whose holder is gone: how long from its holder's end
//!   until another replica may probe (the lease's life plus one ask).
//!
//! Run: `cargo run --release -p levee-redis --example convergence [-- N]`
//! (N throttles and lease handoffs, N/4 verdicts, N/20 lapses; default
//! 200). Prints p50, p90, p99 and the worst of each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response};
use levee_core::breaker::{BreakerConfig, Cooldown};
use levee_redis::{Fleet, FleetHandle, Kind, Lease, Notice, RedisStore, Space, Store};
use tower::{BoxError, ServiceExt};
use tower_levee::breaker::{BreakerLayer, EventSubscriber, Origin, RequestHead};

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
    report("throttle adopted by 2 replicas", samples);
    report(
        "probe verdict reaches the other replica",
        verdicts(&url, transitions / 4).await?,
    );
    report(
        "lease given back, taken by a waiting replica",
        handoffs(&url, transitions).await?,
    );
    report(
        "lease of a replica gone (life 200 ms), another may probe",
        lapses(&url, (transitions / 20).max(3)).await?,
    );
    Ok(())
}

fn report(what: &str, mut samples: Vec<Duration>) {
    if samples.is_empty() {
        println!("{what}: no sample");
        return;
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{what} over {} samples (loopback redis-server): p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        samples[samples.len() - 1]
    );
}

/// A replica whose breaker opens on one failure and cools off 100 ms, with
/// the fleet's probe lease (`lease` long).
fn prober(url: &str, id: &str, lease: Duration) -> Result<(BreakerLayer, FleetHandle), BoxError> {
    let config = BreakerConfig::builder()
        .threshold(1)
        .cooldown(Cooldown::fixed(Duration::from_millis(100)))
        .build()?;
    let layer = BreakerLayer::builder().breaker(config).build()?;
    let fleet = Fleet::builder()
        .namespace("convergence-probes")
        .replica(id)
        .probe_lease(Some(lease))
        .attach(&layer.handle())
        .spawn(RedisStore::open(url)?)?;
    Ok((layer, fleet))
}

/// One call to `scope` through `layer`, answered `status`: the status, or
/// `None` if the layer refused it.
async fn call(layer: &BreakerLayer, scope: &str, status: u16) -> Option<u16> {
    let upstream = tower::service_fn(move |_req: Request<String>| async move {
        let body = if status == 200 { r#"{"id":"x"}"# } else { "" };
        Ok::<_, BoxError>(
            Response::builder()
                .status(status)
                .body(body.to_owned())
                .unwrap(),
        )
    });
    let svc = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(upstream);
    let req = Request::post(format!("https://{scope}/v1/chat/completions"))
        .body(String::new())
        .unwrap();
    let res = svc.oneshot(req).await.ok()?;
    let status = res.status().as_u16();
    http_body_util::BodyExt::collect(res.into_body())
        .await
        .ok()?;
    Some(status)
}

fn admits(layer: &BreakerLayer, scope: &str) -> bool {
    let req = Request::post(format!("https://{scope}/v1/chat/completions"))
        .body(())
        .unwrap();
    layer.handle().admits(&RequestHead::of(&req)).is_ok()
}

async fn until(deadline: Duration, mut done: impl FnMut() -> bool) -> Option<Instant> {
    let end = Instant::now() + deadline;
    loop {
        if done() {
            return Some(Instant::now());
        }
        if Instant::now() > end {
            return None;
        }
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
}

async fn connected(fleets: &[&FleetHandle]) {
    while !fleets.iter().all(|f| f.status().connected) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Both replicas fail once on `scope` (each opens); once their cool-off
/// ends, which of them the fleet granted its probe: `Some(true)` for `a`,
/// `None` if neither was within 5 s.
async fn granted(a: &BreakerLayer, b: &BreakerLayer, scope: &str) -> Option<bool> {
    call(a, scope, 503).await;
    call(b, scope, 503).await;
    until(Duration::from_secs(5), || {
        admits(a, scope) || admits(b, scope)
    })
    .await?;
    Some(admits(a, scope))
}

/// Both replicas open on a dead scope; the one granted the fleet's probe
/// finds it recovered: until the other admits calls.
async fn verdicts(url: &str, n: usize) -> Result<Vec<Duration>, BoxError> {
    let (a, fa) = prober(url, "a", Duration::from_secs(2))?;
    let (b, fb) = prober(url, "b", Duration::from_secs(2))?;
    connected(&[&fa, &fb]).await;
    let mut samples = Vec::new();
    for i in 0..n {
        let scope = format!("verdict-{i}.example");
        let Some(a_probes) = granted(&a, &b, &scope).await else {
            println!("verdict {i}: no replica granted the probe within 5 s");
            continue;
        };
        let (prober, other) = if a_probes { (&a, &b) } else { (&b, &a) };
        if admits(other, &scope) {
            println!("verdict {i}: both replicas may probe");
            continue;
        }
        assert_eq!(call(prober, &scope, 200).await, Some(200));
        let recovered = Instant::now();
        match until(Duration::from_secs(5), || admits(other, &scope)).await {
            Some(at) => samples.push(at - recovered),
            None => println!("verdict {i}: not converged within 5 s"),
        }
    }
    Ok(samples)
}

/// The fleet's lease protocol over two connections: the holder releases
/// and says so; the waiter, hearing it, takes the lease.
async fn handoffs(url: &str, n: usize) -> Result<Vec<Duration>, BoxError> {
    let (holder, waiter) = (RedisStore::open(url)?, RedisStore::open(url)?);
    let space = Space::new("handoff:s:", "handoff:notices", "handoff:index");
    let mut notices = waiter.listen(&space).await?;
    let ttl = Duration::from_secs(2);
    let mut samples = Vec::new();
    for i in 0..n {
        let key = format!("handoff:lease::scope-{i}");
        assert_eq!(holder.lease(&key, "holder", ttl).await?, Lease::Taken);
        assert!(matches!(
            waiter.lease(&key, "waiter", ttl).await?,
            Lease::Held { .. }
        ));
        let freed = Notice::lease_freed("", &format!("scope-{i}"), "holder");
        let started = Instant::now();
        holder.release(&key, "holder", None).await?;
        holder.remove(&space, &[], &freed.encode()).await?;
        let heard = notices.recv().await.ok_or("the subscription ended")?;
        assert_eq!(Notice::decode(&heard)?.kind, Kind::LeaseFreed);
        assert_eq!(waiter.lease(&key, "waiter", ttl).await?, Lease::Taken);
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// A replica granted the probe goes away before sending it: until
/// another replica admits a call (its probe).
async fn lapses(url: &str, n: usize) -> Result<Vec<Duration>, BoxError> {
    let lease = Duration::from_millis(200);
    let mut samples = Vec::new();
    for i in 0..n {
        let scope = format!("lapse-{i}.example");
        let (a, fa) = prober(url, &format!("a{i}"), lease)?;
        let (b, fb) = prober(url, &format!("b{i}"), lease)?;
        connected(&[&fa, &fb]).await;
        let Some(a_probes) = granted(&a, &b, &scope).await else {
            println!("lapse {i}: no replica granted the probe within 5 s");
            continue;
        };
        let (gone, gone_fleet, other, other_fleet) = if a_probes {
            (a, fa, b, fb)
        } else {
            (b, fb, a, fa)
        };
        drop(gone_fleet);
        drop(gone);
        let left = Instant::now();
        match until(Duration::from_secs(5), || admits(&other, &scope)).await {
            Some(at) => samples.push(at - left),
            None => println!("lapse {i}: no takeover within 5 s"),
        }
        drop(other_fleet);
    }
    Ok(samples)
}
