//! The `levee` stack: RetryBudget → Failover → Bulkhead → Breaker →
//! per-attempt timeout → provider, from the defaults and the scenario's
//! `[levee]` overrides.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::BodyExt;
use levee_core::breaker::{BreakerConfig, Cooldown, Jitter};
use levee_core::classify::{StreamScanner, Verdict};
use levee_core::config::{CooldownSpec, ExponentialSpec};
use levee_core::gate::GateConfig;
use levee_core::park::ParkConfig;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tower_levee::breaker::{Scope, StreamHold, TokenCost};
use tower_levee::failover::{Failover, NoTargetAvailable, ServedBy, Target};
use tower_levee::retry::{Deadline, Retry, RetryOutcome, Stop};
use tower_levee::{BoxError, BreakerLayer, BulkheadLayer, RetryBudget, RetryBudgetLayer};

use crate::dialect::SimBody;
use crate::outcome::{Fail, TransitionRecord, is_timeout, rejection_kind, response_failure};
use crate::provider::{Provider, TargetService};
use crate::scenario::{LeveeConfig, Scenario};

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

/// The breaker configuration: defaults with the scenario's overrides.
pub fn breaker_config(cfg: &LeveeConfig) -> Result<BreakerConfig, BoxError> {
    let o = &cfg.breaker;
    let d = BreakerConfig::default();
    let mut b = BreakerConfig::builder();
    if let Some(t) = o.threshold {
        b = b.threshold(t);
    }
    if let Some(window) = o.window {
        b = b.rolling(
            window,
            o.min_calls.unwrap_or(10),
            o.failure_ratio.unwrap_or(0.5),
        );
    } else if o.min_calls.is_some() || o.failure_ratio.is_some() {
        return Err("[levee.breaker]: `min_calls` and `failure_ratio` need a `window`".into());
    }
    let jitter = match o.jitter.as_deref() {
        None => None,
        Some("full") => Some(Jitter::Full),
        Some("equal") => Some(Jitter::Equal),
        Some("none") => Some(Jitter::None),
        Some(other) => {
            return Err(format!(
                "[levee.breaker].jitter: expected full, equal or none, got {other:?}"
            )
            .into());
        }
    };
    // What the scenario leaves out keeps the layer's default schedule.
    let schedule = ExponentialSpec {
        base: o.cooldown,
        multiplier: o.multiplier,
        max: o.max_cooldown,
        jitter,
        hold: o.cooldown_hold,
    };
    if schedule != ExponentialSpec::default() {
        b = b.cooldown(CooldownSpec::Exponential(schedule).to_cooldown(&d.cooldown));
    }
    if let Some(r) = o.half_open_success_ratio {
        b = b.half_open_success_ratio(r);
    }
    if let Some(t) = o.probe_timeout {
        b = b.probe_timeout(t);
    }
    if let Some(c) = o.credential_cooldown {
        // A base past the default cap raises the cap with it.
        let cap = match &d.credential_cooldown {
            Cooldown::Exponential { max, .. } => (*max).max(c),
            Cooldown::Custom(_) => c,
        };
        let schedule = ExponentialSpec {
            base: Some(c),
            max: Some(cap),
            ..ExponentialSpec::default()
        };
        b = b.credential_cooldown(
            CooldownSpec::Exponential(schedule).to_cooldown(&d.credential_cooldown),
        );
    }
    b = b.slow_call(o.slow_call.or(d.slow_call));
    if let Some(p) = o.half_open_probes {
        b = b.half_open_probes(p);
    }
    if let Some(c) = o.credential_threshold {
        b = b.credential_threshold(c);
    }
    b.build()
        .map_err(|e| format!("[levee.breaker]: {e}").into())
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
        let mut gate = GateConfig::builder();
        if let Some(w) = cfg.gate.default_wait {
            gate = gate.default_wait(w);
        }
        if let Some(j) = cfg.gate.jitter {
            gate = gate.jitter(j);
        }
        if let Some(m) = cfg.gate.max_wait {
            gate = gate.max_wait(m);
        }
        let mut park = ParkConfig::builder();
        if let Some(p) = cfg.park.default_park {
            park = park.default_park(p);
        }
        let events: Arc<Mutex<Vec<TransitionRecord>>> = Arc::default();
        let sink = events.clone();
        let names: Vec<(String, String)> = sc
            .targets
            .iter()
            .map(|t| (t.name.clone(), t.account.clone()))
            .collect();
        let mut breaker = BreakerLayer::builder().stream_hold(if cfg.stream_hold.unwrap_or(true) {
            StreamHold::default()
        } else {
            StreamHold::off()
        });
        if let Some(t) = cfg.first_content_timeout {
            breaker = breaker.first_content_timeout(t);
        }
        if let Some(t) = cfg.stall_timeout {
            breaker = breaker.stall_timeout(t);
        }
        let breaker = breaker
            .breaker(breaker_config(cfg)?)
            .gate(gate.build().map_err(|e| format!("[levee.gate]: {e}"))?)
            .park(park.build().map_err(|e| format!("[levee.park]: {e}"))?)
            .seed(sc.seed)
            .isolate_by_model(cfg.isolate_by_model)
            .pace(
                cfg.pace
                    .clone()
                    .try_into()
                    .map_err(|e| format!("[levee.pace]: {e}"))?,
            )
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
                    from: ev.from().to_owned(),
                    to: ev.to().to_owned(),
                    reason: ev.reason().to_owned(),
                });
            })
            .build()
            .map_err(|e| format!("[levee.breaker]: {e}"))?;
        let fleet = fleet
            .map(|link| -> Result<_, BoxError> {
                let fleet = levee_redis::Fleet::builder()
                    .namespace("drill")
                    .replica(format!("replica-{}", link.replica))
                    .policy(link.spec.policy)
                    .sweep_every(link.spec.sweep_every)
                    .attach(&breaker.handle());
                let spawned = match link.store {
                    FleetStore::Simulated(store) => fleet.spawn(store),
                    FleetStore::Redis(url) => fleet.spawn(levee_redis::RedisStore::open(&url)?),
                };
                Ok(spawned.map_err(|e| format!("[fleet]: {e}"))?)
            })
            .transpose()?;
        let attempt_timeout = cfg.attempt_timeout.unwrap_or(sc.load.timeout / 3);
        let max_concurrent = cfg.bulkhead.max_concurrent.unwrap_or(256);
        let mut failover = Failover::builder();
        for (i, t) in sc.targets.iter().enumerate() {
            // No stream check below the breaker: its own stream watch sees
            // the body as the caller reads it.
            let inner = tower::timeout::Timeout::new(provider.target(i), attempt_timeout);
            let mut bulkhead = BulkheadLayer::named(t.name.clone(), max_concurrent);
            if let Some(w) = cfg.bulkhead.max_wait {
                bulkhead = bulkhead.max_wait(w);
            }
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
        let failover = failover.build().map_err(|e| format!("[[target]]: {e}"))?;
        let r = &cfg.retry;
        let ttl = r.ttl.unwrap_or(Duration::from_secs(10));
        if ttl < Duration::from_millis(1) || ttl > Duration::from_secs(3600) {
            return Err(format!("[levee.retry].ttl: must be within 1ms..=1h, got {ttl:?}").into());
        }
        let ratio = r.retry_ratio.unwrap_or(0.1);
        if !(0.0..=1000.0).contains(&ratio) {
            return Err(
                format!("[levee.retry].retry_ratio: must be within 0..=1000, got {ratio}").into(),
            );
        }
        let budget = Arc::new(RetryBudget::new(ttl, r.min_per_sec.unwrap_or(10), ratio));
        let mut layer = RetryBudgetLayer::builder(budget.clone())
            .max_attempts(r.max_attempts.unwrap_or(3))
            .timeout(sc.load.timeout)
            .seed(sc.seed);
        if let Some(w) = r.max_wait {
            layer = layer.max_wait(w);
        }
        if r.backoff_base.is_some() || r.backoff_cap.is_some() {
            layer = layer.backoff(
                r.backoff_base.unwrap_or(Duration::from_millis(500)),
                r.backoff_cap.unwrap_or(Duration::from_secs(8)),
            );
        }
        let layer = layer.build().map_err(|e| format!("[levee.retry]: {e}"))?;
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
