//! Which target a request goes to, and when it goes on: paused time,
//! scripted targets.

mod failover_support;

use std::time::Duration;

use http::{Request, StatusCode};
use levee_core::classify::Verdict;
use tower::{Service, ServiceExt};
use tower_levee::failover::{Failover, NoTargetAvailable, RefusalKind, ServedBy, Target};

use failover_support::{QUOTA_BODY, Reply1, Scripted, breaker, req, response};

const GATE: Duration = Duration::from_secs(5);
const PARK: Duration = Duration::from_secs(60);

fn target(
    name: &'static str,
    inner: &Scripted,
) -> Target<Scripted, String, failover_support::TestClassifier> {
    Target::new(name, inner.clone()).breaker(breaker(GATE, PARK))
}

/// A failover over `primary`, then `backup`, each behind its own breaker.
fn primary_then_backup(
    primary: &Scripted,
    backup: &Scripted,
) -> Failover<String, String, Scripted, failover_support::TestClassifier> {
    Failover::builder()
        .target(target("primary", primary))
        .target(target("backup", backup))
        .build()
        .unwrap()
}

async fn send(
    svc: &mut Failover<String, String, Scripted, failover_support::TestClassifier>,
) -> Result<http::Response<tower_levee::body::ResponseBody<String>>, tower::BoxError> {
    svc.ready().await.unwrap().call(req()).await
}

fn served_by(res: &http::Response<tower_levee::body::ResponseBody<String>>) -> ServedBy {
    ServedBy::of(res).expect("every target's answer carries ServedBy")
}

#[tokio::test(start_paused = true)]
async fn a_throttled_primary_sends_the_request_to_the_next_target_and_served_by_says_so() {
    let primary = Scripted::status(429, Some("5"));
    let backup = Scripted::ok();
    let mut svc = primary_then_backup(&primary, &backup);
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let by = served_by(&res);
    assert_eq!(
        (by.target, by.index, by.attempt, by.fallback),
        ("backup", 1, 2, true)
    );
    assert_eq!((primary.calls(), backup.calls()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn served_by_travels_in_the_body_and_as_an_extension_only_when_asked() {
    let (primary, backup) = (Scripted::status(429, Some("5")), Scripted::ok());
    let mut svc = primary_then_backup(&primary, &backup);
    let res = send(&mut svc).await.unwrap();
    assert!(res.extensions().get::<ServedBy>().is_none());
    let in_body = served_by(&res);
    // Asked for, the same record is an extension too, and survives a
    // mapped body.
    let (primary, backup) = (Scripted::status(429, Some("5")), Scripted::ok());
    let mut svc = Failover::builder()
        .target(target("primary", &primary))
        .target(target("backup", &backup))
        .served_by_extension(true)
        .build()
        .unwrap();
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.extensions().get::<ServedBy>(), Some(&in_body));
    let mapped = res.map(|_| ());
    assert_eq!(mapped.extensions().get::<ServedBy>(), Some(&in_body));
}

#[tokio::test(start_paused = true)]
async fn a_gated_primary_costs_zero_calls_while_gated() {
    let primary = Scripted::status(429, Some("5"));
    let backup = Scripted::ok();
    let mut svc = primary_then_backup(&primary, &backup);
    send(&mut svc).await.unwrap();
    // 49 more requests inside the 5 s gate: none reaches the primary.
    for _ in 0..49 {
        tokio::time::sleep(Duration::from_millis(90)).await;
        let res = send(&mut svc).await.unwrap();
        assert_eq!(served_by(&res).attempt, 1, "the backup is the first call");
    }
    assert_eq!(primary.calls(), 1);
    assert_eq!(backup.calls(), 50);
    // The gate reopens without a probe: the primary is tried again.
    tokio::time::sleep(GATE).await;
    send(&mut svc).await.unwrap();
    assert_eq!(primary.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_parked_primary_is_never_called_again_until_its_reset() {
    let primary = Scripted::new(|_| Reply1::Now(response(429, None, QUOTA_BODY)));
    let backup = Scripted::ok();
    let mut svc = primary_then_backup(&primary, &backup);
    let handle = svc.handle();
    for _ in 0..59 {
        let res = send(&mut svc).await.unwrap();
        assert_eq!(served_by(&res).target, "backup");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(primary.calls(), 1, "parked for 60 s after one quota answer");
    let health = handle.snapshot();
    assert_eq!(health.targets[0].state, "parked");
    assert_eq!(
        health.targets[0].reason.as_deref(),
        Some("test:insufficient_quota")
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    send(&mut svc).await.unwrap();
    assert_eq!(primary.calls(), 2, "called again after the reset");
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_providers_accounts_are_skipped_in_favour_of_the_other_provider() {
    let overloaded = || Scripted::status(529, None);
    let (a, b, c) = (overloaded(), overloaded(), overloaded());
    let openai = Scripted::ok();
    let mut svc = Failover::builder()
        .target(target("anthropic-a", &a).provider("anthropic"))
        .target(target("anthropic-b", &b).provider("anthropic"))
        .target(target("anthropic-c", &c).provider("anthropic"))
        .target(target("openai-a", &openai).provider("openai"))
        .build()
        .unwrap();
    let res = send(&mut svc).await.unwrap();
    // After a 529, the next call goes to another provider, not a sibling key.
    assert_eq!(served_by(&res).target, "openai-a");
    assert_eq!((a.calls(), b.calls(), c.calls()), (1, 0, 0));
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let res = send(&mut svc).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(served_by(&res).target, "openai-a");
    }
    // anthropic-a failed until its breaker opened; then anthropic-b failed
    // too: two accounts together mark the provider overloaded, and every
    // request goes to openai first. anthropic-c is never called.
    assert_eq!(a.calls(), 5);
    assert_eq!(b.calls(), 1);
    assert_eq!(c.calls(), 0);
    let health = svc.handle().snapshot();
    assert!(health.targets[2].provider_overloaded);
    assert!(!health.targets[3].provider_overloaded);
    assert_eq!(health.served, 41);
    assert_eq!(health.fallback_share, 1.0);
}

#[tokio::test(start_paused = true)]
async fn after_an_overload_a_target_in_another_region_comes_before_a_sibling_key() {
    let east_a = Scripted::status(529, None);
    let east_b = Scripted::ok();
    let west = Scripted::ok();
    let mut svc = Failover::builder()
        .target(
            target("east-a", &east_a)
                .provider("anthropic")
                .region("us-east"),
        )
        .target(
            target("east-b", &east_b)
                .provider("anthropic")
                .region("us-east"),
        )
        .target(
            target("west", &west)
                .provider("anthropic")
                .region("us-west"),
        )
        .build()
        .unwrap();
    let res = send(&mut svc).await.unwrap();
    assert_eq!(served_by(&res).target, "west");
    assert_eq!(east_b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_verdict_is_returned_as_is() {
    let primary = Scripted::status(400, None);
    let backup = Scripted::ok();
    let mut svc = primary_then_backup(&primary, &backup);
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(served_by(&res).target, "primary");
    assert_eq!(backup.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fallback_on_hook_overrides_the_policy_per_verdict() {
    let primary = Scripted::status(429, Some("5"));
    let backup = Scripted::ok();
    let mut svc = Failover::builder()
        .target(target("primary", &primary))
        .target(target("backup", &backup))
        .fallback_on(|a| a.verdict != Verdict::Throttled && a.default_policy())
        .build()
        .unwrap();
    // The 429 comes back as it is; the gated primary's refusal then too.
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let err = send(&mut svc).await.unwrap_err();
    assert!(err.is::<tower_levee::breaker::Throttled>(), "{err}");
    assert_eq!((primary.calls(), backup.calls()), (1, 0));

    // And a hook may send a `request` verdict on, which the default never does.
    let picky = Scripted::status(422, None);
    let lenient = Scripted::ok();
    let mut svc = Failover::builder()
        .target(target("picky", &picky))
        .target(target("lenient", &lenient))
        .fallback_on(|a| a.verdict == Verdict::Request || a.default_policy())
        .build()
        .unwrap();
    let res = send(&mut svc).await.unwrap();
    assert_eq!(served_by(&res).target, "lenient");
}

#[tokio::test(start_paused = true)]
async fn max_targets_per_request_bounds_the_calls_and_the_last_answer_is_returned() {
    let targets: Vec<_> = (0..3).map(|_| Scripted::status(503, None)).collect();
    let mut svc = Failover::builder()
        .target(target("t0", &targets[0]))
        .target(target("t1", &targets[1]))
        .target(target("t2", &targets[2]))
        .max_targets_per_request(2)
        .build()
        .unwrap();
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(served_by(&res).target, "t1");
    let calls: Vec<_> = targets.iter().map(Scripted::calls).collect();
    assert_eq!(calls, [1, 1, 0]);
}

#[tokio::test(start_paused = true)]
async fn when_every_target_refuses_nothing_is_sent_and_each_refusal_is_listed() {
    let a = Scripted::status(429, Some("5"));
    let b = Scripted::status(429, Some("5"));
    let mut svc = Failover::builder()
        .target(target("a", &a))
        .target(target("b", &b))
        .build()
        .unwrap();
    send(&mut svc).await.unwrap(); // gates a, then b; b's 429 comes back
    tokio::time::sleep(Duration::from_secs(1)).await;
    let err = send(&mut svc).await.unwrap_err();
    let none = err.downcast_ref::<NoTargetAvailable>().expect("typed");
    assert!(none.all_throttled());
    assert_eq!(none.status_code(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(none.code(), "provider_rate_limited");
    let listed = |none: &NoTargetAvailable| -> Vec<(String, RefusalKind, String)> {
        none.refusals()
            .iter()
            .map(|r| (r.target().to_owned(), r.kind(), r.scope().to_owned()))
            .collect()
    };
    let throttled = |target: &str| {
        let scope = "api.example.com".to_owned();
        (target.to_owned(), RefusalKind::Throttled, scope)
    };
    assert_eq!(listed(none), [throttled("a"), throttled("b")]);
    assert_eq!(none.retry_after(), Duration::from_secs(4));
    // Passed over again: this clone's memo of its last peek at each target
    // names the same refusals.
    let err = send(&mut svc).await.unwrap_err();
    let again = err.downcast_ref::<NoTargetAvailable>().expect("typed");
    assert_eq!(listed(again), [throttled("a"), throttled("b")]);
    assert_eq!((a.calls(), b.calls()), (1, 1), "nothing sent");

    // Once the gates clear, open breakers make it a 503.
    tokio::time::sleep(GATE).await;
    let handle = svc.handle();
    handle.breaker("a").unwrap().open("api.example.com");
    handle.breaker("b").unwrap().isolate("api.example.com");
    let err = send(&mut svc).await.unwrap_err();
    let none = err.downcast_ref::<NoTargetAvailable>().unwrap();
    assert!(!none.all_throttled());
    let kinds: Vec<_> = none.refusals().iter().map(|r| r.kind()).collect();
    assert_eq!(kinds, [RefusalKind::CircuitOpen, RefusalKind::CircuitOpen]);
    assert_eq!(none.status_code(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(none.code(), "circuit_open");
    assert_eq!((a.calls(), b.calls()), (1, 1), "still nothing sent");
    assert_eq!(svc.handle().snapshot().no_target_available, 3);
}

#[tokio::test(start_paused = true)]
async fn each_target_sees_its_rewrite_and_is_admitted_by_its_own_scopes() {
    let shared = Scripted::new(|req: &Request<String>| {
        let status = if req.uri().host() == Some("east.example.com") {
            429
        } else {
            200
        };
        Reply1::Now(response(status, Some("5"), "{}"))
    });
    let layer = breaker(GATE, PARK);
    let mut svc = Failover::builder()
        .target(
            Target::new("east", shared.clone())
                .breaker(layer.clone())
                .rewrite(|r: &mut Request<String>| {
                    *r.uri_mut() = "https://east.example.com/v1/chat".parse().unwrap()
                }),
        )
        .target(
            Target::new("west", shared.clone())
                .breaker(layer.clone())
                .rewrite(|r: &mut Request<String>| {
                    *r.uri_mut() = "https://west.example.com/v1/chat".parse().unwrap()
                }),
        )
        .build()
        .unwrap();
    // One layer shared by both targets: the rewrites give them different
    // scopes, so east's gate does not hold west back.
    for _ in 0..3 {
        let res = send(&mut svc).await.unwrap();
        assert_eq!(served_by(&res).target, "west");
    }
    let uris = shared.uris.lock().unwrap().clone();
    assert_eq!(
        uris,
        [
            "https://east.example.com/v1/chat",
            "https://west.example.com/v1/chat",
            "https://west.example.com/v1/chat",
            "https://west.example.com/v1/chat",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_targets_rewrite_never_reaches_the_next_target() {
    // Each target marks the request it is sent; the first fails over.
    let marks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = marks.clone();
    let upstream = Scripted::new(move |req: &Request<String>| {
        let host = req.uri().host().unwrap_or_default().to_owned();
        let marked: Vec<String> = req
            .headers()
            .get_all("x-rewritten-for")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        let status = if host == "east.example.com" { 503 } else { 200 };
        seen.lock().unwrap().push((host, marked));
        Reply1::Now(response(status, None, "{}"))
    });
    let rewrite_for = |name: &'static str| {
        move |r: &mut Request<String>| {
            r.headers_mut()
                .append("x-rewritten-for", http::HeaderValue::from_static(name));
            *r.uri_mut() = format!("https://{name}.example.com/v1/chat")
                .parse()
                .unwrap();
        }
    };
    let mut svc = Failover::builder()
        .target(target("east", &upstream).rewrite(rewrite_for("east")))
        .target(target("west", &upstream).rewrite(rewrite_for("west")))
        .build()
        .unwrap();
    for _ in 0..2 {
        let res = send(&mut svc).await.unwrap();
        assert_eq!(served_by(&res).target, "west");
    }
    let mark = |host: &str, name: &str| (format!("{host}.example.com"), vec![name.to_owned()]);
    assert_eq!(
        *marks.lock().unwrap(),
        [
            mark("east", "east"),
            mark("west", "west"),
            mark("east", "east"),
            mark("west", "west"),
        ],
        "each target is sent the caller's request with its own rewrite only"
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_sends_the_request_to_the_next_target() {
    let slow = Scripted::new(|_| Reply1::After(Duration::from_secs(10), response(200, None, "{}")));
    let backup = Scripted::ok();
    let mut svc = Failover::builder()
        .target(target("slow", &slow).max_concurrent(1))
        .target(target("backup", &backup))
        .build()
        .unwrap();
    let first = tokio::spawn(svc.ready().await.unwrap().call(req()));
    tokio::task::yield_now().await;
    let res = send(&mut svc).await.unwrap();
    assert_eq!(served_by(&res).target, "backup");
    assert_eq!(slow.calls(), 1, "the full bulkhead refused without calling");
    let res = first.await.unwrap().unwrap();
    assert_eq!(served_by(&res).target, "slow");
}

/// A request body that counts its copies.
#[derive(Debug)]
struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted(self.0.clone())
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_is_copied_only_while_another_target_may_follow() {
    use tower_levee::breaker::BreakerLayer;
    let ok = tower::service_fn(|_req: Request<Counted>| async {
        Ok::<_, tower::BoxError>(response(200, None, "{}"))
    });
    let copies_of_one_call = |svc: &mut Failover<Counted, String, _, _>| {
        let copies = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let request = Request::post("https://api.openai.com/v1/chat/completions")
            .body(Counted(copies.clone()))
            .unwrap();
        let mut svc = svc.clone();
        let copies = copies.clone();
        async move {
            let res = svc.ready().await.unwrap().call(request).await.unwrap();
            (
                served_by(&res).target,
                copies.load(std::sync::atomic::Ordering::SeqCst),
            )
        }
    };
    let rewrite = |r: &mut Request<Counted>| {
        *r.uri_mut() = "https://backup.example.com/v1/chat".parse().unwrap()
    };

    // Two targets, no rewrite: the first is sent a copy, the future keeps
    // the request for the second.
    let mut plain = Failover::builder()
        .target(Target::new("primary", ok))
        .target(Target::new("backup", ok))
        .build()
        .unwrap();
    assert_eq!(copies_of_one_call(&mut plain).await, ("primary", 1));

    // The primary refuses at once (its breaker is open): the backup is the
    // last target left, and its rewrite takes the request itself.
    let open = BreakerLayer::new();
    open.handle().open("api.openai.com");
    let mut rewriting = Failover::builder()
        .target(Target::new("primary", ok).breaker(open))
        .target(Target::new("backup", ok).rewrite(rewrite))
        .build()
        .unwrap();
    assert_eq!(copies_of_one_call(&mut rewriting).await, ("backup", 0));

    // With a rewrite configured, the primary serving: one copy still.
    let mut primary_serves = Failover::builder()
        .target(Target::new("primary", ok))
        .target(Target::new("backup", ok).rewrite(rewrite))
        .build()
        .unwrap();
    assert_eq!(
        copies_of_one_call(&mut primary_serves).await,
        ("primary", 1)
    );
}

/// A target whose service is not ready for its first `polls_pending` polls
/// (across its clones), and counts its calls.
#[derive(Clone)]
struct Warming {
    polls_pending: usize,
    polls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Service<Request<String>> for Warming {
    type Response = http::Response<String>;
    type Error = tower::BoxError;
    type Future = std::future::Ready<Result<http::Response<String>, tower::BoxError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.polls.fetch_add(1, SeqCst) < self.polls_pending {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::ready(Ok(response(200, None, "{}")))
    }
}

#[tokio::test(start_paused = true)]
async fn a_target_not_ready_when_polled_is_readied_in_the_requests_future_and_serves_it() {
    use std::sync::atomic::Ordering::SeqCst;
    let warming = Warming {
        // The caller's copy when the failover is polled ready, then the
        // future's own copy once: ready at its second poll.
        polls_pending: 2,
        polls: Default::default(),
        calls: Default::default(),
    };
    let mut svc = Failover::builder()
        .target(Target::new("warming", warming.clone()).breaker(breaker(GATE, PARK)))
        .build()
        .unwrap();
    let mut future = svc.ready().await.unwrap().call(req());
    let waker = futures_util::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(
        std::pin::Pin::new(&mut future).poll(&mut cx).is_pending(),
        "the target's own service is not ready yet"
    );
    assert!(format!("{future:?}").contains("\"ready\""), "{future:?}");
    assert_eq!(
        warming.calls.load(SeqCst),
        0,
        "nothing is sent before it is ready"
    );
    let res = future.await.unwrap();
    let by = served_by(&res);
    assert_eq!(
        (by.target, by.index, by.attempt, by.fallback),
        ("warming", 0, 1, false)
    );
    assert_eq!(warming.calls.load(SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_passed_over_before_the_first_call_still_marks_when_the_request_may_go_again() {
    use tower_levee::breaker::{FleetUpdate, Reopening};
    let primary = Scripted::ok();
    // The backup throttles for a minute.
    let backup = Scripted::status(429, Some("60"));
    let svc = primary_then_backup(&primary, &backup);
    // The primary's scope is gated for 5 s: the request passes over it
    // (a peek, nothing sent) and is called on the backup.
    let handle = svc.handle();
    let gated = handle.breaker("primary").expect("target");
    assert!(gated.adopt(FleetUpdate::Gated {
        scope: "api.example.com",
        wait: GATE,
        reason: "status:429",
    }));
    let mut svc = svc;
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(served_by(&res).target, "backup");
    assert_eq!((primary.calls(), backup.calls()), (0, 1));
    // The answer is marked with the earlier of the two reopenings: the
    // primary's gate, which refused before the backup was called.
    let reopening = res
        .extensions()
        .get::<Reopening>()
        .copied()
        .expect("no target admits the request now");
    let now = tokio::time::Instant::now();
    assert!(reopening.at <= now + GATE, "{:?}", reopening.at - now);
}
