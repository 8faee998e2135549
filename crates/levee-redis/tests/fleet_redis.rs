//! Replicas in one process, separate layers sharing nothing but a real
//! `redis-server` that each test starts on a free loopback port.

mod support;

use levee_redis::LocalRedis as RedisServer;
use levee_redis::{BreakerPolicy, RedisStore};
use support::redis_server;
use support::{ACCOUNT, Answer, INSUFFICIENT_QUOTA, Replica, eventually};
use tower_levee::breaker::{CircuitOpen, Parked, Throttled};

fn replicas(server: &RedisServer, n: usize, policy: BreakerPolicy) -> Vec<Replica> {
    (0..n)
        .map(|i| {
            let store = RedisStore::open(&server.url()).unwrap();
            Replica::new(store, &format!("web-{i}"), policy)
        })
        .collect()
}

async fn connected(fleet: &[Replica]) {
    assert!(
        eventually(10, || fleet.iter().all(|r| r.fleet.status().connected)).await,
        "every replica connects"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_on_one_replica_gates_the_others_through_redis() {
    let Some(server) = redis_server::start(None) else {
        return;
    };
    let fleet = replicas(&server, 3, BreakerPolicy::default());
    connected(&fleet).await;
    fleet[0].answer(Answer::throttled(30));
    assert_eq!(fleet[0].call().await.unwrap(), 429);
    let gated = |r: &Replica| r.refuses().is_some_and(|e| e.is::<Throttled>());
    assert!(eventually(5, || fleet[1..].iter().all(gated)).await);
    for r in &fleet[1..] {
        assert!(r.call().await.unwrap_err().is::<Throttled>());
        assert_eq!(r.calls(), 0, "{} never called", r.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spend_cap_parks_every_replica_and_one_operators_unpark_lifts_it() {
    let Some(server) = redis_server::start(None) else {
        return;
    };
    let fleet = replicas(&server, 3, BreakerPolicy::default());
    connected(&fleet).await;
    fleet[2].answer(Answer(429, vec![], INSUFFICIENT_QUOTA.into()));
    assert_eq!(fleet[2].call().await.unwrap(), 429);
    let parked = |r: &Replica| r.refuses().is_some_and(|e| e.is::<Parked>());
    assert!(eventually(5, || fleet.iter().all(parked)).await);
    assert!(fleet[0].handle.unpark(ACCOUNT));
    assert!(eventually(5, || fleet.iter().all(|r| r.refuses().is_none())).await);
    // Nothing brings it back: the key went with the unpark.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    assert!(fleet.iter().all(|r| r.refuses().is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replicas_open_stays_its_own_and_a_quorum_of_two_opens_the_fleet() {
    let Some(server) = redis_server::start(None) else {
        return;
    };
    let fleet = replicas(&server, 3, BreakerPolicy::Quorum(2));
    connected(&fleet).await;
    fleet[0].trip().await;
    // Two sweeps later, still only replica 0's.
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    assert!(fleet[1].refuses().is_none() && fleet[2].refuses().is_none());
    // Replica 1's first failure adds to replica 0's five: it opens too.
    fleet[1].answer(Answer::status(503));
    assert_eq!(fleet[1].call().await.unwrap(), 503);
    assert!(fleet[1].refuses().is_some_and(|e| e.is::<CircuitOpen>()));
    assert_eq!(fleet[1].calls(), 1);
    assert!(
        eventually(5, || fleet[2]
            .refuses()
            .is_some_and(|e| e.is::<CircuitOpen>()))
        .await
    );
    assert!(fleet[2].call().await.unwrap_err().is::<CircuitOpen>());
    assert_eq!(fleet[2].calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted_fails_no_request_and_decisions_are_published_again() {
    let Some(mut server) = redis_server::start(None) else {
        return;
    };
    let fleet = replicas(&server, 2, BreakerPolicy::default());
    connected(&fleet).await;
    server.kill();
    assert!(eventually(10, || fleet.iter().all(|r| !r.fleet.status().connected)).await);
    // The layers run on local state: nothing waits on Redis, nothing fails for it.
    assert_eq!(fleet[1].call().await.unwrap(), 200);
    fleet[0].answer(Answer::throttled(120));
    assert_eq!(fleet[0].call().await.unwrap(), 429);
    assert!(fleet[0].call().await.unwrap_err().is::<Throttled>());
    assert_eq!(
        fleet[1].call().await.unwrap(),
        200,
        "not told while Redis is down"
    );

    server.restart().unwrap();
    connected(&fleet).await;
    let gated = |r: &Replica| r.refuses().is_some_and(|e| e.is::<Throttled>());
    assert!(
        eventually(5, || gated(&fleet[1])).await,
        "republished and read back"
    );
    let status = fleet[0].fleet.status();
    assert_eq!(status.disconnects, 1, "{status:?}");
    assert!(status.last_error.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_this_version_did_not_write_are_counted_and_change_nothing() {
    let Some(server) = redis_server::start(None) else {
        return;
    };
    let fleet = replicas(&server, 1, BreakerPolicy::Follow);
    connected(&fleet).await;
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let scope = ACCOUNT;
    for (key, value) in [
        ("gate::a", "garbage".to_owned()),
        (
            "gate::b",
            format!(
                r#"{{"v":2,"kind":"gated","layer":"","scope":"{scope}","replica":"x","wait_ms":60000}}"#
            ),
        ),
        (
            "park::c",
            format!(
                r#"{{"v":1,"kind":"parked","layer":"","scope":"{scope}","replica":"x","wait_ms":99999999999999}}"#
            ),
        ),
        (
            "open::d",
            format!(
                // A later release's kind of decision (a field it added would be read past).
                r#"{{"v":1,"kind":"lease_free","layer":"","scope":"{scope}","replica":"x","wait_ms":60000}}"#
            ),
        ),
    ] {
        // Written by hand, and listed in the fleet's index as if stored by it.
        let key = format!("test:v1:s:{key}");
        let _: () = redis::pipe()
            .cmd("SET")
            .arg(&key)
            .arg(value)
            .arg("EX")
            .arg(60)
            .ignore()
            .cmd("ZADD")
            .arg("test:v1:index")
            .arg("+inf")
            .arg(&key)
            .ignore()
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    assert!(eventually(5, || fleet[0].fleet.status().decode_errors >= 4).await);
    assert!(fleet[0].refuses().is_none());
    assert_eq!(fleet[0].fleet.status().adopted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_never_shows_in_debug_status_or_errors() {
    let Some(server) = redis_server::start(Some("hunter2-correct")) else {
        return;
    };
    let url = server.url();
    let good = RedisStore::open(&url).unwrap();
    assert!(!format!("{good:?}").contains("hunter2"));
    let fleet = [Replica::new(good, "web-0", BreakerPolicy::default())];
    connected(&fleet).await;

    let wrong = url.replace("hunter2-correct", "hunter2-wrong");
    let bad = Replica::new(
        RedisStore::open(&wrong).unwrap(),
        "web-1",
        BreakerPolicy::default(),
    );
    assert!(eventually(5, || bad.fleet.status().last_error.is_some()).await);
    let status = bad.fleet.status();
    assert!(!status.connected);
    let shown = format!("{status:?} {:?}", bad.fleet);
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("127.0.0.1"), "the error says where: {shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_lease_is_taken_by_one_replica_only_and_taken_over_once_it_lapses() {
    use levee_redis::{Lease, Store};
    use std::time::Duration;
    let Some(server) = redis_server::start(None) else {
        return;
    };
    let key = "test:v1:lease::api.openai.com";
    let stores: Vec<RedisStore> = (0..8)
        .map(|_| RedisStore::open(&server.url()).unwrap())
        .collect();
    let ttl = Duration::from_secs(2);
    // Eight replicas race for a free lease: one takes it.
    let answers = futures_util::future::join_all(
        stores
            .iter()
            .enumerate()
            .map(|(i, s)| async move { s.lease(key, &format!("web-{i}"), ttl).await.unwrap() }),
    )
    .await;
    let winners: Vec<usize> = (0..8).filter(|i| answers[*i] == Lease::Taken).collect();
    assert_eq!(winners.len(), 1, "{answers:?}");
    let holder = format!("web-{}", winners[0]);
    let other = format!("web-{}", (winners[0] + 1) % 8);
    match stores[0].lease(key, &other, ttl).await.unwrap() {
        Lease::Held {
            holder: h,
            ttl: left,
        } => {
            assert_eq!(h, holder);
            assert!(left <= ttl && left > Duration::ZERO, "{left:?}");
        }
        Lease::Taken => panic!("taken while held"),
        _ => unreachable!(),
    }
    // The holder renews it; another replica cannot release it.
    assert_eq!(
        stores[1].lease(key, &holder, ttl).await.unwrap(),
        Lease::Taken
    );
    stores[2].release(key, &other, None).await.unwrap();
    assert!(matches!(
        stores[2].lease(key, &other, ttl).await.unwrap(),
        Lease::Held { .. }
    ));
    // Kept through a failed probe's cool-off by no one (its former holder
    // cannot take it either), then free.
    let keep = Duration::from_millis(300);
    stores[3].release(key, &holder, Some(keep)).await.unwrap();
    for asking in [&other, &holder] {
        match stores[4].lease(key, asking, ttl).await.unwrap() {
            Lease::Held {
                holder: h,
                ttl: left,
            } => {
                assert_eq!(h, levee_redis::LEASE_COOL_OFF);
                assert!(left <= keep, "{left:?}");
            }
            Lease::Taken => panic!("taken by {asking} in the cool-off"),
            _ => unreachable!(),
        }
    }
    // Lapsed: taken over.
    tokio::time::sleep(keep + Duration::from_millis(200)).await;
    assert_eq!(
        stores[5].lease(key, &other, ttl).await.unwrap(),
        Lease::Taken
    );
    // Released at once by its holder: free.
    stores[5].release(key, &other, None).await.unwrap();
    assert_eq!(
        stores[6].lease(key, &holder, ttl).await.unwrap(),
        Lease::Taken
    );
}
