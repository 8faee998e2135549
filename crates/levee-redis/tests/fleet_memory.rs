//! Replicas in one process sharing decisions through the simulated store,
//! in paused time: gates, parks, quorum opens, recoveries and an
//! operator's unpark travel; outages, lost notices and garbage do no harm.

mod support;

use std::time::Duration;

use levee_core::breaker::BreakerStatus;
use levee_redis::{BreakerPolicy, Fleet, MemoryStore, Store};
use support::{ACCOUNT, Answer, INSUFFICIENT_QUOTA, Replica, settle};
use tower_levee::breaker::{BreakerLayer, CircuitOpen, Parked, Throttled};

fn fleet_of(store: &MemoryStore, n: usize, policy: BreakerPolicy) -> Vec<Replica> {
    (0..n)
        .map(|i| Replica::new(store.clone(), &format!("web-{i}"), policy))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_throttle_one_replica_meets_gates_every_replica_without_a_call() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 3, BreakerPolicy::default());
    settle(10).await;
    fleet[0].answer(Answer::throttled(30));
    assert_eq!(fleet[0].call().await.unwrap(), 429);
    settle(10).await;
    for r in &fleet[1..] {
        let err = r.call().await.unwrap_err();
        let throttled = err.downcast_ref::<Throttled>().expect("gated by the fleet");
        assert!(throttled.retry_after() <= Duration::from_secs(30));
        assert!(throttled.retry_after() >= Duration::from_secs(29));
        assert_eq!(r.calls(), 0, "{} never called", r.id);
    }
    assert!(fleet.iter().all(|r| r.fleet.status().connected));
    assert_eq!(fleet[0].fleet.status().published, 1);
    assert_eq!(fleet[1].fleet.status().adopted, 1);
    // The gate ends everywhere when the provider said it would.
    tokio::time::advance(Duration::from_secs(30)).await;
    for r in &fleet[1..] {
        assert_eq!(r.call().await.unwrap(), 200);
    }
}

#[tokio::test(start_paused = true)]
async fn a_spend_cap_parks_the_fleet_and_one_operators_unpark_unparks_it() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 3, BreakerPolicy::default());
    settle(10).await;
    fleet[2].answer(Answer(429, vec![], INSUFFICIENT_QUOTA.into()));
    assert_eq!(fleet[2].call().await.unwrap(), 429);
    settle(10).await;
    for r in &fleet {
        assert!(r.refuses().expect("parked").is::<Parked>(), "{}", r.id);
    }
    assert!(fleet[0].handle.unpark(ACCOUNT));
    settle(10).await;
    for r in &fleet {
        assert!(r.refuses().is_none(), "{} unparked", r.id);
    }
    assert!(support::holds_no_decision(&store), "the park's key is gone");
}

#[tokio::test(start_paused = true)]
async fn one_replicas_open_is_not_adopted_but_a_quorum_of_two_is() {
    let store = MemoryStore::new();
    // Opens only: each replica counts its failures alone here.
    let fleet: Vec<Replica> = (0..3)
        .map(|i| {
            Replica::with(store.clone(), &format!("web-{i}"), |f| {
                f.share_failures(None)
            })
        })
        .collect();
    settle(10).await;
    fleet[0].trip().await;
    assert_eq!(
        fleet[0].handle.breaker_status(ACCOUNT),
        Some(BreakerStatus::Open)
    );
    settle(10).await;
    assert!(
        fleet[2].refuses().is_none(),
        "one replica's open is its own"
    );

    fleet[1].trip().await;
    settle(10).await;
    let err = fleet[2].call().await.unwrap_err();
    assert!(err.is::<CircuitOpen>(), "{err}");
    assert_eq!(fleet[2].calls(), 0);
    assert!(
        fleet[2]
            .handle
            .failure_breakdown(ACCOUNT)
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn follow_adopts_the_first_open_and_local_adopts_none() {
    for (policy, adopted) in [(BreakerPolicy::Follow, true), (BreakerPolicy::Local, false)] {
        let store = MemoryStore::new();
        let fleet = fleet_of(&store, 2, policy);
        settle(10).await;
        fleet[0].answer(Answer::status(500));
        for _ in 0..5 {
            fleet[0].call().await.unwrap();
        }
        settle(10).await;
        assert_eq!(fleet[1].refuses().is_some(), adopted, "{policy}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_recovery_elsewhere_sends_this_replica_to_its_own_probe() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 2, BreakerPolicy::Follow);
    settle(10).await;
    fleet[0].trip().await;
    settle(10).await;
    assert!(fleet[1].refuses().is_some());
    // The cool-off ends on replica 0 (its fleet asked who probes just
    // before: replica 0); its probe succeeds.
    tokio::time::advance(Duration::from_secs(10)).await;
    settle(10).await;
    fleet[0].answer(Answer::ok());
    assert_eq!(fleet[0].call().await.unwrap(), 200);
    settle(10).await;
    // Replica 1 probes on its own next call, which closes its breaker.
    assert!(fleet[1].refuses().is_none());
    assert_eq!(fleet[1].call().await.unwrap(), 200);
    assert_eq!(
        fleet[1].handle.breaker_status(ACCOUNT),
        Some(BreakerStatus::Closed)
    );
    assert!(
        support::holds_no_decision(&store),
        "the open report is gone"
    );
}

#[tokio::test(start_paused = true)]
async fn an_isolation_travels_and_only_a_close_ends_it() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 2, BreakerPolicy::Local);
    settle(10).await;
    fleet[0].handle.isolate(ACCOUNT);
    settle(10).await;
    assert!(
        fleet[1].refuses().unwrap().is::<CircuitOpen>(),
        "manual actions ignore the policy"
    );
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(fleet[1].refuses().is_some(), "isolation has no deadline");
    fleet[1].handle.close(ACCOUNT);
    settle(10).await;
    assert!(fleet[0].refuses().is_none());
    assert!(support::holds_no_decision(&store), "{:?}", store.keys());
}

#[tokio::test(start_paused = true)]
async fn lost_notices_are_made_up_by_the_periodic_read() {
    let store = MemoryStore::new().with_loss(1.0, 3);
    let fleet = fleet_of(&store, 2, BreakerPolicy::default());
    settle(10).await;
    fleet[0].answer(Answer::throttled(60));
    fleet[0].call().await.unwrap();
    settle(10).await;
    assert!(fleet[1].refuses().is_none(), "the notice was lost");
    settle(1_000).await;
    let err = fleet[1].refuses().expect("read back within a sweep");
    assert!(err.is::<Throttled>());
    assert!(store.notices_lost() >= 1);
}

#[tokio::test(start_paused = true)]
async fn the_store_going_away_fails_no_request_and_decisions_come_back_with_it() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 2, BreakerPolicy::default());
    settle(10).await;
    store.set_available(false);
    settle(10).await;
    assert!(fleet.iter().all(|r| !r.fleet.status().connected));
    // Local state keeps working.
    fleet[0].answer(Answer::throttled(120));
    assert_eq!(fleet[0].call().await.unwrap(), 429);
    assert!(fleet[0].call().await.unwrap_err().is::<Throttled>());
    assert_eq!(
        fleet[1].call().await.unwrap(),
        200,
        "no request waits or fails on the store"
    );
    store.set_available(true);
    settle(6_000).await;
    assert!(fleet.iter().all(|r| r.fleet.status().connected));
    assert_eq!(fleet[0].fleet.status().disconnects, 1);
    // Replica 0 published its gate again; replica 1 read it back.
    assert!(fleet[1].refuses().expect("republished").is::<Throttled>());
    let late = Replica::new(store.clone(), "web-late", BreakerPolicy::default());
    settle(1_100).await;
    assert!(
        late.refuses().is_some(),
        "a replica that joins later learns it too"
    );
}

#[tokio::test(start_paused = true)]
async fn garbage_in_the_store_is_counted_and_changes_nothing() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 1, BreakerPolicy::Follow);
    settle(10).await;
    let prefix = "test:v1:s:";
    // Written as by hand: into the keys, with no notice.
    let space = levee_redis::Space::new(prefix, "elsewhere", "test:v1:index");
    for (key, value, ttl) in [
        ("gate::x", &b"not json"[..], Some(60)),
        ("gate::y", br#"{"v":9,"kind":"gated","layer":"","scope":"api.openai.com","replica":"evil","wait_ms":5}"#, Some(60)),
        ("gate::z", br#"{"v":1,"kind":"gated","layer":"","scope":"api.openai.com","replica":"evil","wait_ms":5}"#, None),
        ("open::w", br#"{"v":1,"kind":"recovered","layer":"","scope":"api.openai.com","replica":"evil","wait_ms":0}"#, None),
    ] {
        let key = format!("{prefix}{key}");
        store.put(&space, &key, value, ttl.map(Duration::from_secs)).await.unwrap();
    }
    settle(1_100).await;
    let status = fleet[0].fleet.status();
    assert!(status.decode_errors >= 4, "{status:?}");
    assert!(status.last_error.is_some());
    assert!(fleet[0].refuses().is_none(), "nothing applied");
    assert_eq!(status.adopted, 0);
}

#[tokio::test(start_paused = true)]
async fn a_wait_is_never_stretched_by_the_time_a_notice_travels() {
    let store = MemoryStore::new().with_latency(Duration::from_millis(40));
    let fleet = fleet_of(&store, 2, BreakerPolicy::default());
    settle(200).await;
    // A first decision measures the round trip.
    fleet[0].handle.open("warm-up");
    settle(200).await;
    fleet[0].answer(Answer::throttled(30));
    let sent_at = tokio::time::Instant::now();
    fleet[0].call().await.unwrap();
    settle(200).await;
    let left = fleet[1]
        .handle
        .retry_after(&tower_levee::breaker::RequestHead::of(&support::request()))
        .expect("gated");
    let provider_deadline = sent_at + Duration::from_secs(30);
    let adopted_deadline = tokio::time::Instant::now() + left;
    assert!(
        adopted_deadline <= provider_deadline,
        "stretched by {:?}",
        adopted_deadline - provider_deadline
    );
    assert!(provider_deadline - adopted_deadline < Duration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn invalid_settings_name_their_field() {
    let layer = BreakerLayer::new();
    let h = layer.handle();
    let store = MemoryStore::new();
    let cases = [
        (Fleet::builder().namespace("").attach(&h), "fleet.namespace"),
        (
            Fleet::builder().namespace("a b").attach(&h),
            "fleet.namespace",
        ),
        (
            Fleet::builder().replica("web:1").attach(&h),
            "fleet.replica",
        ),
        (Fleet::builder(), "fleet.layer"),
        (Fleet::builder().attach(&h).attach(&h), "fleet.layer"),
        (
            Fleet::builder().policy(BreakerPolicy::Quorum(0)).attach(&h),
            "fleet.policy",
        ),
        (
            Fleet::builder().sweep_every(Duration::ZERO).attach(&h),
            "fleet.sweep_every",
        ),
        (
            Fleet::builder()
                .reconnect_backoff(Duration::from_secs(5), Duration::from_secs(1))
                .attach(&h),
            "fleet.reconnect_backoff",
        ),
    ];
    for (builder, field) in cases {
        let err = builder.spawn(store.clone()).unwrap_err();
        assert_eq!(err.field, field, "{err}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_operators_close_elsewhere_is_never_undone_by_a_republish() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 3, BreakerPolicy::default());
    settle(10).await;
    fleet[0].handle.isolate(ACCOUNT);
    settle(10).await;
    assert!(fleet[2].refuses().is_some());
    fleet[1].handle.close(ACCOUNT);
    settle(10).await;
    assert!(fleet.iter().all(|r| r.refuses().is_none()));
    // The store restarts empty; replica 0 publishes what it still holds.
    store.set_available(false);
    settle(10).await;
    store.set_available(true);
    settle(7_000).await;
    assert!(fleet.iter().all(|r| r.fleet.status().connected));
    for r in &fleet {
        assert!(r.refuses().is_none(), "{} isolated again", r.id);
    }
}

#[tokio::test(start_paused = true)]
async fn a_manual_open_ends_with_an_operators_close_elsewhere() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 3, BreakerPolicy::default());
    settle(10).await;
    fleet[0].handle.open(ACCOUNT);
    settle(10).await;
    assert!(
        fleet[2].refuses().is_some(),
        "opened by hand: adopted whatever the policy"
    );
    fleet[1].handle.close(ACCOUNT);
    settle(1_500).await;
    for r in &fleet {
        assert!(
            r.refuses().is_none(),
            "{} open again after a read of the store",
            r.id
        );
    }
}

#[tokio::test(start_paused = true)]
async fn one_replica_alone_never_holds_the_fleet_open_once_the_others_recovered() {
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 4, BreakerPolicy::Quorum(2));
    settle(10).await;
    // A real outage, seen by three replicas: a quorum.
    for r in &fleet[..3] {
        r.answer(Answer::status(503));
        for _ in 0..5 {
            let _ = r.call().await;
        }
    }
    settle(10).await;
    assert!(fleet[3].refuses().is_some(), "a quorum");
    // Replicas 0 and 1 recover: the fleet's probes find it so, whichever
    // replica sends them. Replica 2's path is broken: its probes fail.
    fleet[0].answer(Answer::ok());
    fleet[1].answer(Answer::ok());
    let recovered = |r: &Replica| r.handle.breaker_status(ACCOUNT) == Some(BreakerStatus::Closed);
    for _ in 0..600 {
        for r in &fleet[..3] {
            let _ = r.call().await;
        }
        settle(100).await;
        if fleet[..2].iter().all(recovered) {
            break;
        }
    }
    assert!(fleet[..2].iter().all(recovered), "0 and 1 recover");
    let _ = fleet[2].call().await;
    for _ in 0..6 {
        settle(1_100).await;
        let _ = fleet[2].call().await;
        assert!(
            fleet[3].refuses().is_none(),
            "replica 2 alone holds the fleet open"
        );
        assert!(fleet[0].refuses().is_none());
    }
}
