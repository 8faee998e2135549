//! Shadow probes: while a target's breaker is open, copies of requests the
//! fallback serves go to it; a copy's success closes the breaker, so the
//! target is back within a probe interval of recovering, and no caller
//! ever gets a copy's answer.

mod failover_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Request;
use http_body_util::BodyExt;
use levee_core::breaker::BreakerStatus;
use tokio::time::Instant;
use tower::{Service, ServiceExt};
use tower_levee::breaker::ShadowProbe;
use tower_levee::failover::{Failover, ServedBy, ShadowProbes, Target};
use tower_levee::retry::RetryBudget;

use failover_support::{Reply1, Scripted, breaker, req, response};

const GATE: Duration = Duration::from_secs(1);

/// What the primary saw: callers' calls and shadow copies, apart.
#[derive(Clone, Default)]
struct Seen {
    callers: Arc<AtomicUsize>,
    copies: Arc<Mutex<Vec<Instant>>>,
}

/// A primary that answers 503 until `recovers` (from the test's start),
/// then 200, counting callers' calls and copies apart.
fn primary(recovers: Duration, seen: &Seen) -> Scripted {
    failing(move |t| t < recovers, seen)
}

/// A primary that answers 503 while `fails(time since the test's start)`,
/// else 200, counting callers' calls and copies apart.
fn failing(fails: impl Fn(Duration) -> bool + Send + Sync + 'static, seen: &Seen) -> Scripted {
    let start = Instant::now();
    let seen = seen.clone();
    Scripted::new(move |req: &Request<String>| {
        if req.extensions().get::<ShadowProbe>().is_some() {
            seen.copies.lock().unwrap().push(Instant::now());
        } else {
            seen.callers.fetch_add(1, Ordering::SeqCst);
        }
        if fails(start.elapsed()) {
            Reply1::Now(response(503, None, ""))
        } else {
            Reply1::Now(response(200, None, r#"{"id":"primary"}"#))
        }
    })
}

/// A primary and an always-healthy fallback, with shadow probes if given.
fn failover(
    primary: Scripted,
    shadow: Option<ShadowProbes<String>>,
) -> Failover<String, String, Scripted, failover_support::TestClassifier> {
    let builder = Failover::builder()
        .target(Target::new("primary", primary).breaker(breaker(GATE, GATE)))
        .target(Target::new("fallback", Scripted::ok()).breaker(breaker(GATE, GATE)));
    match shadow {
        Some(probes) => builder.shadow_probes(probes),
        None => builder,
    }
    .build()
    .unwrap()
}

/// Sends a request every 100 ms for `run`: when the primary first served
/// one after `after`, and whether every request was served.
async fn drive<S>(svc: &S, run: Duration, after: Duration) -> (Option<Duration>, bool)
where
    S: Service<Request<String>, Response = http::Response<tower_levee::body::ResponseBody<String>>>
        + Clone,
    S::Error: std::fmt::Debug,
{
    drive_every(svc, run, after, Duration::from_millis(100)).await
}

/// [`drive`], a request every `period`.
async fn drive_every<S>(
    svc: &S,
    run: Duration,
    after: Duration,
    period: Duration,
) -> (Option<Duration>, bool)
where
    S: Service<Request<String>, Response = http::Response<tower_levee::body::ResponseBody<String>>>
        + Clone,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    let mut back = None;
    let mut all_served = true;
    while start.elapsed() < run {
        let res = svc.clone().oneshot(req()).await.unwrap();
        let by = ServedBy::of(&res).expect("served by a target");
        all_served &= res.status().is_success();
        res.into_body().collect().await.unwrap();
        // Let the copies' tasks run.
        tokio::task::yield_now().await;
        let t = start.elapsed();
        if back.is_none() && t >= after && by.index == 0 {
            back = Some(t);
        }
        tokio::time::advance(period).await;
    }
    (back, all_served)
}

#[tokio::test(start_paused = true)]
async fn a_shadow_probe_closes_a_recovered_breaker_while_its_callers_are_served_by_the_fallback() {
    let recovers = Duration::from_secs(22);
    let seen = Seen::default();
    let svc = failover(primary(recovers, &seen), Some(ShadowProbes::new()));
    let (back, all_served) = drive(&svc, Duration::from_secs(40), recovers).await;
    assert!(all_served, "every caller served");
    let back = back.expect("the primary serves again");
    let copies = seen.copies.lock().unwrap().len();
    println!("shadow probes: recovered at {recovers:?}, back at {back:?}, {copies} copies");
    assert!(
        back <= recovers + Duration::from_millis(1200),
        "back {back:?} after recovering at {recovers:?}"
    );
    // One copy a second while open, none once closed.
    let copies = seen.copies.lock().unwrap().clone();
    assert!((20..=24).contains(&copies.len()), "{} copies", copies.len());
    for pair in copies.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_secs(1), "{pair:?}");
    }
    assert!(copies.last().unwrap().elapsed() >= Duration::from_secs(15));
}

#[tokio::test(start_paused = true)]
async fn without_shadow_probes_the_primary_is_back_only_when_a_callers_probe_finds_it() {
    let recovers = Duration::from_secs(22);
    let seen = Seen::default();
    let svc = failover(primary(recovers, &seen), None);
    let (back, all_served) = drive(&svc, Duration::from_secs(40), recovers).await;
    assert!(all_served);
    let back = back.expect("the primary serves again");
    println!("no shadow probes: recovered at {recovers:?}, back at {back:?}");
    // The breaker's own probe, a caller's request, waits out its cool-off.
    assert!(back >= recovers + Duration::from_secs(5), "back {back:?}");
    assert!(seen.copies.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_copy_changes_nothing_the_cool_off_runs_on_and_never_grows() {
    // Never recovers: copies fail every second; the callers' own probes
    // still come at the cool-off the breaker chose, no later.
    let seen = Seen::default();
    let with = failover(primary(Duration::MAX, &seen), Some(ShadowProbes::new()));
    drive(&with, Duration::from_secs(60), Duration::ZERO).await;
    let callers_with = seen.callers.load(Ordering::SeqCst);
    let alone = Seen::default();
    let without = failover(primary(Duration::MAX, &alone), None);
    drive(&without, Duration::from_secs(60), Duration::ZERO).await;
    assert_eq!(callers_with, alone.callers.load(Ordering::SeqCst));
    assert!(seen.copies.lock().unwrap().len() >= 50);
    let breaker = with.handle();
    let breaker = breaker.breaker("primary").unwrap();
    assert_eq!(
        breaker.breaker_status("api.example.com"),
        Some(BreakerStatus::Open)
    );
}

#[tokio::test(start_paused = true)]
async fn copies_draw_on_the_retry_budget_and_none_go_when_it_is_empty() {
    let budget = Arc::new(RetryBudget::new(Duration::from_secs(10), 0, 0.0));
    let seen = Seen::default();
    let svc = failover(
        primary(Duration::from_secs(5), &seen),
        Some(ShadowProbes::new().budget(budget.clone())),
    );
    drive(&svc, Duration::from_secs(10), Duration::ZERO).await;
    assert!(seen.copies.lock().unwrap().is_empty());
    assert!(budget.snapshot().budget_exhausted > 0);
}

#[tokio::test(start_paused = true)]
async fn copies_are_prepared_before_they_are_sent() {
    let seen = Seen::default();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let record = bodies.clone();
    let start = Instant::now();
    let primary = Scripted::new(move |req: &Request<String>| {
        if req.extensions().get::<ShadowProbe>().is_some() {
            record.lock().unwrap().push(req.body().clone());
        }
        let _ = &seen;
        match start.elapsed() < Duration::from_secs(3) {
            true => Reply1::Now(response(503, None, "")),
            false => Reply1::Now(response(200, None, "{}")),
        }
    });
    let probes = ShadowProbes::new().prepare(|req: &mut Request<String>| {
        *req.body_mut() = r#"{"max_tokens":1}"#.to_owned();
    });
    let svc = failover(primary, Some(probes));
    drive(&svc, Duration::from_secs(6), Duration::ZERO).await;
    let bodies = bodies.lock().unwrap();
    assert!(!bodies.is_empty());
    assert!(bodies.iter().all(|b| b == r#"{"max_tokens":1}"#));
}

#[tokio::test(start_paused = true)]
async fn a_streamed_copy_closes_the_breaker_at_its_first_output() {
    // Back at 5 s with a stream that is cut after its first output: enough
    // for a copy, which asks only whether the target answers.
    let start = Instant::now();
    let cut_stream = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let primary = Scripted::new(move |_: &Request<String>| {
        if start.elapsed() < Duration::from_secs(5) {
            return Reply1::Now(response(503, None, ""));
        }
        let mut res = response(200, None, cut_stream);
        res.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        Reply1::Now(res)
    });
    let svc = failover(primary, Some(ShadowProbes::new()));
    let handle = svc.handle();
    let status = || {
        handle
            .breaker("primary")
            .unwrap()
            .breaker_status("api.example.com")
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(6_100) {
        if start.elapsed() >= Duration::from_secs(5) && status() == Some(BreakerStatus::Closed) {
            break;
        }
        let res = svc.clone().oneshot(req()).await.unwrap();
        res.into_body().collect().await.unwrap();
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert_eq!(
        status(),
        Some(BreakerStatus::Closed),
        "at {:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_breaker_open_on_a_rejected_key_admits_no_copy() {
    // A revoked key: the primary answers 401 to everything, copies too if
    // they got through.
    let seen = Seen::default();
    let record = seen.clone();
    let primary = Scripted::new(move |req: &Request<String>| {
        if req.extensions().get::<ShadowProbe>().is_some() {
            record.copies.lock().unwrap().push(Instant::now());
        }
        Reply1::Now(response(401, None, ""))
    });
    let svc = failover(primary, Some(ShadowProbes::new()));
    let (_, all_served) = drive(&svc, Duration::from_secs(30), Duration::ZERO).await;
    assert!(all_served, "the fallback serves");
    assert!(
        seen.copies.lock().unwrap().is_empty(),
        "no copy reached the primary"
    );
}

#[tokio::test(start_paused = true)]
async fn a_newer_copy_replaces_one_still_in_flight() {
    // Callers are failed fast (the breaker opens, and its own probes
    // fail); copies hang.
    let copies = Arc::new(AtomicUsize::new(0));
    let count = copies.clone();
    let primary = Scripted::new(move |req: &Request<String>| {
        if req.extensions().get::<ShadowProbe>().is_none() {
            return Reply1::Now(response(503, None, ""));
        }
        count.fetch_add(1, Ordering::SeqCst);
        Reply1::Hang
    });
    let svc = failover(primary, Some(ShadowProbes::new()));
    let tasks = tokio::runtime::Handle::current().metrics();
    let before = tasks.num_alive_tasks();
    drive(&svc, Duration::from_secs(15), Duration::ZERO).await;
    // A copy a second, the latest only in flight.
    assert!(copies.load(Ordering::SeqCst) >= 12, "{copies:?} copies");
    assert!(tasks.num_alive_tasks() <= before + 1, "copies pile up");
}

#[tokio::test(start_paused = true)]
async fn the_close_a_copy_causes_is_an_event_of_origin_probe() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let recorded = tower_levee::breaker::BreakerLayer::builder()
        .seed(7)
        .classifier(failover_support::TestClassifier::default())
        .on_event(move |e: &tower_levee::breaker::ScopeEvent| {
            log.lock()
                .unwrap()
                .push((e.to().as_str(), e.origin().as_str()));
        })
        .build()
        .unwrap();
    let recovers = Duration::from_secs(22);
    let seen = Seen::default();
    let svc = Failover::builder()
        .target(Target::new("primary", primary(recovers, &seen)).breaker(recorded))
        .target(Target::new("fallback", Scripted::ok()).breaker(breaker(GATE, GATE)))
        .shadow_probes(ShadowProbes::new())
        .build()
        .unwrap();
    let (back, _) = drive(&svc, Duration::from_secs(30), recovers).await;
    assert!(back.is_some());
    let events = events.lock().unwrap().clone();
    assert_eq!(events.first(), Some(&("open", "traffic")), "{events:?}");
    assert_eq!(events.last(), Some(&("closed", "probe")), "{events:?}");
}

#[tokio::test(start_paused = true)]
async fn an_active_probe_finds_a_recovered_target_back_when_no_traffic_comes() {
    let recovers = Duration::from_secs(12);
    let run = |active: bool| async move {
        let seen = Seen::default();
        let mut probes = ShadowProbes::new();
        if active {
            probes = probes.active("primary", models);
        }
        let svc = failover(primary(recovers, &seen), Some(probes));
        // Five requests open the primary's breaker; then nothing comes.
        for _ in 0..5 {
            let res = svc.clone().oneshot(req()).await.unwrap();
            assert!(res.status().is_success());
        }
        tokio::time::sleep(Duration::from_secs(20)).await;
        let handle = svc.handle();
        let status = handle
            .breaker("primary")
            .unwrap()
            .breaker_status("api.example.com");
        (status, seen.copies.lock().unwrap().clone())
    };
    let (with, probes) = run(true).await;
    assert_eq!(
        with,
        Some(BreakerStatus::Closed),
        "found back with no traffic"
    );
    // One a second while open, from the opening; none once closed.
    assert!((10..=14).contains(&probes.len()), "{} probes", probes.len());
    let (without, copies) = run(false).await;
    assert_eq!(without, Some(BreakerStatus::Open));
    assert!(copies.is_empty());
}

#[test]
fn an_active_probe_for_a_target_that_does_not_exist_fails_the_build() {
    let err = build_error(ShadowProbes::new().active("primray", models));
    assert!(err.contains("shadow_probes.active"), "{err}");
    assert!(err.contains("primray"), "{err}");
}

#[test]
fn a_zero_shadow_probe_interval_fails_the_build() {
    let err = build_error(ShadowProbes::new().interval(Duration::ZERO));
    assert!(err.contains("shadow_probes.interval"), "{err}");
}

/// The error a failover with `probes` fails to build with.
fn build_error(probes: ShadowProbes<String>) -> String {
    Failover::builder()
        .target(Target::new("primary", Scripted::ok()).breaker(breaker(GATE, GATE)))
        .shadow_probes(probes)
        .build()
        .unwrap_err()
        .to_string()
}

#[tokio::test(start_paused = true)]
async fn active_probes_end_when_the_failover_is_dropped() {
    let seen = Seen::default();
    let probes = ShadowProbes::new().active("primary", models);
    let svc = failover(primary(Duration::MAX, &seen), Some(probes));
    for _ in 0..5 {
        svc.clone().oneshot(req()).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = seen.copies.lock().unwrap().len();
    assert!(before >= 3, "{before} probes while open");
    drop(svc);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let after = seen.copies.lock().unwrap().len();
    assert!(
        after <= before + 1,
        "{before} probes, then {after} after the drop"
    );
}

#[tokio::test(start_paused = true)]
async fn in_a_fleet_each_replica_spaces_its_copies_by_the_replicas_counted() {
    let seen = Seen::default();
    let svc = failover(primary(Duration::MAX, &seen), Some(ShadowProbes::new()));
    // The fleet counts four replicas sending to these providers.
    let handle = svc.handle();
    let breaker = handle.breaker("primary").unwrap();
    breaker.adopt(tower_levee::breaker::FleetUpdate::Replicas { count: 4 });
    drive(&svc, Duration::from_secs(30), Duration::ZERO).await;
    let copies = seen.copies.lock().unwrap().clone();
    assert!((6..=9).contains(&copies.len()), "{} copies", copies.len());
    for pair in copies.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_secs(4), "{pair:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn copies_stay_within_their_share_of_the_requests_a_quiet_service_turns_away() {
    // Two requests a second: the interval alone would allow a copy a
    // second, half the traffic; a tenth of it is one copy in five seconds.
    // The first goes at once; then one per ten requests turned away.
    let copies = copies_at_two_a_second(ShadowProbes::new()).await;
    assert!((8..=11).contains(&copies), "{copies} copies");
    // A share of one: the interval alone spaces them.
    let copies = copies_at_two_a_second(ShadowProbes::new().share(1.0)).await;
    assert!((40..=50).contains(&copies), "{copies} copies");
}

/// The copies a primary dead for 50 s gets at two requests a second.
async fn copies_at_two_a_second(probes: ShadowProbes<String>) -> usize {
    let seen = Seen::default();
    let svc = failover(primary(Duration::MAX, &seen), Some(probes));
    let every = Duration::from_millis(500);
    drive_every(&svc, Duration::from_secs(50), Duration::ZERO, every).await;
    seen.copies.lock().unwrap().len()
}

#[tokio::test(start_paused = true)]
async fn a_target_failing_now_and_then_while_closed_gets_copies_at_full_rate_when_it_opens() {
    // One failure every 20 s for three minutes (its breaker stays closed),
    // then dead: its open spell starts when it opens, not at the first
    // failure three minutes before (which would space copies 8 s apart).
    let seen = Seen::default();
    let start = Instant::now();
    let dies = Duration::from_secs(180);
    let primary = failing(move |t| t >= dies || t.as_millis() % 20_000 < 100, &seen);
    let svc = failover(primary, Some(ShadowProbes::new()));
    drive(&svc, dies + Duration::from_secs(20), Duration::ZERO).await;
    let copies = seen.copies.lock().unwrap().clone();
    assert!(
        copies.iter().all(|at| *at - start >= dies),
        "no copy while closed"
    );
    assert!((15..=20).contains(&copies.len()), "{} copies", copies.len());
}

#[test]
fn a_shadow_probe_share_out_of_range_fails_the_build() {
    for share in [0.0, 1.5, f64::NAN] {
        let err = build_error(ShadowProbes::new().share(share));
        assert!(err.contains("shadow_probes.share"), "{err}");
    }
}

#[tokio::test(start_paused = true)]
async fn active_probes_start_at_the_first_spacing_however_long_the_process_ran() {
    let seen = Seen::default();
    let probes = ShadowProbes::new().active("primary", models);
    let svc = failover(primary(Duration::MAX, &seen), Some(probes));
    // An hour of quiet before the target fails.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    for _ in 0..5 {
        svc.clone().oneshot(req()).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let probes = seen.copies.lock().unwrap().len();
    assert!(
        (8..=11).contains(&probes),
        "{probes} probes in the first 10 s"
    );
}

/// An active probe's request: the models list.
fn models() -> Request<String> {
    Request::get("https://api.example.com/v1/models")
        .body(String::new())
        .unwrap()
}
