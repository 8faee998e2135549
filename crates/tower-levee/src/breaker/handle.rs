//! A handle on a breaker layer's state: health, manual control, counters.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use levee_core::breaker::BreakerStatus;
use levee_core::classify::Verdict;
use levee_core::clock::Clock;
use levee_core::transition::Mechanism;

use super::latency::LatencyEstimate;
use super::shared::Shared;

/// A handle on the state shared by every clone of one
/// [`BreakerLayer`](super::BreakerLayer): hold it in a health route or an
/// admin endpoint.
#[derive(Clone)]
pub struct BreakerHandle {
    pub(crate) shared: Arc<Shared>,
}

/// The state of one scope of one mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeState {
    /// Which mechanism.
    pub mechanism: Mechanism,
    /// The scope's key.
    pub scope: String,
    /// The state's name: `closed`, `open`, `half_open`, `clear`, `gated`, `active`, `parked`.
    pub state: &'static str,
    /// How long until the scope admits requests again, if it does not now.
    pub retry_after: Option<Duration>,
    /// Time spent gated in the last hour (gates only).
    pub gated_last_hour: Option<Duration>,
    /// Time spent gated in all, since the scope was first tracked (gates only).
    pub gated_total: Option<Duration>,
    /// Time spent away from `closed` (open, half-open, isolated) in all,
    /// since the scope was first tracked (breakers only): seed 000's "time
    /// open per target".
    pub open_time: Option<Duration>,
    /// The recent time to first byte (breakers of a layer built with
    /// [`latency_estimate`](super::BreakerLayerBuilder::latency_estimate)).
    pub latency: Option<LatencyEstimate>,
}

/// Calls refused by each mechanism, counted apart from upstream failures
/// ("why did errors spike with zero provider calls?").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Rejections {
    /// Refused by an open breaker.
    pub breaker: u64,
    /// Refused by a closed throttle gate.
    pub gate: u64,
    /// Refused by a parked billing scope.
    pub park: u64,
}

impl BreakerHandle {
    /// Every tracked scope with its state, sorted by mechanism and key.
    pub fn states(&self) -> Vec<ScopeState> {
        let s = &*self.shared;
        let now = s.clock.now();
        let mut out = Vec::new();
        for (key, h) in s.domains.entries() {
            if let Some(cell) = h.lock() {
                let state = &cell.state;
                out.push(ScopeState {
                    mechanism: Mechanism::Breaker,
                    scope: key.into(),
                    state: state.status().as_str(),
                    retry_after: state.open_until().map(|u| u.saturating_duration_since(now)),
                    gated_last_hour: None,
                    gated_total: None,
                    open_time: Some(state.time_open(now)),
                    latency: h.hot().and_then(|hot| hot.latency.estimate()),
                });
            }
        }
        for (key, h) in s.gates.entries() {
            if let Some(gate) = h.lock() {
                let until = gate.until().filter(|u| *u > now);
                out.push(ScopeState {
                    mechanism: Mechanism::Gate,
                    scope: key.into(),
                    state: if until.is_some() { "gated" } else { "clear" },
                    retry_after: until.map(|u| u.saturating_duration_since(now)),
                    gated_last_hour: Some(gate.gated_in_last(now, Duration::from_secs(3600))),
                    gated_total: Some(gate.gated_time(now)),
                    open_time: None,
                    latency: None,
                });
            }
        }
        for (key, h) in s.parks.entries() {
            if let Some(park) = h.lock() {
                let until = park.until().filter(|u| *u > now);
                out.push(ScopeState {
                    mechanism: Mechanism::Park,
                    scope: key.into(),
                    state: if until.is_some() { "parked" } else { "active" },
                    retry_after: until.map(|u| u.saturating_duration_since(now)),
                    gated_last_hour: None,
                    gated_total: None,
                    open_time: None,
                    latency: None,
                });
            }
        }
        out.sort_by(|a, b| (a.mechanism as u8, &a.scope).cmp(&(b.mechanism as u8, &b.scope)));
        out
    }

    /// The breaker status of a failure domain, if it is tracked.
    pub fn breaker_status(&self, domain: &str) -> Option<BreakerStatus> {
        let h = self.shared.domains.get(domain)?;
        let cell = h.lock()?;
        Some(cell.state.status())
    }

    /// Failure counts by cause for a failure domain (attribution only: it
    /// never decides whether the breaker trips; cleared when the bucket is).
    pub fn failure_breakdown(&self, domain: &str) -> Option<BTreeMap<String, u32>> {
        let h = self.shared.domains.get(domain)?;
        let cell = h.lock()?;
        Some(cell.state.failure_breakdown().clone())
    }

    /// Opens a domain's breaker now, as if it had just tripped (e.g. ahead of
    /// known maintenance).
    pub fn open(&self, domain: &str) {
        let cfg = &self.shared.settings.breaker;
        self.shared.manual_breaker(domain, |state, now, rng| {
            state.open(cfg, now, rng, "opened manually")
        });
    }

    /// Closes a domain's breaker now, resetting its counts and cool-off growth.
    pub fn close(&self, domain: &str) {
        self.shared
            .manual_breaker(domain, |state, now, _| state.close(now));
    }

    /// Holds a domain's breaker open until [`close`](Self::close).
    pub fn isolate(&self, domain: &str) {
        self.shared
            .manual_breaker(domain, |state, now, _| state.isolate(now));
    }

    /// Unparks a billing scope (e.g. after finance raised the cap). Returns
    /// whether it was parked.
    pub fn unpark(&self, billing: &str) -> bool {
        self.shared.unpark(billing)
    }

    /// Calls refused by each mechanism so far.
    pub fn rejections(&self) -> Rejections {
        let st = &self.shared.stats;
        Rejections {
            breaker: st.rejected_breaker.sum(),
            gate: st.rejected_gate.sum(),
            park: st.rejected_park.sum(),
        }
    }

    /// Upstream outcomes with this verdict so far (successes are not counted:
    /// counting them would put a shared write on every call).
    pub fn upstream_failures(&self, verdict: Verdict) -> u64 {
        self.shared.stats.upstream[verdict as usize].load(Ordering::Relaxed)
    }
}

impl fmt::Debug for BreakerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerHandle")
            .field("domains", &self.shared.domains.len())
            .field("gates", &self.shared.gates.len())
            .field("parks", &self.shared.parks.len())
            .finish()
    }
}
