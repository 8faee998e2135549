//! Seed 000's cascade, in ten minutes of virtual time.
//!
//! Four accounts, each rate-limited by a token bucket (10 requests/s, a
//! burst of 10), answering `429` with `retry-after` when over budget. Their
//! sum (40/s) exceeds the offered load (25/s, Poisson), but no account alone
//! can carry it. The same arrivals go through two stacks:
//!
//! - **Levee**: `RetryBudget → Failover → Breaker` per account. A 429 gates
//!   the account for the provider's wait and never trips a breaker; the
//!   failover routes around gated accounts without calling them; when every
//!   account is gated at once, the retry layer waits for the earliest reopen.
//! - **Naive**: the same retry layer over a router with a classic breaker per
//!   account that counts every non-2xx, 429 included (5 consecutive, fixed
//!   30 s cool-off, one probe), failing over only when a breaker is open.

mod failover_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_levee::failover::{Failover, Target};
use tower_levee::retry::{RetryBudget, RetryBudgetLayer};

use failover_support::{recorded_breaker, response};

const ACCOUNTS: usize = 4;
const RATE: f64 = 10.0; // per account, requests per second
const LOAD: f64 = 32.0; // offered, requests per second
const RUN: Duration = Duration::from_secs(600);
const LATENCY: Duration = Duration::from_millis(300);

// === The simulated account ===

/// A provider account with a token-bucket rate limit: `RATE` per second,
/// a burst of `RATE`. Over budget it answers `429` with the seconds until
/// the next token in `retry-after`.
#[derive(Clone)]
struct Account {
    bucket: Arc<Mutex<(f64, Instant)>>,
    calls: Arc<AtomicUsize>,
}

impl Account {
    fn new() -> Self {
        Account {
            bucket: Arc::new(Mutex::new((RATE, Instant::now()))),
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Takes a token; `Err(wait)` if there is none.
    fn take(&self) -> Result<(), Duration> {
        let mut b = self.bucket.lock().unwrap();
        let now = Instant::now();
        b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * RATE).min(RATE);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - b.0) / RATE))
        }
    }
}

impl Service<Request<String>> for Account {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::Relaxed);
        match self.take() {
            Ok(()) => Box::pin(async {
                tokio::time::sleep(LATENCY).await;
                Ok(response(200, None, "ok"))
            }),
            Err(wait) => {
                let secs = wait.as_secs_f64().ceil().max(1.0).to_string();
                Box::pin(async move { Ok(response(429, Some(&secs), "")) })
            }
        }
    }
}

// === The naive breaker of the seed's story ===

/// A classic breaker: every non-2xx counts, 5 in a row open it for a fixed
/// 30 s, then one probe decides.
#[derive(Debug, Default)]
struct NaiveBreaker {
    failures: u32,
    open_until: Option<Instant>,
    probing: bool,
}

impl NaiveBreaker {
    fn can_send(&mut self, now: Instant) -> bool {
        match self.open_until {
            Some(until) if now < until => false,
            Some(_) if self.probing => false,
            Some(_) => {
                self.probing = true;
                true
            }
            None => true,
        }
    }

    /// Records an outcome; true if the breaker opened.
    fn record(&mut self, ok: bool, now: Instant) -> bool {
        if ok {
            *self = NaiveBreaker::default();
            return false;
        }
        let probe_failed = self.probing;
        self.probing = false;
        self.failures += 1;
        if probe_failed || (self.open_until.is_none() && self.failures >= 5) {
            self.open_until = Some(now + Duration::from_secs(30));
            return true;
        }
        false
    }
}

/// Routes to the first account whose naive breaker can send.
#[derive(Clone)]
struct NaiveRouter {
    accounts: Vec<Account>,
    breakers: Arc<Mutex<Vec<NaiveBreaker>>>,
    opens: Arc<AtomicUsize>,
}

impl Service<Request<String>> for NaiveRouter {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        let now = Instant::now();
        let pick = {
            let mut breakers = self.breakers.lock().unwrap();
            breakers.iter_mut().position(|b| b.can_send(now))
        };
        let Some(i) = pick else {
            return Box::pin(async { Ok(response(503, None, "all circuits open")) });
        };
        let call = self.accounts[i].clone().oneshot(req);
        let breakers = self.breakers.clone();
        let opens = self.opens.clone();
        Box::pin(async move {
            let res = call.await?;
            let opened =
                breakers.lock().unwrap()[i].record(res.status().is_success(), Instant::now());
            if opened {
                opens.fetch_add(1, Ordering::Relaxed);
            }
            Ok(res)
        })
    }
}

// === The run ===

/// Poisson arrivals at `LOAD` for `RUN` through `svc`; returns (requests,
/// succeeded). Every request ends in one response or one error.
async fn drive<S>(svc: S) -> (usize, usize)
where
    S: Service<Request<String>, Error = BoxError> + Clone + Send + 'static,
    S::Response: IsSuccess,
    S::Future: Send,
{
    let mut rng = fastrand::Rng::with_seed(0x5eed_0000);
    let end = Instant::now() + RUN;
    let ok = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    while Instant::now() < end {
        let gap = -(1.0 - rng.f64()).ln() / LOAD;
        tokio::time::sleep(Duration::from_secs_f64(gap)).await;
        let (svc, ok) = (svc.clone(), ok.clone());
        tasks.push(tokio::spawn(async move {
            let req = Request::post("https://api.example.com/v1/chat/completions")
                .body("{}".to_owned())
                .unwrap();
            if let Ok(res) = svc.oneshot(req).await
                && res.is_success()
            {
                ok.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let requests = tasks.len();
    for t in tasks {
        t.await.unwrap();
    }
    (requests, ok.load(Ordering::Relaxed))
}

trait IsSuccess {
    fn is_success(&self) -> bool;
}

impl<B> IsSuccess for Response<B> {
    fn is_success(&self) -> bool {
        self.status() == StatusCode::OK
    }
}

fn retry_layer() -> RetryBudgetLayer {
    RetryBudgetLayer::builder(Arc::new(RetryBudget::default()))
        .timeout(Duration::from_secs(30))
        .seed(0)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn four_accounts_whose_sum_exceeds_the_load_serve_it_with_levee_and_cascade_without() {
    // Levee. The gate's own wait for a 429 without a parsed hint is set to
    // the 1 s the accounts send, so the run does not depend on header parsing.
    let transitions = Arc::new(Mutex::new(Vec::new()));
    let accounts: Vec<_> = (0..ACCOUNTS).map(|_| Account::new()).collect();
    let mut builder = Failover::builder();
    for (i, account) in accounts.iter().enumerate() {
        builder = builder.target(
            Target::new(format!("account-{i}"), account.clone()).breaker(recorded_breaker(
                Duration::from_secs(1),
                transitions.clone(),
            )),
        );
    }
    let failover = builder.build().unwrap();
    let health = failover.handle();
    let levee = ServiceBuilder::new().layer(retry_layer()).service(failover);
    let (requests, levee_ok) = drive(levee).await;
    let breaker_opens = transitions
        .lock()
        .unwrap()
        .iter()
        .filter(|t| t.starts_with("breaker") && t.ends_with("->open"))
        .count();
    let levee_calls: usize = accounts
        .iter()
        .map(|a| a.calls.load(Ordering::Relaxed))
        .sum();
    let snapshot = health.snapshot();

    // Naive, same arrivals.
    let naive_accounts: Vec<_> = (0..ACCOUNTS).map(|_| Account::new()).collect();
    let opens = Arc::new(AtomicUsize::new(0));
    let router = NaiveRouter {
        accounts: naive_accounts.clone(),
        breakers: Arc::new(Mutex::new(
            (0..ACCOUNTS).map(|_| NaiveBreaker::default()).collect(),
        )),
        opens: opens.clone(),
    };
    let naive = ServiceBuilder::new().layer(retry_layer()).service(router);
    let (naive_requests, naive_ok) = drive(naive).await;
    let naive_calls: usize = naive_accounts
        .iter()
        .map(|a| a.calls.load(Ordering::Relaxed))
        .sum();
    let naive_opens = opens.load(Ordering::Relaxed);

    let pct = |ok: usize, n: usize| 100.0 * ok as f64 / n as f64;
    println!(
        "seed 000 cascade: {ACCOUNTS} accounts × {RATE}/s, load {LOAD}/s for {}s",
        RUN.as_secs()
    );
    println!(
        "  levee: {levee_ok}/{requests} served ({:.2}%), {breaker_opens} breaker opens, {levee_calls} provider calls, fallback share {:.2}, {} NoTargetAvailable (retried at the reopen)",
        pct(levee_ok, requests),
        snapshot.fallback_share,
        snapshot.no_target_available
    );
    println!(
        "  naive: {naive_ok}/{naive_requests} served ({:.2}%), {naive_opens} breaker opens, {naive_calls} provider calls",
        pct(naive_ok, naive_requests)
    );

    assert_eq!(requests, naive_requests, "the same arrivals");
    assert_eq!(breaker_opens, 0, "429s never open a Levee breaker");
    assert!(
        pct(levee_ok, requests) >= 99.0,
        "levee served {levee_ok}/{requests}"
    );
    assert!(naive_opens > 0, "the naive breaker opens on 429s");
    assert!(
        pct(levee_ok, requests) - pct(naive_ok, naive_requests) >= 5.0,
        "naive served {naive_ok}/{naive_requests}, levee {levee_ok}/{requests}"
    );
}
