//! Every request ends in exactly one answer, and a cancelled request leaves
//! nothing behind: paused time, scripted targets.

mod failover_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Request;
use tokio_test::{assert_pending, task};
use tower::{BoxError, ServiceExt};
use tower_levee::breaker::{CircuitOpen, Parked, RequestHead, Throttled};
use tower_levee::bulkhead::BulkheadFull;
use tower_levee::failover::{Failover, NoTargetAvailable, ServedBy, Target};

use failover_support::{QUOTA_BODY, Reply1, Scripted, breaker, req, response};

const GATE: Duration = Duration::from_millis(500);
const PARK: Duration = Duration::from_secs(20);

/// A transport error the targets raise, to tell it apart in the count.
#[derive(Debug)]
struct Reset;
impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset")
    }
}
impl std::error::Error for Reset {}

/// A target that answers at random (seeded): mostly 200, and every kind of
/// trouble, some after a delay.
fn chaotic(seed: u64) -> Scripted {
    let rng = Arc::new(Mutex::new(fastrand::Rng::with_seed(seed)));
    Scripted::new(move |_: &Request<String>| {
        let mut rng = rng.lock().unwrap();
        let delay = Duration::from_millis(rng.u64(0..300));
        match rng.u32(0..1000) {
            0..=699 => Reply1::After(delay, response(200, None, "{}")),
            700..=749 => Reply1::Now(response(429, None, "")),
            800..=869 => Reply1::After(delay, response(503, None, "")),
            870..=919 => Reply1::Now(response(400, None, "")),
            920 => Reply1::Now(response(429, None, QUOTA_BODY)),
            921..=922 => Reply1::Now(response(401, None, "")),
            923..=952 => Reply1::Error(Box::new(Reset)),
            _ => Reply1::After(delay, response(200, None, "{}")),
        }
    })
}

#[derive(Debug, Default)]
struct Tally {
    ok: usize,
    upstream_answer: usize,
    no_target: usize,
    rejection: usize,
    transport: usize,
}

#[tokio::test(start_paused = true)]
async fn every_request_ends_in_exactly_one_response_or_one_typed_error() {
    const REQUESTS: usize = 3_000;
    let targets: Vec<_> = (0..4).map(chaotic).collect();
    let mut builder = Failover::builder();
    for (i, t) in targets.iter().enumerate() {
        let name = format!("t{i}");
        builder = builder.target(
            Target::new(name, t.clone())
                .breaker(breaker(GATE, PARK))
                .max_concurrent(40)
                .provider(if i < 2 { "p" } else { "q" }),
        );
    }
    let svc = builder.max_targets_per_request(3).build().unwrap();
    let ends = Arc::new(Mutex::new(Vec::with_capacity(REQUESTS)));
    let mut tasks = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        let svc = svc.clone();
        let ends = ends.clone();
        tasks.push(tokio::spawn(async move {
            let out: Result<_, BoxError> = svc.oneshot(req()).await;
            ends.lock()
                .unwrap()
                .push((i, out.map(|r| (r.status(), ServedBy::of(&r)))));
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let ends = std::mem::take(&mut *ends.lock().unwrap());
    // Exactly one end per request: no request lost, none answered twice.
    let mut seen = vec![0u8; REQUESTS];
    for (i, _) in &ends {
        seen[*i] += 1;
    }
    assert!(
        seen.iter().all(|n| *n == 1),
        "each request ends exactly once"
    );

    let mut tally = Tally::default();
    for (_, end) in &ends {
        match end {
            Ok((status, by)) => {
                assert!(by.is_some(), "every answer says which target gave it");
                if status.is_success() {
                    tally.ok += 1
                } else {
                    tally.upstream_answer += 1
                }
            }
            Err(e) if e.is::<NoTargetAvailable>() => tally.no_target += 1,
            Err(e)
                if e.is::<Throttled>()
                    || e.is::<Parked>()
                    || e.is::<CircuitOpen>()
                    || e.is::<BulkheadFull>() =>
            {
                tally.rejection += 1
            }
            Err(e) if e.is::<Reset>() => tally.transport += 1,
            Err(e) => panic!("untyped error: {e}"),
        }
    }
    println!("{REQUESTS} requests: {tally:?}");
    assert_eq!(
        tally.ok + tally.upstream_answer + tally.no_target + tally.rejection + tally.transport,
        REQUESTS
    );
    assert_eq!(
        tally.rejection, 0,
        "a refusal only ever comes back inside NoTargetAvailable"
    );
    let health = svc.handle().snapshot();
    assert_eq!(health.served as usize, tally.ok);
    assert_eq!(health.no_target_available as usize, tally.no_target);
    assert!(tally.ok > REQUESTS / 2, "{tally:?}");
    assert!(tally.upstream_answer > 0 && tally.no_target > 0 && tally.transport > 0);
    // Every permit is back.
    for t in &health.targets {
        let b = t.bulkhead.unwrap();
        assert_eq!((b.in_flight, b.limit), (0, 40), "{}", t.name);
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_callers_future_mid_failover_releases_every_permit_and_probe_slot() {
    let failing = Scripted::status(503, None);
    let hung = Scripted::hang();
    let svc = Failover::builder()
        .target(Target::new("failing", failing.clone()).breaker(breaker(GATE, PARK)))
        .target(
            Target::new("hung", hung.clone())
                .breaker(breaker(GATE, PARK))
                .max_concurrent(1),
        )
        .build()
        .unwrap();
    let handle = svc.handle();
    let hung_breaker = handle.breaker("hung").unwrap().clone();
    // Put the hung target's breaker half-open: the next call is its probe.
    hung_breaker.open("api.example.com");
    tokio::time::sleep(Duration::from_secs(31)).await;
    let probe = req();
    assert!(hung_breaker.admits(&RequestHead::of(&probe)).is_ok());

    // The request fails at the first target, moves on, and hangs as the
    // second target's probe, holding its only bulkhead permit.
    let mut call = task::spawn(svc.clone().oneshot(req()));
    assert_pending!(call.poll());
    assert_eq!((failing.calls(), hung.calls()), (1, 1));
    let health = handle.snapshot();
    assert_eq!(health.targets[1].state, "half_open");
    assert_eq!(health.targets[1].bulkhead.unwrap().in_flight, 1);
    let err = hung_breaker.admits(&RequestHead::of(&probe)).unwrap_err();
    assert!(err.is::<CircuitOpen>(), "the one probe slot is taken");

    // The caller gives up.
    drop(call);
    let health = handle.snapshot();
    assert_eq!(
        health.targets[1].bulkhead.unwrap().in_flight,
        0,
        "permit released"
    );
    assert!(
        hung_breaker.admits(&RequestHead::of(&probe)).is_ok(),
        "probe slot handed back"
    );
    // And the next request can be the probe again.
    let mut again = task::spawn(svc.oneshot(req()));
    assert_pending!(again.poll());
    assert_eq!(hung.calls(), 2);
}
