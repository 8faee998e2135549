//! Model checks of the lock-free paths of the breaker and the bulkhead with
//! [loom], over the crate's own code: built with `--cfg levee_loom`, the
//! registry, the published status word, the published deadlines and the
//! bulkhead's gauges use loom's atomics and locks (`src/sync.rs`), and each
//! model below runs under the interleavings loom explores (preemption
//! bound 3).
//!
//! ```sh
//! RUSTFLAGS="--cfg levee_loom" cargo test -p tower-levee --test loom --release \
//!     --target-dir target/loom
//! ```
//!
//! What they prove, for calls through the real `Breaker` and `Bulkhead`
//! services (the queued bulkhead caller through its compartment, whose
//! register-then-look loop the service's queue runs, since loom cannot run
//! that queue's tokio timer):
//! - probe admission: racing callers into a half-open breaker get at most
//!   `half_open_probes` probes, and a probe whose future is dropped hands
//!   its slot back, so the next caller probes;
//! - the refusal path read without the lock never refuses longer than the
//!   cool-off, and a manual close racing it leaves the breaker closed;
//! - an outcome of a call admitted before the breaker opened does not close
//!   it again (generations), whatever the interleaving;
//! - a gate closing on a 429 races a call that reads the published deadline
//!   without the lock: the call is admitted or refused for at most the
//!   provider's wait, and every call after it is refused;
//! - a gate closing while a service clone looks its scope's gate up (and
//!   keeps what it found, or that it found none): that clone's next call is
//!   refused, whichever of two reports of it adds the scope and whichever
//!   publishes its deadline;
//! - calls racing for the last place in a provider's rate (spreading): one
//!   is sent, the other refused for at most the interval;
//! - a bulkhead dropped while a call on another thread still holds its
//!   permit: its counters go back for reuse exactly once, after the last
//!   permit, so the next compartments start empty and apart;
//! - a permit given back on one thread (cached on that thread's stripe)
//!   reaches a caller queued on another: it finds the permit, or is woken
//!   for it (a lost wake-up would leave it waiting: loom fails a model
//!   whose threads all block);
//! - the bulkhead's limit holds while permits move between threads'
//!   stripes: callers racing for one permit cached on another thread's
//!   stripe, or given back to its owner's stripe while another thread
//!   looks, take it exactly once (never twice, and never neither).
//!
//! Each loom thread has a stripe of its own (`stripe_index` under loom), so
//! the bulkhead's paths between stripes are explored.
//!
//! [loom]: https://docs.rs/loom
#![cfg(levee_loom)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use levee_core::breaker::{BreakerConfig, BreakerStatus, Cooldown};
use tower::{Layer, Service};
use tower_levee::BoxError;
use tower_levee::breaker::{
    Breaker, BreakerHandle, BreakerLayer, CircuitOpen, FleetUpdate, Throttled,
};

const DOMAIN: &str = "api.openai.com";

/// Answers `/hang` never, `/fail` with a 503, `/throttle` with a 429 and
/// `retry-after: 7`, `/limited` with a 200 reporting 60 requests a minute, `/later` with a 200 on its
/// second poll, anything else with a 200 at once.
#[derive(Clone)]
struct Provider;

type Answer = Pin<Box<dyn Future<Output = Result<Response<String>, Infallible>> + Send>>;

impl Service<Request<()>> for Provider {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Answer;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<()>) -> Answer {
        let status = match req.uri().path() {
            "/hang" => return Box::pin(std::future::pending()),
            "/later" => {
                let mut polled = false;
                return Box::pin(std::future::poll_fn(move |_| {
                    if std::mem::replace(&mut polled, true) {
                        Poll::Ready(Ok(Response::new(String::new())))
                    } else {
                        Poll::Pending
                    }
                }));
            }
            "/limited" => {
                // 60 a minute: one a second, no burst.
                let mut response = Response::new(String::new());
                for (name, value) in [
                    ("x-ratelimit-limit-requests", "60"),
                    ("x-ratelimit-remaining-requests", "59"),
                    ("x-ratelimit-reset-requests", "1s"),
                ] {
                    response
                        .headers_mut()
                        .insert(name, http::HeaderValue::from_static(value));
                }
                return Box::pin(std::future::ready(Ok(response)));
            }
            "/fail" => StatusCode::SERVICE_UNAVAILABLE,
            "/throttle" => {
                let mut response = Response::new(String::new());
                *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                response
                    .headers_mut()
                    .insert("retry-after", http::HeaderValue::from_static("7"));
                return Box::pin(std::future::ready(Ok(response)));
            }
            _ => StatusCode::OK,
        };
        let mut response = Response::new(String::new());
        *response.status_mut() = status;
        Box::pin(std::future::ready(Ok(response)))
    }
}

type Call = Pin<Box<dyn Future<Output = Result<Response<BoxBody>, BoxError>> + Send>>;
type BoxBody = tower_levee::body::ResponseBody<String>;

fn breaker(config: BreakerConfig) -> (BreakerHandle, Breaker<Provider>) {
    let layer = BreakerLayer::builder().breaker(config).build().unwrap();
    (layer.handle(), layer.layer(Provider))
}

/// Starts a call to `path` and polls it once: `Err` if refused at once,
/// else the pending (or finished) call, kept alive by the caller.
fn start(svc: &mut Breaker<Provider>, path: &str) -> Result<Call, BoxError> {
    let req = Request::get(format!("https://{DOMAIN}{path}"))
        .body(())
        .unwrap();
    let mut call: Call = Box::pin(svc.call(req));
    match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Err(e)) => Err(e),
        // Finished or pending: the caller decides when it ends.
        _ => Ok(call),
    }
}

/// Another replica's report that `scope` answered a 429 asking `secs` of wait.
fn gated(scope: &str, secs: u64) -> FleetUpdate<'_> {
    FleetUpdate::Gated {
        scope,
        wait: Duration::from_secs(secs),
        reason: "status:429",
    }
}

/// Runs `f` under loom. A model that explores one interleaving only (the
/// crate built without loom's primitives) fails.
fn model(f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        f()
    });
    let runs = runs.load(Ordering::SeqCst);
    println!("{runs} interleavings");
    assert!(
        runs > 1,
        "loom explored {runs} interleaving: not a loom build?"
    );
}

#[test]
fn racing_callers_into_a_half_open_breaker_get_one_probe_and_a_dropped_probe_hands_it_back() {
    model(|| {
        let config = BreakerConfig::builder()
            .half_open_probes(1)
            .cooldown(Cooldown::Custom(Arc::new(|_| Duration::ZERO)))
            .build()
            .unwrap();
        let (handle, svc) = breaker(config);
        handle.open(DOMAIN);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let mut svc = svc.clone();
                loom::thread::spawn(move || start(&mut svc, "/hang"))
            })
            .collect();
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let probes: Vec<&Call> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(probes.len(), 1, "one probe of one allowed");
        for refused in outcomes.iter().filter_map(|o| o.as_ref().err()) {
            assert!(refused.is::<CircuitOpen>(), "{refused}");
        }
        assert_eq!(handle.breaker_status(DOMAIN), Some(BreakerStatus::HalfOpen));
        // The probe's caller gives up: its slot comes back, and the next
        // caller probes.
        drop(outcomes);
        let mut svc = svc.clone();
        let next = start(&mut svc, "/hang");
        assert!(next.is_ok(), "the slot came back: {:?}", next.err());
    });
}

#[test]
fn a_refusal_read_without_the_lock_is_never_longer_than_the_cooloff_and_a_racing_close_wins() {
    model(|| {
        let cooldown = Duration::from_secs(3600);
        let config = BreakerConfig::builder()
            .cooldown(Cooldown::fixed(cooldown))
            .build()
            .unwrap();
        let (handle, svc) = breaker(config);
        handle.open(DOMAIN);
        let closer = {
            let handle = handle.clone();
            loom::thread::spawn(move || handle.close(DOMAIN))
        };
        let caller = {
            let mut svc = svc.clone();
            loom::thread::spawn(move || start(&mut svc, "/ok").err())
        };
        closer.join().unwrap();
        if let Some(refused) = caller.join().unwrap() {
            let open = refused
                .downcast_ref::<CircuitOpen>()
                .expect("only the breaker refuses");
            assert!(open.retry_after() <= cooldown, "{:?}", open.retry_after());
        }
        assert_eq!(handle.breaker_status(DOMAIN), Some(BreakerStatus::Closed));
        let mut svc = svc.clone();
        assert!(start(&mut svc, "/ok").is_ok(), "closed admits");
    });
}

#[test]
fn a_success_admitted_before_the_breaker_opened_does_not_close_it_again() {
    model(|| {
        let config = BreakerConfig::builder()
            .threshold(1)
            .cooldown(Cooldown::fixed(Duration::from_secs(3600)))
            .build()
            .unwrap();
        let (handle, svc) = breaker(config);
        // Admitted while closed; its success is reported after the race.
        let mut early = svc.clone();
        let success = start(&mut early, "/later").expect("closed admits");
        let failing = {
            let mut svc = svc.clone();
            loom::thread::spawn(move || {
                let _ = start(&mut svc, "/fail");
            })
        };
        let late = loom::thread::spawn(move || {
            let mut success = success;
            let _ = success
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
        });
        failing.join().unwrap();
        late.join().unwrap();
        // The 503 opened the breaker whichever reported first: a success
        // from before it opened cannot close it.
        assert_eq!(handle.breaker_status(DOMAIN), Some(BreakerStatus::Open));
    });
}

#[test]
fn a_call_racing_a_gate_closing_is_admitted_or_refused_for_at_most_the_wait() {
    model(|| {
        let (_handle, svc) = breaker(BreakerConfig::default());
        let throttled = {
            let mut svc = svc.clone();
            loom::thread::spawn(move || {
                let _ = start(&mut svc, "/throttle");
            })
        };
        let caller = {
            let mut svc = svc.clone();
            loom::thread::spawn(move || start(&mut svc, "/ok").err())
        };
        throttled.join().unwrap();
        if let Some(refused) = caller.join().unwrap() {
            let gated = refused
                .downcast_ref::<Throttled>()
                .expect("only the gate refuses");
            assert!(gated.retry_after() <= Duration::from_secs(7));
        }
        let mut svc = svc.clone();
        let after = start(&mut svc, "/ok").err().expect("the gate is closed");
        assert!(after.is::<Throttled>(), "{after}");
    });
}

#[test]
fn a_gate_closing_while_a_clone_looks_its_scope_up_refuses_that_clones_next_call() {
    model(|| {
        let (handle, svc) = breaker(BreakerConfig::default());
        // Another scope gated: the caller's clone looks its own gate up, and
        // keeps what it found.
        assert!(handle.adopt(gated("api.anthropic.com", 60)));
        let closer = {
            let handle = handle.clone();
            loom::thread::spawn(move || assert!(handle.adopt(gated(DOMAIN, 60))))
        };
        let mut caller = svc.clone();
        if let Err(refused) = start(&mut caller, "/ok") {
            assert!(refused.is::<Throttled>(), "{refused}");
        }
        closer.join().unwrap();
        let after = start(&mut caller, "/ok").err().expect("the gate is closed");
        assert!(after.is::<Throttled>(), "{after}");
    });
}

#[test]
fn a_clone_that_found_no_gate_sees_one_published_by_whoever_closes_it() {
    model(|| {
        let (handle, svc) = breaker(BreakerConfig::default());
        assert!(handle.adopt(gated("api.anthropic.com", 60)));
        let mut caller = svc.clone();
        assert!(start(&mut caller, "/ok").is_ok(), "no gate of its own yet");
        // Two replicas' reports of the same 429: one adds the scope's
        // entry, the other may find it there and publish its deadline.
        let adopt = |secs| {
            let handle = handle.clone();
            loom::thread::spawn(move || {
                handle.adopt(gated(DOMAIN, secs));
            })
        };
        let (first, second) = (adopt(60), adopt(120));
        second.join().unwrap();
        let after = start(&mut caller, "/ok").err().expect("the gate is closed");
        assert!(after.is::<Throttled>(), "{after}");
        first.join().unwrap();
    });
}

#[test]
fn calls_racing_for_the_last_place_in_the_providers_rate_send_one() {
    model(|| {
        let (_handle, mut svc) = breaker(BreakerConfig::default());
        // The first answer teaches the rate: one a second.
        drop(start(&mut svc, "/limited").expect("sent"));
        let racer = |svc: &Breaker<Provider>| {
            let mut svc = svc.clone();
            loom::thread::spawn(move || start(&mut svc, "/limited").err())
        };
        let (a, b) = (racer(&svc), racer(&svc));
        let refused: Vec<BoxError> = [a, b]
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(refused.len(), 1, "one sent, one refused");
        let spaced = refused[0]
            .downcast_ref::<Throttled>()
            .expect("refused as paced");
        assert!(spaced.retry_after() <= Duration::from_secs(1));
    });
}

#[test]
fn a_bulkhead_dropped_while_a_permit_is_out_hands_its_counters_on_once_and_empty() {
    use tower_levee::bulkhead::{Bulkhead, BulkheadLayer};

    fn call(
        svc: &mut Bulkhead<Provider>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>> {
        let req = Request::get(format!("https://{DOMAIN}/hang"))
            .body(())
            .unwrap();
        Box::pin(svc.call(req))
    }

    model(|| {
        let layer = BulkheadLayer::named("llm", 1);
        let mut svc = layer.layer(Provider);
        let held = call(&mut svc);
        assert_eq!(layer.snapshot().in_flight, 1);
        // The call ends on another thread while the compartment is dropped.
        let caller = loom::thread::spawn(move || drop(held));
        drop((layer, svc));
        caller.join().unwrap();
        // Whichever went last handed the counters on, and only once.
        assert_eq!(tower_levee::bulkhead::free_gauges(), 1);

        // At zero: two new compartments of one permit each, the first on
        // the counters handed on, do not share them.
        let (first, second) = (BulkheadLayer::named("a", 1), BulkheadLayer::named("b", 1));
        assert_eq!(tower_levee::bulkhead::free_gauges(), 0, "a reuses them");
        let (mut a, mut b) = (first.layer(Provider), second.layer(Provider));
        let _in_a = call(&mut a);
        assert_eq!(first.snapshot().in_flight, 1);
        assert_eq!(second.snapshot().in_flight, 0, "b shares a's counters");
        let _in_b = call(&mut b);
        assert_eq!(second.snapshot().in_flight, 1, "b started full");
    });
}

#[test]
fn a_permit_given_back_on_another_thread_reaches_a_caller_queued_for_it() {
    use tower_levee::bulkhead::model::Compartment;

    model(|| {
        let compartment = Compartment::new(1);
        let held = compartment.try_acquire().expect("the one permit is free");
        // Given back on the other thread's stripe while this one queues.
        let releaser = loom::thread::spawn(move || drop(held));
        let permit = loom::future::block_on(compartment.acquire_queued());
        releaser.join().unwrap();
        assert_eq!(compartment.in_flight(), 1);
        assert!(compartment.try_acquire().is_none(), "the limit holds");
        drop(permit);
        assert_eq!(compartment.in_flight(), 0);
    });
}

#[test]
fn callers_racing_for_a_permit_cached_on_another_thread_take_it_once() {
    use tower_levee::bulkhead::model::Compartment;

    model(|| {
        let compartment = Arc::new(Compartment::new(1));
        // Taken and given back here: cached on this thread's stripe.
        drop(compartment.try_acquire().expect("the one permit is free"));
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let compartment = compartment.clone();
                loom::thread::spawn(move || compartment.try_acquire())
            })
            .collect();
        let permits: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let taken = permits.iter().filter(|p| p.is_some()).count();
        assert_eq!(taken, 1, "one racer takes the permit, and only one");
        assert_eq!(compartment.in_flight(), 1);
    });
}

#[test]
fn a_permit_given_back_while_another_thread_looks_is_taken_exactly_once_by_it_or_its_owner() {
    use tower_levee::bulkhead::model::Compartment;

    model(|| {
        let compartment = Arc::new(Compartment::new(1));
        let held = compartment.try_acquire().expect("the one permit is free");
        let owner = {
            let compartment = compartment.clone();
            loom::thread::spawn(move || {
                // Given back to this thread's stripe, then asked for again.
                drop(held);
                compartment.try_acquire()
            })
        };
        let looker = {
            let compartment = compartment.clone();
            loom::thread::spawn(move || compartment.try_acquire())
        };
        let (owner, looker) = (owner.join().unwrap(), looker.join().unwrap());
        // The looker takes it if it looks at the owner's stripe after the
        // permit came back, and the owner then finds its stripe empty;
        // otherwise the owner takes it back. Never both, never neither.
        assert_eq!(
            usize::from(looker.is_some()) + usize::from(owner.is_some()),
            1,
            "the permit is taken once"
        );
        assert_eq!(compartment.in_flight(), 1);
    });
}
