//! The `levee` stack: RetryBudget → Failover → Bulkhead → Breaker →
//! per-attempt timeout → provider, built from the scenario's `[levee]`
//! (`tower_levee::config::LeveeConfig`, with the drill's defaults where it
//! is silent: see [`crate::scenario`]) by the library's own helpers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::BodyExt;
use levee_core::classify::{ProviderClassifier, StreamScanner, Verdict};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tower_levee::breaker::{Scope, TokenCost};
use tower_levee::failover::{Failover, NoTargetAvailable, ServedBy, Target};
use tower_levee::retry::{Deadline, Retry, RetryOutcome, Stop};
use tower_levee::{BoxError, RetryBudget, RetryBudgetLayer};

use crate::dialect::SimBody;
use crate::outcome::{Fail, TransitionRecord, is_timeout, rejection_kind, response_failure};
use crate::provider::{Provider, TargetService};
use crate::scenario::Scenario;

/// The provider label of a dialect: targets of one provider are expected to
/// fail together on overload, so failover tries another provider first.
fn provider_label(dialect: &str) -> &'static str {
    match dialect {
        "azure" => "azure",
        "anthropic" => "anthropic",
        "gemini" => "google",
        "bedrock" => "aws",
        _ => "openai",
    }
}

/// Where a fleet's replicas meet.
#[derive(Clone, Debug)]
pub enum FleetStore {
    /// The simulated store, in virtual time.
    Simulated(levee_redis::MemoryStore),
    /// A real Redis server (`--live`), by URL.
    Redis(String),
}

/// A replica's place in a fleet sharing decisions through `store`.
#[derive(Debug)]
pub struct FleetLink {
    /// The store every replica of the run shares.
    pub store: FleetStore,
    /// This replica's index.
    pub replica: usize,
    /// The fleet's settings.
    pub spec: crate::scenario::FleetSpec,
}

/// The Levee stack of one run.
pub struct LeveeStack {
    svc: Retry<Failover<Bytes, SimBody, tower::timeout::Timeout<TargetService>>>,
    budget: Arc<RetryBudget>,
    timeout: Duration,
    /// Each request's token cost, when token limits are simulated.
    tokens: u64,
    events: Arc<Mutex<Vec<TransitionRecord>>>,
    /// The replica's fleet task, stopped with the stack.
    _fleet: Option<levee_redis::FleetHandle>,
}

impl std::fmt::Debug for LeveeStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeveeStack").finish_non_exhaustive()
    }
}

impl LeveeStack {
    /// Builds the stack over `provider`, recording transitions.
    pub fn new(
        sc: &Scenario,
        provider: &Provider,
        start: Instant,
        fleet: Option<FleetLink>,
    ) -> Result<Self, BoxError> {
        let cfg = &sc.levee;
        let events: Arc<Mutex<Vec<TransitionRecord>>> = Arc::default();
        let sink = events.clone();
        let names: Vec<(String, String)> = sc
            .targets
            .iter()
            .map(|t| (t.name.clone(), t.account.clone()))
            .collect();
        let classifier = ProviderClassifier::builder()
            .rules(sc.rules.clone())
            .build();
        let breaker = cfg
            .breaker_layer()
            .map_err(|e| format!("[levee] {e}"))?
            .classifier(classifier)
            .seed(sc.seed)
            .on_event(move |ev| {
                let scope = ev.scope();
                let target = names
                    .iter()
                    .find(|(n, _)| {
                        scope == n
                            || scope.starts_with(n.as_str())
                                && !scope[n.len()..].starts_with(|c: char| {
                                    c.is_alphanumeric() || c == '-' || c == '_'
                                })
                    })
                    .or_else(|| names.iter().find(|(_, a)| a == scope))
                    .map_or_else(|| scope.to_owned(), |(n, _)| n.clone());
                sink.lock().expect("events").push(TransitionRecord {
                    t_ms: (Instant::now() - start).as_millis() as u64,
                    target,
                    scope: scope.to_owned(),
                    mechanism: ev.mechanism().as_str().to_owned(),
                    from: ev.from().as_str().to_owned(),
                    to: ev.to().as_str().to_owned(),
                    reason: ev.reason().to_owned(),
                });
            })
            .build()
            .map_err(|e| format!("[levee] {e}"))?;
        let fleet = fleet
            .map(|link| -> Result<_, BoxError> {
                let fleet = levee_redis::Fleet::builder()
                    .namespace("drill")
                    .replica(format!("replica-{}", link.replica))
                    .policy(link.spec.policy)
                    .sweep_every(link.spec.sweep_every)
                    .probe_lease(link.spec.probe_lease)
                    .share_failures(link.spec.share_failures)
                    .share_pacing(link.spec.share_pacing)
                    .attach(&breaker.handle());
                let spawned = match link.store {
                    FleetStore::Simulated(store) => fleet.spawn(store),
                    FleetStore::Redis(url) => fleet.spawn(levee_redis::RedisStore::open(&url)?),
                };
                Ok(spawned.map_err(|e| format!("[fleet]: {e}"))?)
            })
            .transpose()?;
        let retry = sc.retry_config();
        let attempt_timeout = retry
            .attempt_timeout
            .expect("the drill's default is filled in");
        let mut failover = Failover::builder();
        for (i, t) in sc.targets.iter().enumerate() {
            // No stream check below the breaker: its own stream watch sees
            // the body as the caller reads it.
            let inner = tower::timeout::Timeout::new(provider.target(i), attempt_timeout);
            // A compartment per target, named after it.
            let bulkhead = cfg
                .bulkhead
                .clone()
                .name(t.name.clone())
                .layer()
                .map_err(|e| format!("[levee] {e}"))?;
            let scope = Scope::new()
                .domain(t.name.clone())
                .model(sc.load.model.clone())
                .billing(t.account.clone());
            let target = Target::new(t.name.clone(), inner)
                .breaker(breaker.clone())
                .bulkhead(bulkhead)
                .provider(provider_label(&t.dialect))
                .rewrite(move |req: &mut Request<Bytes>| {
                    req.extensions_mut().insert(scope.clone());
                });
            let target = match &t.pool {
                Some(pool) => target.pool(pool.as_str()),
                None => target,
            };
            failover = failover.target(target);
        }
        let budget = Arc::new(RetryBudget::from_config(retry.budget));
        let mut failover = cfg
            .failover
            .apply(failover)
            .map_err(|e| format!("[levee] {e}"))?;
        if let Some(probes) = cfg.failover.shadow_probes_for(Some(budget.clone())) {
            failover = failover.shadow_probes(probes);
        }
        let failover = failover.build().map_err(|e| format!("[[target]]: {e}"))?;
        let layer = retry
            .apply(RetryBudgetLayer::builder(budget.clone()).seed(sc.seed))
            .and_then(|builder| builder.build())
            .map_err(|e| format!("[levee] {e}"))?;
        let svc = layer.layer(failover);
        Ok(LeveeStack {
            svc,
            budget,
            timeout: sc.load.timeout,
            tokens: sc.load.tokens,
            events,
            _fleet: fleet,
        })
    }

    /// The transitions recorded so far.
    pub fn transitions(&self) -> Vec<TransitionRecord> {
        self.events.lock().expect("events").clone()
    }

    /// Retries the budget granted and refused so far.
    pub fn budget(&self) -> &RetryBudget {
        &self.budget
    }

    /// One request through the stack (the caller's deadline is applied by the runner).
    pub async fn call(&self) -> Result<usize, Fail> {
        let mut req = Request::post("https://drill.invalid/v1/chat/completions")
            .body(Bytes::new())
            .expect("static request");
        req.extensions_mut()
            .insert(Deadline(Instant::now() + self.timeout));
        if self.tokens > 0 {
            req.extensions_mut().insert(TokenCost(self.tokens));
        }
        match self.svc.clone().oneshot(req).await {
            Ok(res) if res.status().is_success() => {
                let served = ServedBy::of(&res).map_or(0, |s| s.index);
                // Read the body as the caller would: the breaker's stream
                // watch reports its verdict at the end; an in-band error
                // fails this request (its head already arrived: no failover).
                let scanner = StreamScanner::for_response(res.status(), res.headers());
                let bytes = match res.into_body().collect().await {
                    Ok(b) => b.to_bytes(),
                    Err(_) => return Err(Fail::Upstream),
                };
                match scanner {
                    Some(mut sc) => {
                        sc.feed(&bytes);
                        if sc.finish().verdict == Verdict::Success {
                            Ok(served)
                        } else {
                            Err(Fail::Upstream)
                        }
                    }
                    None => Ok(served),
                }
            }
            Ok(res) => {
                if res
                    .extensions()
                    .get::<RetryOutcome>()
                    .is_some_and(|o| o.stop == Stop::BudgetExhausted)
                {
                    return Err(Fail::BudgetExhausted);
                }
                Err(response_failure(&res, b""))
            }
            Err(e) => Err(match rejection_kind(&*e) {
                _ if e.is::<NoTargetAvailable>() => Fail::NoTarget,
                Some(kind) => kind,
                None if is_timeout(&*e) => Fail::Timeout,
                None => Fail::Upstream,
            }),
        }
    }
}
