//! [`MetricsReporter`]: reads every registered layer's state and counters
//! and publishes them through the `metrics` facade.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ::metrics::{Label, counter, gauge};
use levee_core::classify::Verdict;
use levee_core::transition::{Mechanism, State};

use super::names::*;
use crate::breaker::{BreakerHandle, ScopeEvent, ScopeHealth};
use crate::bulkhead::{BulkheadLayer, BulkheadSnapshot, Bulkheads};
use crate::failover::FailoverHandle;
use crate::retry::RetryBudget;

/// Publishes the state and counters of breaker layers, bulkheads, retry
/// budgets and failovers through the [`metrics`] facade, whenever
/// [`record`](Self::record) is called: from a `/metrics` scrape handler, or
/// on an interval ([`spawn`](Self::spawn)). See the [module docs](super).
///
/// It only reads what the layers already keep (the same counters and
/// snapshots as their handles): nothing is added to any request's path.
/// Clones share nothing but the handles, so cloning is cheap.
///
/// Label values are the names given here (targets, budgets, failovers),
/// compartment names, and scope keys. A scope key is a URI authority (its
/// userinfo dropped) and model unless a `scope_fn` or [`Scope`] extension
/// names it otherwise: never put a credential in one.
///
/// [`Scope`]: crate::breaker::Scope
#[derive(Clone, Debug, Default)]
pub struct MetricsReporter {
    breakers: Vec<(Arc<str>, BreakerHandle)>,
    bulkheads: Vec<Bulkheads>,
    compartments: Vec<BulkheadLayer>,
    budgets: Vec<(Arc<str>, Arc<RetryBudget>)>,
    failovers: Vec<(Arc<str>, FailoverHandle)>,
}

impl MetricsReporter {
    /// A reporter with nothing registered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports a breaker layer (its breakers, throttle gates and parks) with
    /// the label `target`.
    pub fn breaker(mut self, target: impl Into<Arc<str>>, handle: BreakerHandle) -> Self {
        self.breakers.push((target.into(), handle));
        self
    }

    /// Reports every compartment of a bulkhead registry, labelled
    /// `compartment` with its name (also those created after this call).
    pub fn bulkheads(mut self, bulkheads: Bulkheads) -> Self {
        self.bulkheads.push(bulkheads);
        self
    }

    /// Reports one bulkhead's compartment, labelled `compartment`.
    pub fn bulkhead(mut self, layer: BulkheadLayer) -> Self {
        self.compartments.push(layer);
        self
    }

    /// Reports a retry budget with the label `budget`.
    pub fn budget(mut self, name: impl Into<Arc<str>>, budget: Arc<RetryBudget>) -> Self {
        self.budgets.push((name.into(), budget));
        self
    }

    /// Reports a failover with the label `failover`: its served and
    /// fallback counters, and each target's breaker layer (label `target`,
    /// the target's name) and bulkhead (label `compartment`).
    pub fn failover(mut self, name: impl Into<Arc<str>>, handle: FailoverHandle) -> Self {
        self.failovers.push((name.into(), handle));
        self
    }

    /// Reads everything registered and publishes it to the installed
    /// recorder: gauges with [`Gauge::set`](::metrics::Gauge::set),
    /// counters with [`Counter::absolute`](::metrics::Counter::absolute).
    /// Takes each layer's short locks, as its handle's snapshot does; with no
    /// recorder installed it reads and publishes nothing.
    pub fn record(&self) {
        describe();
        let mut compartments = HashSet::new();
        for (target, handle) in &self.breakers {
            record_breaker(target, handle);
        }
        for (name, handle) in &self.failovers {
            record_failover(name, handle, &mut compartments);
        }
        for registry in &self.bulkheads {
            for s in registry.snapshot() {
                record_compartment(&s, &mut compartments);
            }
        }
        for layer in &self.compartments {
            record_compartment(&layer.snapshot(), &mut compartments);
        }
        for (name, budget) in &self.budgets {
            let s = budget.snapshot();
            let labels = [Label::new("budget", name.clone())];
            gauge!(BUDGET_TOKENS, labels.iter()).set(s.available as f64);
            counter!(BUDGET_REQUESTS, labels.iter()).absolute(s.requests);
            counter!(BUDGET_RETRIES, labels.iter()).absolute(s.retries);
            counter!(BUDGET_EXHAUSTED, labels.iter()).absolute(s.budget_exhausted);
        }
    }

    /// Spawns a task on the current tokio runtime that calls
    /// [`record`](Self::record) every `period` (the first time at once), for
    /// exporters that are not scraped through your own handler (a push
    /// exporter, or an exporter's own HTTP listener). Abort the returned
    /// handle to stop it.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or if `period` is zero.
    pub fn spawn(self, period: Duration) -> tokio::task::JoinHandle<()> {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::spawn(async move {
            loop {
                interval.tick().await;
                self.record();
            }
        })
    }
}

/// A callback for [`BreakerLayerBuilder::on_event`] that counts every
/// transition in `levee_transitions_total`, labelled `target` (the name
/// given here), `mechanism`, `scope`, `from` and `to`. Transitions are rare
/// (a change of state, never a call): the counter is bumped in the callback.
///
/// [`BreakerLayerBuilder::on_event`]: crate::breaker::BreakerLayerBuilder::on_event
pub fn transition_counter(
    target: impl Into<Arc<str>>,
) -> impl Fn(&ScopeEvent) + Send + Sync + 'static {
    let target: Arc<str> = target.into();
    move |event: &ScopeEvent| {
        let labels = [
            Label::new("target", target.clone()),
            Label::from_static_parts("mechanism", event.mechanism().as_str()),
            Label::new("scope", event.scope().to_owned()),
            Label::from_static_parts("from", event.from().as_str()),
            Label::from_static_parts("to", event.to().as_str()),
        ];
        counter!(TRANSITIONS, labels.iter()).increment(1);
    }
}

// === one source at a time ===

fn record_breaker(target: &Arc<str>, handle: &BreakerHandle) {
    for s in handle.states() {
        record_scope(target, &s);
    }
    let rejections = handle.rejections();
    for (mechanism, n) in [
        (Mechanism::Breaker, rejections.breaker),
        (Mechanism::Gate, rejections.gate),
        (Mechanism::Park, rejections.park),
    ] {
        let labels = [
            Label::new("target", target.clone()),
            Label::from_static_parts("mechanism", mechanism.as_str()),
        ];
        counter!(REJECTIONS, labels.iter()).absolute(n);
    }
    for verdict in Verdict::ALL {
        if verdict == Verdict::Success {
            continue;
        }
        let labels = [
            Label::new("target", target.clone()),
            Label::from_static_parts("verdict", verdict.as_str()),
        ];
        counter!(UPSTREAM_FAILURES, labels.iter()).absolute(handle.upstream_failures(verdict));
    }
}

fn record_scope(target: &Arc<str>, s: &ScopeHealth) {
    let labels = [
        Label::new("target", target.clone()),
        Label::from_static_parts("mechanism", s.mechanism.as_str()),
        Label::new("scope", s.scope.clone()),
    ];
    let state = match s.state {
        State::HalfOpen => 2.0,
        state if state.refuses() => 1.0,
        _ => 0.0,
    };
    gauge!(SCOPE_STATE, labels.iter()).set(state);
    let retry_after = s.retry_after.unwrap_or_default().as_secs_f64();
    gauge!(SCOPE_RETRY_AFTER, labels.iter()).set(retry_after);
    let scope_labels = [
        Label::new("target", target.clone()),
        Label::new("scope", s.scope.clone()),
    ];
    if let Some(open) = s.open_time {
        counter!(BREAKER_OPEN_TIME, scope_labels.iter()).absolute(millis(open));
    }
    if let Some(total) = s.gated_total {
        counter!(GATE_GATED_TIME, scope_labels.iter()).absolute(millis(total));
    }
    if let Some(last_hour) = s.gated_last_hour {
        gauge!(GATE_GATED_LAST_HOUR, scope_labels.iter()).set(last_hour.as_secs_f64());
    }
    if let Some(closings) = s.closings {
        for (why, n) in [("throttled", closings.throttled), ("paced", closings.paced)] {
            let labels = [
                Label::new("target", target.clone()),
                Label::new("scope", s.scope.clone()),
                Label::from_static_parts("why", why),
            ];
            counter!(GATE_CLOSINGS, labels.iter()).absolute(n);
        }
    }
    for left in &s.remaining {
        let labels = [
            Label::new("target", target.clone()),
            Label::new("scope", s.scope.clone()),
            Label::from_static_parts("dimension", left.dimension.as_str()),
            Label::from_static_parts("period", left.period.as_str()),
        ];
        gauge!(SCOPE_REMAINING, labels.iter()).set(left.remaining as f64);
    }
}

fn record_failover(name: &Arc<str>, handle: &FailoverHandle, seen: &mut HashSet<Arc<str>>) {
    let mut served_all = 0;
    let mut served_by_fallback = 0;
    for (index, target) in handle.targets().enumerate() {
        let served = handle.served(target).unwrap_or(0);
        served_all += served;
        if index > 0 {
            served_by_fallback += served;
        }
        let labels = [
            Label::new("failover", name.clone()),
            Label::new("target", target.to_owned()),
        ];
        counter!(FAILOVER_SERVED, labels.iter()).absolute(served);
        if let Some(demoted) = handle.demoted(target) {
            gauge!(FAILOVER_DEMOTED, labels.iter()).set(f64::from(u8::from(demoted)));
        }
        let failed_over = handle.failed_over(target).unwrap_or(0);
        counter!(FAILOVER_FAILED_OVER, labels.iter()).absolute(failed_over);
        if let Some(breaker) = handle.breaker(target) {
            record_breaker(&Arc::from(target), breaker);
        }
        if let Some(s) = handle.bulkhead(target) {
            record_compartment(&s, seen);
        }
    }
    let labels = [Label::new("failover", name.clone())];
    let share = if served_all == 0 {
        0.0
    } else {
        served_by_fallback as f64 / served_all as f64
    };
    gauge!(FAILOVER_FALLBACK_SHARE, labels.iter()).set(share);
    counter!(FAILOVER_NO_TARGET, labels.iter()).absolute(handle.no_target_available());
    if let Some(hedges) = handle.hedges() {
        counter!(FAILOVER_HEDGES, labels.iter()).absolute(hedges);
    }
}

/// Publishes a compartment once per record, however many sources name it.
fn record_compartment(s: &BulkheadSnapshot, seen: &mut HashSet<Arc<str>>) {
    if !seen.insert(s.name.clone()) {
        return;
    }
    let labels = [Label::new("compartment", s.name.clone())];
    gauge!(BULKHEAD_IN_FLIGHT, labels.iter()).set(s.in_flight as f64);
    gauge!(BULKHEAD_LIMIT, labels.iter()).set(s.limit as f64);
    gauge!(BULKHEAD_WAITING, labels.iter()).set(s.waiting as f64);
    counter!(BULKHEAD_REJECTED, labels.iter()).absolute(s.rejected);
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
