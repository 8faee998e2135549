//! The peer stacks are the crates themselves, not re-implementations: their
//! breakers' states come from the crates' own APIs, their refusals are the
//! crates' error types, and every request is accounted for.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use levee_drill::outcome::Fail;
use levee_drill::peers::failsafe::FailsafeStack;
use levee_drill::peers::gateway::{COOLDOWN, GatewayRouter};
use levee_drill::peers::tower_resilience::{ChatRequest, TowerResilienceStack};
use levee_drill::provider::Provider;
use levee_drill::scenario::Scenario;
use levee_drill::suite;
use tokio::time::Instant;
use tower::ServiceExt;

mod support;
use support::{assert_accounted, run};

/// One account (or two), the first down from the start with `status`.
fn dead_primary(accounts: usize, status: u16) -> Arc<Scenario> {
    let mut text = format!(
        "name = \"dead\"\nduration = \"60s\"\nseed = 5\n[load]\nrate = 5\nmodel = \"gpt-4o\"\n\
         [[target]]\nname = \"primary\"\ndialect = \"openai\"\nlatency = \"100ms\"\n\
         [[fault]]\ntarget = \"primary\"\nkind = \"outage\"\nstatus = {status}\n"
    );
    if accounts > 1 {
        text.push_str("[[target]]\nname = \"backup\"\ndialect = \"openai\"\nlatency = \"100ms\"\n");
    }
    Arc::new(Scenario::from_toml(&text).expect("scenario"))
}

/// A `gateway-router` over a primary and a backup, and a seeded generator.
fn primary_and_backup_router() -> (GatewayRouter, RefCell<fastrand::Rng>) {
    let router = GatewayRouter::new(
        vec!["primary".into(), "backup".into()],
        Instant::now(),
        Default::default(),
    );
    (router, RefCell::new(fastrand::Rng::with_seed(1)))
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
}

#[test]
fn tower_resilience_opens_its_own_breaker_and_refuses_with_its_own_error() {
    use tower_resilience::circuitbreaker::{CircuitBreakerError, CircuitState};
    paused().block_on(async {
        let sc = dead_primary(1, 503);
        let provider = Provider::new(sc.clone());
        let stack = TowerResilienceStack::new(&sc, &provider, Instant::now()).expect("stack");
        // The stack's service is the crate's `Retry` over the crate's breakers.
        let _: &tower_resilience::retry::Retry<_, ChatRequest, _, _> = stack.service();
        let breaker = &stack.breakers()[0];
        assert_eq!(breaker.state_sync(), CircuitState::Closed);
        // Every call a 503: 33 requests of 3 attempts each, then the 100th
        // call (its window and minimum) opens it and the retry is refused.
        for _ in 0..33 {
            assert_eq!(stack.call().await, Err(Fail::Upstream));
        }
        assert_eq!(breaker.state_sync(), CircuitState::Closed);
        assert_eq!(stack.call().await, Err(Fail::CircuitOpen));
        assert_eq!(
            breaker.state_sync(),
            CircuitState::Open,
            "the crate's state"
        );
        let calls = provider.stats().by_target["primary"];
        assert_eq!(calls, 100);
        let refused = stack.service().clone().oneshot(ChatRequest).await;
        assert!(matches!(refused, Err(CircuitBreakerError::OpenCircuit)));
        assert_eq!(stack.call().await, Err(Fail::CircuitOpen));
        assert_eq!(
            provider.stats().by_target["primary"],
            calls,
            "refused unsent"
        );
        // Its 30-s wait runs on the drill's clock: then one half-open call.
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert!(stack.call().await.is_err());
        assert_eq!(provider.stats().by_target["primary"], calls + 1);
        assert!(
            stack
                .transitions()
                .iter()
                .any(|t| t.from == "open" && t.to == "half_open")
        );
    });
}

#[test]
fn tower_resilience_does_not_count_a_429_as_its_docs_classify() {
    use tower_resilience::circuitbreaker::CircuitState;
    paused().block_on(async {
        let sc = dead_primary(1, 429);
        let provider = Provider::new(sc.clone());
        let stack = TowerResilienceStack::new(&sc, &provider, Instant::now()).expect("stack");
        for _ in 0..50 {
            assert!(stack.call().await.is_err());
        }
        assert_eq!(provider.stats().by_target["primary"], 150);
        assert_eq!(stack.breakers()[0].state_sync(), CircuitState::Closed);
    });
}

#[test]
fn failsafe_opens_its_own_state_machine_and_refuses_with_its_own_error() {
    use failsafe::futures::CircuitBreaker as _;
    paused().block_on(async {
        let sc = dead_primary(2, 503);
        let provider = Provider::new(sc.clone());
        let stack = FailsafeStack::new(&sc, Instant::now(), 0);
        let rng = RefCell::new(fastrand::Rng::with_seed(1));
        let _: &failsafe::StateMachine<_, _> = &stack.breakers()[0];
        assert_eq!(stack.is_call_permitted(0), Some(true));
        // Five consecutive failures open it: the first request's three
        // attempts, then the second's two; its third goes to the backup.
        assert_eq!(stack.call(&provider, &rng).await, Err(Fail::Upstream));
        assert_eq!(stack.call(&provider, &rng).await, Ok(1));
        assert_eq!(
            stack.is_call_permitted(0),
            Some(false),
            "failsafe's own state"
        );
        assert_eq!(provider.stats().by_target["primary"], 5);
        // Refused by the crate, as its `Error::Rejected`; the backup serves.
        let refused = stack.breakers()[0].call(async { Ok::<(), ()>(()) }).await;
        assert!(matches!(refused, Err(failsafe::Error::Rejected)));
        assert_eq!(stack.call(&provider, &rng).await, Ok(1));
        assert_eq!(provider.stats().by_target["primary"], 5, "refused unsent");
        // Its first opening lasts 5 to 10 s (equal jitter of 10 s), virtual.
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(stack.is_call_permitted(0), Some(true), "half-open");
    });
}

#[test]
fn the_gateway_router_cools_a_deployment_down_on_a_429_for_5_seconds() {
    paused().block_on(async {
        let sc = dead_primary(2, 429);
        let provider = Provider::new(sc.clone());
        let (router, rng) = primary_and_backup_router();
        // The 429 cools the primary; the retry goes to the backup at once.
        assert_eq!(router.call(&provider, &rng).await, Ok(1));
        assert!(router.is_cooling(0));
        assert_eq!(router.call(&provider, &rng).await, Ok(1));
        assert_eq!(provider.stats().by_target["primary"], 1);
        tokio::time::sleep(COOLDOWN).await;
        assert!(!router.is_cooling(0), "back with no probe");
    });
}

#[test]
fn the_gateway_router_counts_only_a_requests_first_failure_toward_a_cooldown() {
    paused().block_on(async {
        let sc = dead_primary(2, 500);
        let provider = Provider::new(sc.clone());
        let (router, rng) = primary_and_backup_router();
        // The primary is tried three times a request (it stays the lowest
        // order), the backup serves from the fallback hop, and each request
        // counts one failure.
        for n in 1..=4 {
            assert_eq!(router.call(&provider, &rng).await, Ok(1));
            assert_eq!(provider.stats().by_target["primary"], 3 * n);
            assert!(!router.is_cooling(0), "after {n} requests");
        }
        // The fifth request's first failure makes 5 of 5 and cools it: its
        // retry goes to the backup at once.
        assert_eq!(router.call(&provider, &rng).await, Ok(1));
        assert!(router.is_cooling(0));
        assert_eq!(provider.stats().by_target["primary"], 13);
        assert_eq!(router.call(&provider, &rng).await, Ok(1));
        assert_eq!(
            provider.stats().by_target["primary"],
            13,
            "cooled: not called"
        );
    });
}

#[test]
fn the_gateway_router_retries_a_throttled_backup_in_its_fallback_hop_and_the_sdk_waits_out_no_deployments()
 {
    paused().block_on(async {
        let text = "name = \"both\"\nduration = \"60s\"\nseed = 5\n[load]\nrate = 5\nmodel = \"gpt-4o\"\n\
                    [[target]]\nname = \"primary\"\ndialect = \"openai\"\nlatency = \"100ms\"\n\
                    [[target]]\nname = \"backup\"\ndialect = \"openai\"\nlatency = \"100ms\"\n\
                    [[fault]]\ntarget = \"*\"\nkind = \"outage\"\nstatus = 429\n";
        let provider = Provider::new(Arc::new(Scenario::from_toml(text).expect("scenario")));
        let (router, rng) = primary_and_backup_router();
        let started = Instant::now();
        assert!(router.call(&provider, &rng).await.is_err());
        // Each time the proxy tries: the primary once (its 429 cools it),
        // the backup twice in the retries (not counted) and three times in
        // the fallback hop (whose last error cools it). In between, the
        // SDK's second try finds every deployment cooling down and waits
        // the "No deployments available" answer's 5 s.
        let stats = provider.stats();
        assert_eq!(stats.by_target["primary"], 2);
        assert_eq!(stats.by_target["backup"], 10);
        assert!(started.elapsed() >= COOLDOWN);
    });
}

#[test]
fn every_peer_stack_accounts_for_every_request_in_every_builtin_scenario() {
    for mut sc in suite::scenarios().expect("the built-in scenarios parse") {
        sc.duration = sc.duration.min(Duration::from_secs(60));
        sc.stacks = vec![
            "tower-resilience".into(),
            "failsafe".into(),
            "gateway-router".into(),
        ];
        let r = run(&sc);
        assert_accounted(&r);
        assert_eq!(r.results.len(), 3, "{}", r.scenario);
    }
}

#[test]
fn the_default_stacks_are_every_stack() {
    let sc = support::scenario("hard-outage");
    assert_eq!(
        sc.stacks,
        [
            "unprotected",
            "naive",
            "tower-resilience",
            "failsafe",
            "gateway-router",
            "levee"
        ]
    );
}
