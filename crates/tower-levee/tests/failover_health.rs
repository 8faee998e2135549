//! The health snapshot: every target's state, scope, reason, gated time and
//! the fallback share.

mod failover_support;

use std::time::Duration;

use tower::{Service, ServiceExt};
use tower_levee::failover::{Failover, HealthSnapshot, Target};

use failover_support::{QUOTA_BODY, Reply1, Scripted, TestClassifier, breaker, req, response};

const GATE: Duration = Duration::from_secs(5);
const PARK: Duration = Duration::from_secs(3600);

/// Four targets: parked, gated, open, healthy — after a few requests.
async fn four_states() -> (
    Failover<String, String, Scripted, TestClassifier>,
    HealthSnapshot,
) {
    let t = |name: &'static str, s: Scripted| -> Target<Scripted, String, TestClassifier> {
        Target::new(name, s).breaker(breaker(GATE, PARK))
    };
    let mut svc = Failover::builder()
        .target(
            t(
                "parked",
                Scripted::new(|_| Reply1::Now(response(429, None, QUOTA_BODY))),
            )
            .provider("openai"),
        )
        .target(t("gated", Scripted::status(429, Some("5"))).provider("openai"))
        .target(
            t("down", Scripted::status(503, None))
                .provider("anthropic")
                .region("us"),
        )
        .target(
            t("healthy", Scripted::ok())
                .provider("mistral")
                .max_concurrent(8),
        )
        .build()
        .unwrap();
    for _ in 0..6 {
        let res = svc.ready().await.unwrap().call(req()).await.unwrap();
        assert_eq!(res.status(), 200);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let snapshot = svc.handle().snapshot();
    (svc, snapshot)
}

#[tokio::test(start_paused = true)]
async fn the_snapshot_gives_each_targets_state_deadline_reason_and_scopes() {
    let (_svc, health) = four_states().await;
    let states: Vec<_> = health
        .targets
        .iter()
        .map(|t| (t.name.as_str(), t.state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("parked", "parked"),
            ("gated", "throttled"),
            ("down", "open"),
            ("healthy", "available")
        ]
    );

    let parked = &health.targets[0];
    assert_eq!(parked.reason.as_deref(), Some("test:insufficient_quota"));
    assert_eq!(parked.retry_after, Some(PARK - Duration::from_secs(3)));
    assert_eq!(parked.failed_over, 1);
    let park = parked
        .scopes
        .iter()
        .find(|s| s.mechanism == "park")
        .unwrap();
    assert_eq!(
        (park.scope.as_str(), park.state.as_str()),
        ("api.example.com", "parked")
    );

    let gated = &health.targets[1];
    assert_eq!(gated.reason.as_deref(), Some("throttled: status:429"));
    assert_eq!(gated.retry_after, Some(GATE - Duration::from_secs(3)));
    assert_eq!(gated.gated_last_hour, Some(Duration::from_secs(3)));
    let gate = gated.scopes.iter().find(|s| s.mechanism == "gate").unwrap();
    assert_eq!(gate.state, "gated");
    assert_eq!(gate.reason.as_deref(), Some("throttled: status:429"));

    // Five 503s in a row opened it; the scope says why.
    let down = &health.targets[2];
    assert_eq!(down.failed_over, 5);
    let breaker = down
        .scopes
        .iter()
        .find(|s| s.mechanism == "breaker")
        .unwrap();
    assert_eq!(breaker.state, "open");
    assert_eq!(breaker.reason.as_deref(), Some("status:503 ×5"));
    assert_eq!(
        (down.provider.as_deref(), down.region.as_deref()),
        (Some("anthropic"), Some("us"))
    );

    let healthy = &health.targets[3];
    assert_eq!(healthy.served, 6);
    let bulkhead = healthy.bulkhead.unwrap();
    assert_eq!((bulkhead.in_flight, bulkhead.limit), (0, 8));
    assert_eq!((health.served, health.served_by_fallback), (6, 6));
    assert_eq!(health.fallback_share, 1.0);
}

/// A primary that answers 200 while the switch is on and 503 otherwise,
/// and a healthy backup, each behind its own breaker.
fn primary_and_backup(
    up: bool,
) -> (
    Failover<String, String, Scripted, TestClassifier>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let primary_up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(up));
    let up = primary_up.clone();
    let primary = Scripted::new(move |_| {
        let status = if up.load(std::sync::atomic::Ordering::SeqCst) {
            200
        } else {
            503
        };
        Reply1::Now(response(status, None, "{}"))
    });
    let svc = Failover::builder()
        .target(Target::new("primary", primary).breaker(breaker(GATE, PARK)))
        .target(Target::new("backup", Scripted::ok()).breaker(breaker(GATE, PARK)))
        .build()
        .unwrap();
    (svc, primary_up)
}

#[tokio::test(start_paused = true)]
async fn the_fallback_share_counts_successes_served_by_a_target_other_than_the_first() {
    let (mut svc, primary_up) = primary_and_backup(true);
    for i in 0..10 {
        primary_up.store(i < 7, std::sync::atomic::Ordering::SeqCst);
        svc.ready().await.unwrap().call(req()).await.unwrap();
    }
    let health = svc.handle().snapshot();
    assert_eq!((health.served, health.served_by_fallback), (10, 3));
    assert!((health.fallback_share - 0.3).abs() < 1e-9);
    assert_eq!(health.targets[0].served, 7);
}

#[cfg(feature = "serde")]
#[tokio::test(start_paused = true)]
async fn the_snapshot_serializes_to_json_with_durations_in_milliseconds() {
    let (_svc, health) = four_states().await;
    let json = serde_json::to_value(&health).unwrap();
    assert_eq!(json["served"], 6);
    assert_eq!(json["fallback_share"], 1.0);
    let gated = &json["targets"][1];
    assert_eq!(gated["name"], "gated");
    assert_eq!(gated["state"], "throttled");
    assert_eq!(gated["retry_after_ms"], 2000);
    assert_eq!(gated["gated_last_hour_ms"], 3000);
    assert_eq!(
        json["targets"][3]["retry_after_ms"],
        serde_json::Value::Null
    );
    assert_eq!(json["targets"][0]["scopes"][0]["mechanism"], "breaker");
}

#[tokio::test(start_paused = true)]
async fn time_open_per_target_counts_from_the_trip_to_the_recovery() {
    let (mut svc, primary_up) = primary_and_backup(false);
    let handle = svc.handle();
    assert_eq!(handle.snapshot().targets[0].open_time, None); // nothing tracked yet

    // Five 503s in a row trip the primary's breaker; the backup serves.
    for _ in 0..5 {
        svc.ready().await.unwrap().call(req()).await.unwrap();
    }
    assert_eq!(handle.snapshot().targets[0].state, "open");
    tokio::time::sleep(Duration::from_secs(90)).await;
    let health = handle.snapshot();
    assert_eq!(health.targets[0].open_time, Some(Duration::from_secs(90)));
    assert_eq!(health.targets[1].open_time, Some(Duration::ZERO));
    let scope = &health.targets[0].scopes[0];
    assert_eq!(
        (scope.mechanism.as_str(), scope.open_time),
        ("breaker", Some(Duration::from_secs(90)))
    );

    // The primary recovers: its probe closes the breaker at t = 90 s, and the
    // time open stops growing.
    primary_up.store(true, std::sync::atomic::Ordering::SeqCst);
    svc.ready().await.unwrap().call(req()).await.unwrap();
    assert_eq!(handle.snapshot().targets[0].state, "available");
    tokio::time::sleep(Duration::from_secs(600)).await;
    let health = handle.snapshot();
    assert_eq!(health.targets[0].open_time, Some(Duration::from_secs(90)));
    let states = handle.breaker("primary").unwrap().states();
    assert_eq!(states[0].open_time, Some(Duration::from_secs(90)));

    #[cfg(feature = "serde")]
    {
        let json = serde_json::to_value(&health).unwrap();
        assert_eq!(json["targets"][0]["open_time_ms"], 90_000);
        assert_eq!(json["targets"][0]["scopes"][0]["open_time_ms"], 90_000);
    }
}

/// With `latency_estimate`, each breaker scope carries its recent time to
/// first byte: the number a `slow_call` threshold is set from.
#[tokio::test(start_paused = true)]
async fn each_breaker_scope_shows_its_time_to_first_byte_when_estimated() {
    let primary =
        Scripted::new(|_| Reply1::After(Duration::from_millis(800), response(200, None, "{}")));
    let estimated = tower_levee::BreakerLayer::builder()
        .latency_estimate(true)
        .build()
        .unwrap();
    let mut svc = Failover::builder()
        .target(Target::new("primary", primary).breaker(estimated))
        .build()
        .unwrap();
    for _ in 0..20 {
        svc.ready().await.unwrap().call(req()).await.unwrap();
    }
    let health = svc.handle().snapshot();
    let scope = &health.targets[0].scopes[0];
    let latency = scope.latency.expect("estimated");
    assert_eq!(latency.samples, 20);
    let ratio = latency.p99.as_secs_f64() / 0.8;
    assert!((0.7..1.42).contains(&ratio), "{latency:?}");
    #[cfg(feature = "serde")]
    {
        let json = serde_json::to_value(&health).unwrap();
        let p99 = &json["targets"][0]["scopes"][0]["latency"]["p99_ms"];
        assert_eq!(p99.as_u64(), Some(latency.p99.as_millis() as u64));
    }
}
