//! [`HealthSnapshot`]: every target and scope, for a health route.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use levee_core::classify::Verdict;
use levee_core::transition::State;

use super::state::Meta;
use crate::breaker::{BreakerHandle, ScopeHealth};
use crate::bulkhead::BulkheadSnapshot;

/// A handle on a [`Failover`](super::Failover)'s targets: the health
/// snapshot, and each target's breaker for manual control.
#[derive(Clone)]
pub struct FailoverHandle {
    pub(crate) meta: Arc<Meta>,
}

/// Every target's state now, and which share of requests a fallback served.
///
/// The signals worth alerting on: a growing
/// [`fallback_share`](Self::fallback_share), a target [`parked`](TargetHealth::state)
/// (a spend cap is a conversation with finance), time open per target, and a
/// quota scope [`gated`](ScopeHealth::gated_last_hour) for a growing share
/// of each hour (its quota no longer fits its traffic).
///
/// With the `serde` feature it serializes to JSON with durations in
/// milliseconds (`retry_after_ms`, `gated_last_hour_ms`, `open_time_ms`).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HealthSnapshot {
    /// Each target, in failover order.
    pub targets: Vec<TargetHealth>,
    /// Successful responses served.
    pub served: u64,
    /// Of those, served by a target other than the first in order.
    pub served_by_fallback: u64,
    /// `served_by_fallback / served` (0 when nothing was served).
    pub fallback_share: f64,
    /// Requests refused with `NoTargetAvailable`.
    pub no_target_available: u64,
    /// Hedges sent ([`Hedging`](super::Hedging)), if the failover hedges.
    pub hedges: Option<u64>,
}

/// What a target would do with a request now: the most lasting refusal
/// among its scopes, else whether its bulkhead is full. Compares equal to
/// its name (`health.state == "open"`) and serializes as it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TargetState {
    /// Its billing scope is parked (a spend cap or quota).
    Parked,
    /// Its breaker is open.
    Open,
    /// Its breaker admits probes only.
    HalfOpen,
    /// Some quota scope of it is gated.
    Throttled,
    /// Its bulkhead has no permit free.
    Full,
    /// It admits requests.
    Available,
}

impl TargetState {
    /// `parked`, `open`, `half_open`, `throttled`, `full` or `available`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TargetState::Parked => "parked",
            TargetState::Open => "open",
            TargetState::HalfOpen => "half_open",
            TargetState::Throttled => "throttled",
            TargetState::Full => "full",
            TargetState::Available => "available",
        }
    }
}

levee_core::named!(TargetState);

/// One target's state.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct TargetHealth {
    /// The target's name.
    pub name: String,
    /// Its position in the failover order (0 is the primary).
    pub index: usize,
    /// Its provider label.
    pub provider: Option<String>,
    /// Its region label.
    pub region: Option<String>,
    /// The most lasting refusal among its scopes: `parked`, `open`,
    /// `half_open`, `throttled` (some quota scope gated), `full` (bulkhead),
    /// else `available`.
    pub state: TargetState,
    /// How long until it admits requests again, when `state` refuses.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "retry_after_ms", serialize_with = "crate::millis::option")
    )]
    pub retry_after: Option<Duration>,
    /// Why: the park's cause, or the last outcome that sent a request on.
    pub reason: Option<String>,
    /// Whether its provider and region are marked overloaded (several of
    /// their targets failed together), so other targets are tried first.
    pub provider_overloaded: bool,
    /// Successful responses it served.
    pub served: u64,
    /// Its answers after which the request went on to another target.
    pub failed_over: u64,
    /// Time its most gated quota scope spent gated in the last hour.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "gated_last_hour_ms",
            serialize_with = "crate::millis::option"
        )
    )]
    pub gated_last_hour: Option<Duration>,
    /// Time its breaker spent away from `closed` (open, half-open,
    /// isolated) in all: the most among its failure domains, `None` before
    /// any is tracked. A scope evicted while idle forgets its time.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "open_time_ms", serialize_with = "crate::millis::option")
    )]
    pub open_time: Option<Duration>,
    /// Whether it is tried after the others for being slow to answer
    /// ([`Hedging`](super::Hedging)).
    pub demoted: bool,
    /// How long its first calls wait before they count as late and are
    /// hedged: its recent 95th percentile of time to first byte. `None`
    /// without hedging or before it answered enough calls.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "hedge_delay_ms", serialize_with = "crate::millis::option")
    )]
    pub hedge_delay: Option<Duration>,
    /// Its bulkhead, if it has one.
    pub bulkhead: Option<BulkheadHealth>,
    /// Every scope its breaker layer tracks.
    pub scopes: Vec<ScopeHealth>,
}

/// A target's bulkhead gauges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BulkheadHealth {
    /// Calls holding a permit now.
    pub in_flight: usize,
    /// Permits in all.
    pub limit: usize,
}

impl FailoverHandle {
    /// Every target's state now. Reads each target's breaker layer, counters
    /// and bulkhead; takes short locks, changes nothing.
    pub fn snapshot(&self) -> HealthSnapshot {
        let meta = &*self.meta;
        let mut served = 0;
        let mut served_by_fallback = 0;
        let targets: Vec<_> = meta
            .targets
            .iter()
            .enumerate()
            .map(|(index, _)| {
                let health = target_health(meta, index);
                served += health.served;
                if index > 0 {
                    served_by_fallback += health.served;
                }
                health
            })
            .collect();
        HealthSnapshot {
            targets,
            served,
            served_by_fallback,
            fallback_share: if served == 0 {
                0.0
            } else {
                served_by_fallback as f64 / served as f64
            },
            no_target_available: meta.no_target.load(Ordering::Relaxed),
            hedges: self.hedges(),
        }
    }

    /// The breaker handle of the target named `target`: open, close or
    /// isolate its failure domains, unpark its billing scopes.
    pub fn breaker(&self, target: &str) -> Option<&BreakerHandle> {
        self.meta
            .targets
            .iter()
            .find(|t| t.name == target)
            .map(|t| &t.breaker)
    }

    /// The targets' names, in failover order.
    pub fn targets(&self) -> impl Iterator<Item = &str> + '_ {
        self.meta.targets.iter().map(|t| t.name)
    }

    /// The gauges of the bulkhead of the target named `target`, if it has one.
    pub fn bulkhead(&self, target: &str) -> Option<BulkheadSnapshot> {
        let t = self.meta.targets.iter().find(|t| t.name == target)?;
        t.bulkhead.as_ref().map(|b| b.snapshot())
    }

    /// Successful responses served by the target named `target` so far.
    pub fn served(&self, target: &str) -> Option<u64> {
        let t = self.meta.targets.iter().find(|t| t.name == target)?;
        Some(t.served.sum())
    }

    /// Answers of the target named `target` after which the request went on
    /// to another target, so far.
    pub fn failed_over(&self, target: &str) -> Option<u64> {
        let t = self.meta.targets.iter().find(|t| t.name == target)?;
        Some(t.failed_over.load(Ordering::Relaxed))
    }

    /// Requests refused with `NoTargetAvailable` so far.
    pub fn no_target_available(&self) -> u64 {
        self.meta.no_target.load(Ordering::Relaxed)
    }

    /// Hedges sent so far; `None` if the failover does not hedge.
    pub fn hedges(&self) -> Option<u64> {
        let hedging = self.meta.hedging.as_ref()?;
        Some(hedging.sent.load(Ordering::Relaxed))
    }

    /// Whether the target named `target` is tried after the others for
    /// being slow; `None` if there is no such target or the failover does
    /// not hedge.
    pub fn demoted(&self, target: &str) -> Option<bool> {
        self.meta.hedging.as_ref()?;
        let t = self.meta.targets.iter().find(|t| t.name == target)?;
        Some(t.speed.is_marked())
    }
}

fn target_health(meta: &Meta, index: usize) -> TargetHealth {
    let t = &meta.targets[index];
    let last = t
        .last_failure
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let gate_reason = last
        .as_ref()
        .filter(|l| l.verdict == Verdict::Throttled)
        .map(|l| l.reason.as_str());
    let scopes = scope_health(&t.breaker, gate_reason);
    let bulkhead = t.bulkhead.as_ref().map(|b| {
        let s = b.snapshot();
        BulkheadHealth {
            in_flight: s.in_flight,
            limit: s.limit,
        }
    });
    // The most lasting refusal first, as the breaker layer checks them.
    let refusing = |state: State| {
        scopes
            .iter()
            .filter(|s| s.state == state)
            .map(|s| s.retry_after)
            .min()
    };
    let (state, retry_after) = [
        (TargetState::Parked, State::Parked),
        (TargetState::Open, State::Open),
        (TargetState::HalfOpen, State::HalfOpen),
        (TargetState::Throttled, State::Gated),
    ]
    .into_iter()
    .find_map(|(target, scope_state)| refusing(scope_state).map(|r| (target, r)))
    .unwrap_or(match bulkhead {
        Some(b) if b.in_flight >= b.limit => (TargetState::Full, None),
        _ => (TargetState::Available, None),
    });
    let park_reason = scopes
        .iter()
        .find(|s| s.state == State::Parked)
        .and_then(|s| s.reason.clone());
    TargetHealth {
        name: t.name.to_owned(),
        index,
        provider: t.provider.as_deref().map(str::to_owned),
        region: t.region.as_deref().map(str::to_owned),
        state,
        retry_after,
        reason: park_reason.or(last.map(|l| l.reason)),
        provider_overloaded: t.group.is_some_and(|g| meta.overloaded(g)),
        served: t.served.sum(),
        failed_over: t.failed_over.load(Ordering::Relaxed),
        gated_last_hour: scopes.iter().filter_map(|s| s.gated_last_hour).max(),
        open_time: scopes.iter().filter_map(|s| s.open_time).max(),
        demoted: t.speed.is_marked(),
        hedge_delay: t.speed.delay(),
        bulkhead,
        scopes,
    }
}

/// Every scope `breaker` tracks, with `gate_reason` (what last throttled
/// its target, if the caller knows) as the reason of each gated gate.
pub(crate) fn scope_health(breaker: &BreakerHandle, gate_reason: Option<&str>) -> Vec<ScopeHealth> {
    let mut scopes = breaker.states();
    if let Some(reason) = gate_reason {
        for s in scopes.iter_mut().filter(|s| s.state == State::Gated) {
            s.reason = Some(reason.to_owned());
        }
    }
    scopes
}

impl fmt::Debug for FailoverHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.meta, f)
    }
}
