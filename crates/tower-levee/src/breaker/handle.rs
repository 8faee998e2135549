//! A handle on a breaker layer's state: health, admission checks, manual
//! control, counters.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use levee_core::breaker::{BreakerStatus, Tripping};
use levee_core::classify::Verdict;
use levee_core::classify::hints::{Dimension, Period};
use levee_core::clock::{Clock, Timestamp};
use levee_core::gate::Closings;
use levee_core::transition::{Mechanism, State};

use super::admission::{PeekCache, PeekMemo, peek};
use super::error::Refused;
use super::event::{EventSubscriber, Origin};
use super::fleet::FleetUpdate;
use super::latency::LatencyEstimate;
use super::scope::RequestHead;
use super::shared::Shared;
use super::signal::FleetSignals;
use crate::error::BoxError;

/// A handle on the state shared by every clone of one
/// [`BreakerLayer`](super::BreakerLayer): hold it in a health route or an
/// admin endpoint.
#[derive(Clone)]
pub struct BreakerHandle {
    pub(crate) shared: Arc<Shared>,
}

/// The state of one scope of one mechanism (a breaker, a throttle gate or
/// a park), as [`BreakerHandle::states`] and a failover's health snapshot
/// report it.
///
/// The mechanism and the state serialize as their stable names
/// ([`Mechanism::as_str`], [`State::as_str`]), and compare equal to them
/// (`health.state == "open"`). With the `serde` feature it serializes to JSON
/// with durations in milliseconds (`retry_after_ms`, `gated_last_hour_ms`,
/// `gated_total_ms`, `open_time_ms`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ScopeHealth {
    /// Which mechanism: `breaker`, `gate` or `park`.
    pub mechanism: Mechanism,
    /// The scope's key.
    pub scope: String,
    /// Its state: `closed`, `open`, `half_open`, `clear`, `gated`, `active`
    /// or `parked`.
    pub state: State,
    /// How long until the scope admits requests again, if it does not now.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "retry_after_ms", serialize_with = "crate::millis::option")
    )]
    pub retry_after: Option<Duration>,
    /// Time spent gated in the last hour (gates only): the share of each
    /// hour a quota scope spends gated says whether its quota still fits
    /// its traffic.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "gated_last_hour_ms",
            serialize_with = "crate::millis::option"
        )
    )]
    pub gated_last_hour: Option<Duration>,
    /// Time spent gated in all, since the scope was first tracked (gates only).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "gated_total_ms", serialize_with = "crate::millis::option")
    )]
    pub gated_total: Option<Duration>,
    /// Time spent away from `closed` (open, half-open, isolated) in all,
    /// since the scope was first tracked (breakers only): the time each
    /// target spends out of rotation.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "open_time_ms", serialize_with = "crate::millis::option")
    )]
    pub open_time: Option<Duration>,
    /// Why: a park's cause, a breaker's failures by cause while it is not
    /// closed, or (in a failover's snapshot) the throttle that gated a gate.
    pub reason: Option<String>,
    /// A breaker's recent time to first byte, when its layer estimates it
    /// ([`latency_estimate`](super::BreakerLayerBuilder::latency_estimate)):
    /// set `slow_call` at about 3× its p99.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub latency: Option<LatencyEstimate>,
    /// A breaker's recent time from the call's start to a stream's first
    /// output (the time to first token), when its layer estimates latency:
    /// set [`first_content_timeout`](super::BreakerLayerBuilder::first_content_timeout)
    /// above its p99.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub first_content: Option<LatencyEstimate>,
    /// What the provider last said is left of each of a quota scope's
    /// limits (gates; recorded once a limit is half used, see
    /// [`pace`](super::BreakerLayerBuilder::pace)).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub remaining: Vec<LimitLeft>,
    /// How often the gate closed: on a provider's 429, and paced (gates only).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub closings: Option<Closings>,
}

/// One limit of a quota scope, as its provider last reported it and
/// refilled since: in [`ScopeHealth::remaining`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LimitLeft {
    /// `requests`, `tokens`, `input_tokens` or `output_tokens`.
    pub dimension: Dimension,
    /// `minute`, `hour`, `day`, `month`, or unnamed when the header names
    /// none (then left out of the JSON).
    #[cfg_attr(
        feature = "serde",
        serde(skip_serializing_if = "crate::breaker::handle::unnamed")
    )]
    pub period: Period,
    /// What is left now.
    pub remaining: u64,
    /// The limit, if reported.
    pub limit: Option<u64>,
    /// How long until the limit is whole again, if reported.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "reset_ms", serialize_with = "crate::millis::option")
    )]
    pub reset: Option<Duration>,
}

/// Whether a limit's period is unnamed: left out of the JSON.
#[cfg(feature = "serde")]
fn unnamed(period: &Period) -> bool {
    *period == Period::Unnamed
}

impl ScopeHealth {
    fn new(scope: &str, state: State) -> Self {
        ScopeHealth {
            mechanism: state.mechanism(),
            scope: scope.into(),
            state,
            retry_after: None,
            gated_last_hour: None,
            gated_total: None,
            open_time: None,
            reason: None,
            latency: None,
            first_content: None,
            remaining: Vec::new(),
            closings: None,
        }
    }
}

/// Calls refused by each mechanism, counted apart from upstream failures
/// ("why did errors spike with zero provider calls?").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Rejections {
    /// Refused by an open breaker.
    pub breaker: u64,
    /// Refused by a closed throttle gate.
    pub gate: u64,
    /// Refused by a parked billing scope.
    pub park: u64,
}

impl BreakerHandle {
    /// Lets the layer admit shadow probes ([`ShadowProbe`](super::ShadowProbe));
    /// a failover that sends them says so when it is built. Until then a
    /// refusal costs no look for the mark.
    pub(crate) fn accept_shadow_probes(&self) {
        self.shared
            .shadow_probes
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        BreakerHandle { shared }
    }

    /// The replicas the fleet counts sending to this layer's providers (1
    /// alone).
    pub(crate) fn replicas(&self) -> u32 {
        self.shared.replicas()
    }

    /// Every tracked scope with its state: breakers, then gates, then
    /// parks, each sorted by key.
    pub fn states(&self) -> Vec<ScopeHealth> {
        let s = &*self.shared;
        let now = s.clock.now();
        let mut out = Vec::new();
        for (key, h) in s.domains.entries() {
            if let Some(cell) = h.lock() {
                let state = &cell.state;
                let status = state.status();
                out.push(ScopeHealth {
                    retry_after: state.open_until().map(|u| u.saturating_duration_since(now)),
                    open_time: Some(state.time_open(now)),
                    reason: (status != BreakerStatus::Closed)
                        .then(|| failure_causes(state.failure_breakdown()))
                        .flatten(),
                    latency: h.hot().and_then(|hot| hot.latency.estimate()),
                    first_content: h.hot().and_then(|hot| hot.first_content.estimate()),
                    ..ScopeHealth::new(&key, status.state())
                });
            }
        }
        by_scope(&mut out);
        let gates = out.len();
        s.gates.for_each(|key, gate| {
            let remaining = gate.allowance().map_or_else(Vec::new, |a| {
                a.remaining(now)
                    .map(
                        |(dimension, period, remaining, limit, reset_at)| LimitLeft {
                            dimension,
                            period,
                            remaining,
                            limit,
                            reset: reset_at
                                .filter(|at| *at > now)
                                .map(|at| at.saturating_duration_since(now)),
                        },
                    )
                    .collect()
            });
            out.push(ScopeHealth {
                gated_last_hour: Some(gate.gated_in_last(now, Duration::from_secs(3600))),
                gated_total: Some(gate.gated_time(now)),
                remaining,
                closings: Some(gate.closings()),
                ..deadline_scope(key, gate.until(), now, [State::Gated, State::Clear])
            });
        });
        by_scope(&mut out[gates..]);
        let parks = out.len();
        s.parks.for_each(|key, park| {
            out.push(ScopeHealth {
                reason: park.reason().map(|r| r.to_string()),
                ..deadline_scope(key, park.until(), now, [State::Parked, State::Active])
            });
        });
        by_scope(&mut out[parks..]);
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

    /// Whether the layer would admit `head`'s request now, checked without
    /// sending anything, taking a probe slot, counting a rejection or
    /// changing any state: park, then gate, then breaker, as a call is
    /// checked, for the scopes the layer would give the request.
    ///
    /// `Err` is the rejection the layer would return: [`Parked`],
    /// [`Throttled`] or [`CircuitOpen`], with its `retry_after`. A breaker
    /// whose cool-off has ended, or that is half-open with a probe slot
    /// free, admits (the call itself becomes the probe). The answer is
    /// advice: the state can change before the call, and the call decides.
    ///
    /// ```
    /// use tower_levee::breaker::{BreakerLayer, CircuitOpen, RequestHead};
    ///
    /// let layer = BreakerLayer::new();
    /// let handle = layer.handle();
    /// let req = http::Request::get("https://api.openai.com/v1/models").body(()).unwrap();
    /// assert!(handle.admits(&RequestHead::of(&req)).is_ok());
    ///
    /// handle.open("api.openai.com");
    /// let err = handle.admits(&RequestHead::of(&req)).unwrap_err();
    /// assert!(err.is::<CircuitOpen>());
    /// ```
    ///
    /// [`Parked`]: super::Parked
    /// [`Throttled`]: super::Throttled
    /// [`CircuitOpen`]: super::CircuitOpen
    pub fn admits(&self, head: &RequestHead<'_>) -> Result<(), BoxError> {
        peek(&self.shared, head, None, None).map_err(Refused::into_error)
    }

    /// How long until the layer would admit `head`'s request, or `None` if
    /// it would now. Read-only, like [`admits`](Self::admits).
    pub fn retry_after(&self, head: &RequestHead<'_>) -> Option<Duration> {
        peek(&self.shared, head, None, None)
            .err()
            .map(|r| r.retry_after())
    }

    /// [`admits`](Self::admits) with a per-caller cache of the failure
    /// domain's handle and a per-clone memo of the last peek, its refusal
    /// not yet boxed.
    #[inline]
    pub(crate) fn admits_cached(
        &self,
        head: &RequestHead<'_>,
        cache: &PeekCache,
        memo: Option<&mut PeekMemo>,
    ) -> Result<(), Refused> {
        peek(&self.shared, head, Some(cache), memo)
    }

    /// Opens a domain's breaker now, as if it had just tripped (e.g. ahead of
    /// known maintenance).
    pub fn open(&self, domain: &str) {
        let cfg = &self.shared.settings.breaker;
        self.shared
            .change_breaker(domain, Origin::Manual, |state, now, rng| {
                state.open(cfg, now, rng, "opened manually")
            });
    }

    /// Closes a domain's breaker now, resetting its counts and cool-off growth.
    pub fn close(&self, domain: &str) {
        self.shared
            .change_breaker(domain, Origin::Manual, |state, now, _| state.close(now));
    }

    /// Holds a domain's breaker open until [`close`](Self::close).
    pub fn isolate(&self, domain: &str) {
        self.shared
            .change_breaker(domain, Origin::Manual, |state, now, _| state.isolate(now));
    }

    /// Unparks a billing scope (e.g. after finance raised the cap). Returns
    /// whether it was parked.
    pub fn unpark(&self, billing: &str) -> bool {
        self.shared.unpark(billing, Origin::Manual)
    }

    /// Applies what another replica of the same service reported (a fleet
    /// sync such as the `levee-redis` crate calls this): gates and parks are
    /// adopted at once and never shortened; a breaker open refuses until its
    /// deadline without counting anything here. Events it causes carry
    /// [`Origin::Fleet`]. Returns whether anything changed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower_levee::breaker::{BreakerLayer, FleetUpdate, RequestHead, Throttled};
    ///
    /// let handle = BreakerLayer::new().handle();
    /// let wait = Duration::from_secs(30);
    /// handle.adopt(FleetUpdate::Gated { scope: "api.openai.com", wait, reason: "status:429" });
    /// let req = http::Request::get("https://api.openai.com/v1/models").body(()).unwrap();
    /// assert!(handle.admits(&RequestHead::of(&req)).unwrap_err().is::<Throttled>());
    /// ```
    pub fn adopt(&self, update: FleetUpdate<'_>) -> bool {
        self.shared.adopt(update)
    }

    /// Sends every later event of this layer to `subscriber` too, as
    /// [`BreakerLayerBuilder::on_event`](super::BreakerLayerBuilder::on_event)
    /// does for a subscriber known before the layer is built (a fleet sync
    /// attaches this way).
    pub fn subscribe(&self, subscriber: EventSubscriber) {
        self.shared.watch(subscriber);
    }

    /// Lets a fleet sync decide who probes each open failure domain and
    /// count failure streaks across replicas: `signals` receives each
    /// closed breaker's streak as it changes and each open breaker's ask
    /// for a probe, answered through [`adopt`](Self::adopt)
    /// ([`FleetUpdate::ProbeGranted`], [`FleetUpdate::ProbeHeld`]). From
    /// then on, unless [`FleetSignals::probes`] says otherwise, an open
    /// breaker whose cool-off ends refuses calls until the answer comes, or
    /// for [`FLEET_ASK_WAIT`](super::FLEET_ASK_WAIT) at most. One sync coordinates a layer: a second replaces the first.
    /// A closed breaker's success path is unchanged.
    pub fn coordinate(&self, signals: FleetSignals) {
        let consecutive = matches!(
            self.shared.settings.breaker.tripping,
            Tripping::Consecutive { .. }
        );
        let (probes, streaks) = (signals.probes, signals.streaks && consecutive);
        *self
            .shared
            .coordinator
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(signals);
        self.shared.streaks.store(streaks, Ordering::Relaxed);
        self.shared.leased.store(probes, Ordering::Relaxed);
    }

    /// Ends [`coordinate`](Self::coordinate): open breakers probe on their
    /// own cool-offs again, and nothing is signalled (the fleet sync
    /// stopped).
    pub fn uncoordinate(&self) {
        self.shared.streaks.store(false, Ordering::Relaxed);
        self.shared.leased.store(false, Ordering::Relaxed);
        *self
            .shared
            .coordinator
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Probes in flight for a failure domain (zero unless half-open).
    pub fn probes_in_flight(&self, domain: &str) -> u32 {
        self.shared
            .domains
            .get(domain)
            .and_then(|h| h.lock())
            .map_or(0, |cell| cell.state.probes_in_flight())
    }

    /// Calls refused by each mechanism so far.
    pub fn rejections(&self) -> Rejections {
        let s = &self.shared;
        Rejections {
            breaker: s.stats.rejected_breaker.sum(),
            gate: s.gates.rejected(),
            park: s.parks.rejected(),
        }
    }

    /// Upstream outcomes with this verdict so far (successes are not counted:
    /// counting them would put a shared write on every call).
    pub fn upstream_failures(&self, verdict: Verdict) -> u64 {
        self.shared.stats.upstream[verdict as usize].load(Ordering::Relaxed)
    }
}

/// A gate's or park's scope: `refusing` while its deadline is ahead of
/// `now`, `admitting` after.
fn deadline_scope(
    key: &str,
    until: Option<Timestamp>,
    now: Timestamp,
    [refusing, admitting]: [State; 2],
) -> ScopeHealth {
    let until = until.filter(|u| *u > now);
    ScopeHealth {
        retry_after: until.map(|u| u.saturating_duration_since(now)),
        ..ScopeHealth::new(key, if until.is_some() { refusing } else { admitting })
    }
}

fn by_scope(scopes: &mut [ScopeHealth]) {
    scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
}

/// A breaker's failures by cause, `"status:503 ×4, transport:timeout ×1"`;
/// `None` when there are none.
fn failure_causes(breakdown: &BTreeMap<String, u32>) -> Option<String> {
    if breakdown.is_empty() {
        return None;
    }
    let causes: Vec<_> = breakdown.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    Some(causes.join(", "))
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
