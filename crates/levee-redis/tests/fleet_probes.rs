//! A fleet that counts failures together and sends one probe per cool-off,
//! in paused time over the simulated store: a quiet fleet opens at the
//! breaker's threshold, not at every replica's; one replica probes for all,
//! its verdict reaches the others, a lease whose holder is gone is taken
//! over, and a fleet without its store probes alone.

mod support;

use std::time::Duration;

use levee_core::breaker::BreakerStatus;
use levee_redis::{BreakerPolicy, MemoryStore};
use support::{ACCOUNT, Answer, Replica, settle};
use tower_levee::breaker::CircuitOpen;

fn fleet_of(store: &MemoryStore, n: usize) -> Vec<Replica> {
    (0..n)
        .map(|i| Replica::new(store.clone(), &format!("web-{i}"), BreakerPolicy::default()))
        .collect()
}

fn open(r: &Replica) -> bool {
    r.handle.breaker_status(ACCOUNT) == Some(BreakerStatus::Open)
}

fn total_calls(fleet: &[Replica]) -> usize {
    fleet.iter().map(Replica::calls).sum()
}

/// `n` replicas over a dead target, every breaker open (two calls each,
/// in turn): what most of these tests start from.
async fn open_fleet(n: usize) -> (MemoryStore, Vec<Replica>) {
    let store = MemoryStore::new().with_latency(Duration::from_millis(1));
    let fleet = fleet_of(&store, n);
    settle(10).await;
    for r in &fleet {
        r.answer(Answer::status(503));
    }
    round_robin(&fleet, 2, Duration::from_millis(100)).await;
    settle(50).await;
    assert!(fleet.iter().all(open), "all open");
    (store, fleet)
}

/// Past the first cool-off: the replica the fleet granted its probe (the
/// one whose cool-off ended first), found as the only one not refusing.
async fn granted_after_cool_off(fleet: &[Replica]) -> usize {
    tokio::time::advance(Duration::from_secs(10)).await;
    settle(50).await;
    fleet
        .iter()
        .position(|r| r.refuses().is_none())
        .expect("one replica is granted the probe")
}

/// One call to each replica in turn, as a load balancer's round robin
/// sends them, `gap` apart; the number answered by an upstream.
async fn round_robin(fleet: &[Replica], rounds: usize, gap: Duration) {
    for _ in 0..rounds {
        for r in fleet {
            let _ = r.call().await;
            tokio::time::sleep(gap).await;
        }
    }
}

/// Five replicas failing once each: the fleet opens at the breaker's
/// threshold of five, where replicas counting alone would take 25 calls.
#[tokio::test(start_paused = true)]
async fn failures_in_a_row_add_up_across_replicas_so_a_quiet_fleet_opens_at_the_threshold() {
    let store = MemoryStore::new().with_latency(Duration::from_millis(1));
    let fleet = fleet_of(&store, 5);
    settle(10).await;
    for r in &fleet {
        r.answer(Answer::status(503));
    }
    round_robin(&fleet, 1, Duration::from_millis(200)).await;
    settle(50).await;
    assert_eq!(total_calls(&fleet), 5, "one call each");
    for r in &fleet {
        assert!(open(r), "{} open after 5 failures across the fleet", r.id);
        let err = r.call().await.unwrap_err();
        assert!(err.is::<CircuitOpen>(), "{err}");
    }
    assert_eq!(total_calls(&fleet), 5);
}

#[tokio::test(start_paused = true)]
async fn a_replica_counting_alone_or_whose_last_call_succeeded_does_not_open_on_the_fleets_count() {
    // Counting alone: five failures over five replicas open nothing.
    let store = MemoryStore::new();
    let alone: Vec<Replica> = (0..5)
        .map(|i| {
            Replica::with(store.clone(), &format!("web-{i}"), |f| {
                f.share_failures(None)
            })
        })
        .collect();
    settle(10).await;
    for r in &alone {
        r.answer(Answer::status(503));
    }
    round_robin(&alone, 1, Duration::from_millis(200)).await;
    settle(50).await;
    assert!(alone.iter().all(|r| !open(r)));

    // A success ends a replica's streak for the fleet too: 2 + 2 failures,
    // a success on the first replica, then 2 more on the second: 4 in a
    // row at most, short of 5.
    let store = MemoryStore::new();
    let fleet = fleet_of(&store, 2);
    settle(10).await;
    for r in &fleet {
        r.answer(Answer::status(503));
    }
    for r in &fleet {
        for _ in 0..2 {
            let _ = r.call().await;
            settle(10).await;
        }
    }
    fleet[0].answer(Answer::ok());
    assert_eq!(fleet[0].call().await.unwrap(), 200);
    settle(10).await;
    assert_eq!(fleet[1].call().await.unwrap(), 503);
    settle(10).await;
    assert!(!open(&fleet[1]), "its 3 alone");
    assert_eq!(fleet[1].call().await.unwrap(), 503);
    settle(10).await;
    assert!(!open(&fleet[1]), "its 4 alone");
    assert!(!open(&fleet[0]), "its last call succeeded");
}

/// Every replica open on its own failures, the target still dead: in each
/// cool-off one replica probes (whichever holds the lease), the others
/// refuse without a call, and a failed probe holds them all for the next
/// cool-off, grown as one breaker's would be.
#[tokio::test(start_paused = true)]
async fn a_fleet_sends_one_probe_per_cool_off_and_its_verdict_reaches_every_replica() {
    let (store, fleet) = open_fleet(4).await;
    let tripped = total_calls(&fleet);
    assert!(tripped <= 6, "{tripped} calls to open 4 replicas");

    // Three and a half cool-offs of 10 s, a call every 100 ms across the
    // fleet: three probes, at 10, 20 and 30 s.
    let before = total_calls(&fleet);
    round_robin(&fleet, 88, Duration::from_millis(100)).await;
    assert_eq!(total_calls(&fleet) - before, 3, "one probe per cool-off");

    // The target recovers: the next probe closes its replica's breaker,
    // and the recovery sends the others to a probe of their own.
    for r in &fleet {
        r.answer(Answer::ok());
    }
    round_robin(&fleet, 30, Duration::from_millis(100)).await;
    for r in &fleet {
        assert_eq!(
            r.handle.breaker_status(ACCOUNT),
            Some(BreakerStatus::Closed),
            "{}",
            r.id
        );
    }
    assert!(
        support::holds_no_decision(&store),
        "no open report, streak or lease is left: {:?}",
        store.keys()
    );
}

/// The holder's probe takes far longer than its lease (90 s: longer than
/// any fixed bound would be): it renews the lease while the probe runs, so
/// no other replica probes meanwhile.
#[tokio::test(start_paused = true)]
async fn the_holder_renews_its_lease_while_a_slow_probe_runs_so_two_probes_never_overlap() {
    let (_, fleet) = open_fleet(3).await;
    // Past the cool-off: whoever was granted probes, and its upstream
    // takes 90 s to answer.
    tokio::time::advance(Duration::from_secs(11)).await;
    settle(50).await;
    for r in &fleet {
        r.delay(Duration::from_secs(90));
    }
    let before = total_calls(&fleet);
    let probes = async {
        let calls: Vec<_> = fleet.iter().map(Replica::call).collect();
        futures_util::future::join_all(calls).await
    };
    let others = async {
        // Calls to every replica while the probe runs.
        for _ in 0..80 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            for r in &fleet {
                if r.refuses().is_none() {
                    let _ = r.call().await;
                }
            }
        }
    };
    let (answers, ()) = tokio::join!(probes, others);
    assert_eq!(
        answers.iter().filter(|a| a.is_ok()).count(),
        1,
        "one probe: {answers:?}"
    );
    assert_eq!(total_calls(&fleet) - before, 1, "no second probe");
}

/// One replica's network path is broken (its calls fail), the others' work:
/// the fleet's probe does not stay with the broken replica, and the others
/// recover.
#[tokio::test(start_paused = true)]
async fn a_replica_whose_path_is_broken_never_keeps_the_probe_from_the_others() {
    let (_, fleet) = open_fleet(3).await;
    // The outage ends, except on replica 2's path.
    fleet[0].answer(Answer::ok());
    fleet[1].answer(Answer::ok());
    for round in 0..12 {
        round_robin(&fleet, 50, Duration::from_millis(100)).await;
        let closed = fleet[..2]
            .iter()
            .all(|r| r.handle.breaker_status(ACCOUNT) == Some(BreakerStatus::Closed));
        if closed {
            println!("replicas 0 and 1 recovered within {} s", (round + 1) * 15);
            return;
        }
    }
    panic!("replica 2 kept the fleet open for 3 minutes");
}

/// The replica granted the probe is gone (its fleet stopped) before
/// sending it: another takes the lease over once it lapses.
#[tokio::test(start_paused = true)]
async fn a_lease_whose_holder_is_gone_is_taken_over_once_it_lapses() {
    let (_, mut fleet) = open_fleet(3).await;
    let holder = granted_after_cool_off(&fleet).await;
    let gone = fleet.remove(holder);
    drop(gone);
    // The others ask, are held, and take the lease over when it lapses
    // (2 s, not renewed: no probe ran), one of them probing.
    let before = total_calls(&fleet);
    round_robin(&fleet, 20, Duration::from_millis(100)).await;
    assert_eq!(total_calls(&fleet) - before, 1, "one probe after the lapse");
}

/// No store: each replica probes alone when its cool-off ends, after one
/// refused call (the ask that found no fleet to answer it).
#[tokio::test(start_paused = true)]
async fn without_its_store_a_replica_probes_alone() {
    let store = MemoryStore::new();
    let r = Replica::new(store.clone(), "web-0", BreakerPolicy::default());
    settle(10).await;
    store.set_available(false);
    settle(10).await;
    r.trip().await;
    tokio::time::advance(Duration::from_secs(10)).await;
    r.answer(Answer::ok());
    let mut refused = 0;
    let status = loop {
        match r.call().await {
            Ok(status) => break status,
            Err(e) => {
                assert!(e.is::<CircuitOpen>(), "{e}");
                refused += 1;
                settle(5).await;
            }
        }
    };
    assert_eq!(status, 200, "the probe");
    assert_eq!(refused, 1, "the call that asked, refused");
    assert_eq!(
        r.handle.breaker_status(ACCOUNT),
        Some(BreakerStatus::Closed)
    );
}

/// The replica granted the probe gets no call to send it: after a while it
/// gives the lease back, and a replica with traffic takes it at once.
#[tokio::test(start_paused = true)]
async fn a_probe_granted_to_a_replica_without_traffic_passes_to_one_with_traffic() {
    let (_, fleet) = open_fleet(3).await;
    let holder = granted_after_cool_off(&fleet).await;
    let busy: Vec<&Replica> = (0..3).filter(|i| *i != holder).map(|i| &fleet[i]).collect();
    let before = total_calls(&fleet);
    let mut waited = Duration::ZERO;
    while total_calls(&fleet) == before && waited < Duration::from_secs(30) {
        for r in &busy {
            let _ = r.call().await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    assert_eq!(total_calls(&fleet) - before, 1, "one probe");
    assert!(
        waited < Duration::from_secs(12),
        "passed on when given back (after 10 s unused): {waited:?}"
    );
}

/// What a fleet costs its store: a heartbeat and a read each second per
/// replica, nothing per successful request, a write per failure (and per
/// streak ended).
#[tokio::test(start_paused = true)]
async fn a_healthy_fleet_asks_nothing_of_its_store_per_request() {
    let ops = |rate: u64| async move {
        let store = MemoryStore::new().with_latency(Duration::from_millis(1));
        let fleet = fleet_of(&store, 4);
        settle(10).await;
        let before = store.operations();
        let gap = Duration::from_millis(1000 / rate);
        // 10 s at `rate` requests a second across the fleet.
        for i in 0..(10 * rate) as usize {
            assert_eq!(fleet[i % 4].call().await.unwrap(), 200);
            tokio::time::sleep(gap).await;
        }
        store.operations() - before
    };
    let (quiet, busy) = (ops(4).await, ops(100).await);
    println!("store operations in 10 s, 4 replicas: {quiet} at 4 req/s, {busy} at 100 req/s");
    assert!(
        busy <= 4 * 2 * 11,
        "{busy}: a heartbeat and a read a second per replica"
    );
    assert!(
        busy.abs_diff(quiet) <= 4,
        "{busy} vs {quiet}: none per request"
    );

    // Failing calls write: a streak each, and the success that ends it.
    let store = MemoryStore::new().with_latency(Duration::from_millis(1));
    let fleet = fleet_of(&store, 4);
    settle(10).await;
    let before = store.operations();
    fleet[0].answer(Answer::status(503));
    let _ = fleet[0].call().await;
    fleet[0].answer(Answer::ok());
    let _ = fleet[0].call().await;
    settle(20).await;
    assert_eq!(
        store.operations() - before,
        2,
        "the failure, the success after"
    );
}

mod any_fleet {
    use proptest::prelude::*;

    use super::*;

    /// Calls to a dead target from `replicas` replicas, `arrivals` of them
    /// (which replica, then the gap before the next call): the instants
    /// (ms from the start) of the upstream calls made after every replica's
    /// breaker was open.
    fn probes_after_all_open(replicas: usize, arrivals: &[(usize, u64)]) -> Vec<u64> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let store = MemoryStore::new().with_latency(Duration::from_millis(1));
            let fleet = fleet_of(&store, replicas);
            settle(10).await;
            for r in &fleet {
                r.answer(Answer::status(503));
            }
            let start = tokio::time::Instant::now();
            let mut probes = Vec::new();
            let mut all_open = false;
            for &(i, gap) in arrivals {
                let r = &fleet[i % replicas];
                let before = r.calls();
                let _ = r.call().await;
                if all_open && r.calls() > before {
                    probes.push(start.elapsed().as_millis() as u64);
                }
                all_open = all_open || fleet.iter().all(open);
                tokio::time::sleep(Duration::from_millis(gap)).await;
            }
            probes
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// However calls arrive across the fleet, once every replica is
        /// open the dead target sees one probe per cool-off (10 s), never
        /// two within one.
        #[test]
        fn a_fleet_never_sends_two_probes_in_one_cool_off(
            replicas in 2usize..6,
            arrivals in proptest::collection::vec((0usize..6, 5u64..800), 200..600),
        ) {
            let probes = probes_after_all_open(replicas, &arrivals);
            for pair in probes.windows(2) {
                prop_assert!(
                    pair[1] - pair[0] >= 9_950,
                    "probes at {} ms and {} ms: {probes:?}", pair[0], pair[1]
                );
            }
        }
    }
}

/// The replicas count each other from their heartbeats: a replica gone is
/// no longer counted after a few reads of the store, and one that lost the
/// store counts itself alone.
#[tokio::test(start_paused = true)]
async fn replicas_count_the_live_members_that_share_the_providers_limits() {
    let store = MemoryStore::new().with_latency(Duration::from_millis(1));
    let mut fleet = fleet_of(&store, 3);
    settle(2_100).await;
    for r in &fleet {
        assert_eq!(r.fleet.status().members, 3, "{}", r.id);
    }
    drop(fleet.pop());
    settle(4_100).await;
    for r in &fleet {
        assert_eq!(r.fleet.status().members, 2, "{} after one left", r.id);
    }
    store.set_available(false);
    settle(100).await;
    for r in &fleet {
        assert_eq!(r.fleet.status().members, 1, "{} without the store", r.id);
    }
    let alone = Replica::with(store.clone(), "web-9", |f| f.share_pacing(false));
    store.set_available(true);
    settle(6_000).await;
    assert_eq!(alone.fleet.status().members, 1, "not sharing: alone");
    assert_eq!(
        fleet[0].fleet.status().members,
        2,
        "the one not sharing is not counted"
    );
}

/// A probe that outlasts its cool-off fails: the reopen has no cool-off
/// left (it counts from when the probe was sent), and is published all the
/// same, carrying the fleet's failed probes.
#[tokio::test(start_paused = true)]
async fn a_reopen_with_no_cool_off_left_is_published_with_the_fleets_growth() {
    use levee_redis::{Kind, Notice, Space, Store};
    let (store, fleet) = open_fleet(3).await;
    let space = Space::new("test:v1:s:", "test:v1:notices", "test:v1:index");
    let mut notices = store.listen(&space).await.unwrap();
    let holder = granted_after_cool_off(&fleet).await;
    fleet[holder].delay(Duration::from_secs(12));
    let _ = fleet[holder].call().await;
    settle(50).await;
    let mut reopens = Vec::new();
    while let Ok(bytes) = notices.try_recv() {
        let n = Notice::decode(&bytes).unwrap();
        if n.kind == Kind::Opened {
            reopens.push((n.count, n.wait));
        }
    }
    assert_eq!(
        reopens,
        [(1, Duration::from_millis(1))],
        "one reopen, no cool-off left, the fleet's first failed probe"
    );
}
