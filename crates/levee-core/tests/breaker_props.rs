//! Properties of the breaker state machine over arbitrary sequences.

use std::collections::BTreeMap;
use std::time::Duration;

use levee_core::breaker::{
    Admission, BreakerConfig, BreakerState, BreakerStatus, Cooldown, Jitter, Outcome, Permit,
    ROLLING_BUCKETS, Tripping,
};
use levee_core::classify::Verdict;
use levee_core::clock::Timestamp;
use proptest::prelude::*;

const KEY: &str = "org-a";
const CAUSES: [&str; 3] = ["status:503", "transport:timeout", "status:400"];

// === strategies ===

#[derive(Clone, Debug)]
struct Step {
    advance_ms: u64,
    verdict: Verdict,
    slow: bool,
    cause: usize,
    hold: bool,
}

impl Step {
    fn outcome(&self) -> Outcome {
        // Credential failures get their own cause, so a breakdown tells them apart.
        let cause = match self.verdict {
            Verdict::Credential => "status:401",
            _ => CAUSES[self.cause],
        };
        Outcome::new(self.verdict, cause).with_slow(self.slow)
    }
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![0u64..2_000, 0u64..120_000],
        prop::sample::select(Verdict::ALL.to_vec()),
        any::<bool>(),
        0usize..CAUSES.len(),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(advance_ms, verdict, slow, cause, hold)| Step {
            advance_ms,
            verdict,
            slow,
            cause,
            hold,
        })
}

/// Steps that are mostly plain successes, for a breaker that recovers.
fn mostly_successes() -> impl Strategy<Value = Step> {
    (step(), prop::bool::weighted(0.6)).prop_map(|(mut step, success)| {
        if success {
            step.verdict = Verdict::Success;
            step.slow = false;
        }
        step
    })
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop::sample::select(vec![Jitter::None, Jitter::Full, Jitter::Equal])
}

fn cooldown() -> impl Strategy<Value = Cooldown> {
    (1u64..60_000, 1.0f64..4.0, 1u64..64, jitter(), 0u32..8).prop_map(
        |(base, multiplier, factor, jitter, hold)| Cooldown::Exponential {
            base: Duration::from_millis(base),
            multiplier,
            max: Duration::from_millis(base * factor),
            jitter,
            hold,
        },
    )
}

fn tripping() -> impl Strategy<Value = Tripping> {
    prop_oneof![
        (1u32..7).prop_map(|threshold| Tripping::Consecutive { threshold }),
        (10u64..300_000, 0u32..8, 0.0f64..=1.0).prop_map(|(w, min_calls, failure_ratio)| {
            Tripping::Rolling {
                window: Duration::from_millis(w),
                min_calls,
                failure_ratio,
            }
        }),
    ]
}

fn config() -> impl Strategy<Value = BreakerConfig> {
    (
        tripping(),
        1u32..4,
        cooldown(),
        cooldown(),
        1u32..5,
        1u32..=4,
        1u64..120,
    )
        .prop_map(
            |(tripping, cred, cooldown, cred_cooldown, probes, needed, timeout)| {
                BreakerConfig::builder()
                    .tripping(tripping)
                    .credential_threshold(cred)
                    .cooldown(cooldown)
                    .credential_cooldown(cred_cooldown)
                    .half_open_probes(probes)
                    .half_open_success_ratio(f64::from(needed.min(probes)) / f64::from(probes))
                    .probe_timeout(Duration::from_secs(timeout))
                    .build()
                    .expect("strategy builds valid configs")
            },
        )
}

// === helpers ===

/// Everything observable about a breaker.
#[derive(Clone, Debug, PartialEq)]
struct Snapshot {
    status: BreakerStatus,
    generation: u64,
    open_until: Option<Timestamp>,
    isolated: bool,
    reopens: u32,
    consecutive_failures: u32,
    breakdown: BTreeMap<String, u32>,
    probes_in_flight: u32,
}

fn snapshot(s: &BreakerState) -> Snapshot {
    Snapshot {
        status: s.status(),
        generation: s.generation(),
        open_until: s.open_until(),
        isolated: s.is_isolated(),
        reopens: s.reopens(),
        consecutive_failures: s.consecutive_failures(),
        breakdown: s.failure_breakdown().clone(),
        probes_in_flight: s.probes_in_flight(),
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const T0: Timestamp = Timestamp::from_nanos(1_000_000_000);

proptest! {
    /// 429s, quota and bad requests never open the breaker and never change
    /// what it counts: the same run with them removed ends in the same state
    /// after every other step.
    #[test]
    fn neutral_outcomes_never_open_the_breaker_nor_change_its_counts(
        cfg in config(),
        steps in prop::collection::vec(step(), 1..120),
        seed in any::<u64>(),
    ) {
        let mut full = BreakerState::new(&cfg);
        let mut lean = BreakerState::new(&cfg);
        let (mut rng_full, mut rng_lean) = (fastrand::Rng::with_seed(seed), fastrand::Rng::with_seed(seed));
        let mut now = T0;
        for step in &steps {
            now = now.saturating_add(ms(step.advance_ms));
            let outcome = step.outcome();
            let (admission, _) = full.admit(&cfg, now);
            if outcome.is_neutral() {
                let Admission::Allowed(permit) = admission else { continue };
                let mut before = snapshot(&full);
                let t = full.record(&cfg, KEY, permit, &outcome, now, &mut rng_full);
                prop_assert!(t.is_none(), "{:?} changed state: {:?}", step.verdict, t);
                before.probes_in_flight = 0; // its slot was handed back
                prop_assert_eq!(snapshot(&full), before);
                continue;
            }
            let (lean_admission, _) = lean.admit(&cfg, now);
            prop_assert_eq!(admission.is_allowed(), lean_admission.is_allowed());
            if let (Admission::Allowed(p), Admission::Allowed(q)) = (admission, lean_admission) {
                let a = full.record(&cfg, KEY, p, &outcome, now, &mut rng_full);
                let b = lean.record(&cfg, KEY, q, &outcome, now, &mut rng_lean);
                prop_assert_eq!(a, b);
            }
            prop_assert_eq!(snapshot(&full), snapshot(&lean));
        }
    }

    /// `record_idle_success` is `record` for the successes it takes: a run
    /// that offers it every plain success (falling back to `record` when it
    /// declines) ends every step in the same state, window included, and
    /// under a tripping rule other than rolling it takes none.
    #[test]
    fn an_idle_success_recorded_alone_is_recorded_as_record_would(
        cfg in config(),
        steps in prop::collection::vec(mostly_successes(), 1..200),
        seed in any::<u64>(),
    ) {
        let window = match cfg.tripping {
            Tripping::Rolling { window, .. } => Some(window),
            _ => None,
        };
        let mut full = BreakerState::new(&cfg);
        let mut fast = BreakerState::new(&cfg);
        let (mut rng_full, mut rng_fast) = (fastrand::Rng::with_seed(seed), fastrand::Rng::with_seed(seed));
        let mut now = T0;
        // Permits held back and reported steps later, perhaps stale by then
        // (the breaker opened and closed again meanwhile).
        let mut held: Vec<(Permit, Permit, Outcome)> = Vec::new();
        for step in &steps {
            now = now.saturating_add(ms(step.advance_ms));
            let mut reports = Vec::new();
            if step.cause == 0 && !held.is_empty() {
                reports.push(held.remove(0));
            }
            let (a, _) = full.admit(&cfg, now);
            let (b, _) = fast.admit(&cfg, now);
            prop_assert_eq!(a.is_allowed(), b.is_allowed());
            if let (Admission::Allowed(p), Admission::Allowed(q)) = (a, b) {
                if step.hold {
                    held.push((p, q, step.outcome()));
                } else {
                    reports.push((p, q, step.outcome()));
                }
            }
            for (p, q, outcome) in reports {
                let expected = full.record(&cfg, KEY, p, &outcome, now, &mut rng_full);
                let plain_success = outcome.effective_verdict() == Verdict::Success;
                let taken = plain_success
                    && fast.record_idle_success(window.unwrap_or(ms(60_000)), q, now);
                prop_assert!(!taken || window.is_some(), "taken under {:?}", cfg.tripping);
                let got = if taken {
                    None
                } else {
                    fast.record(&cfg, KEY, q, &outcome, now, &mut rng_fast)
                };
                prop_assert_eq!(got, expected);
                prop_assert_eq!(format!("{fast:?}"), format!("{full:?}"));
            }
        }
    }

    /// However admissions, releases, reports and the clock interleave, no
    /// more than `half_open_probes` probes hold a live lease.
    #[test]
    fn probes_admitted_never_exceed_half_open_probes(
        probes in 1u32..6,
        ops in prop::collection::vec((0u8..4, any::<prop::sample::Index>(), step()), 1..300),
        seed in any::<u64>(),
    ) {
        let timeout = Duration::from_secs(10);
        let cfg = BreakerConfig::builder()
            .cooldown(Cooldown::fixed(Duration::from_secs(1)))
            .half_open_probes(probes)
            .half_open_success_ratio(0.5)
            .probe_timeout(timeout)
            .build()
            .unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut state = BreakerState::new(&cfg);
        state.open(&cfg, T0, &mut rng, "drill");
        let mut now = state.open_until().unwrap();
        let mut outstanding: Vec<Permit> = Vec::new();
        for (op, index, step) in ops {
            match op {
                0 => {
                    if let Admission::Allowed(p) = state.admit(&cfg, now).0 {
                        outstanding.push(p);
                    }
                }
                1 if !outstanding.is_empty() => {
                    state.release(outstanding.swap_remove(index.index(outstanding.len())));
                }
                2 if !outstanding.is_empty() => {
                    let p = outstanding.swap_remove(index.index(outstanding.len()));
                    state.record(&cfg, KEY, p, &step.outcome(), now, &mut rng);
                }
                _ => now = now.saturating_add(ms(step.advance_ms % 15_000)),
            }
            let live = outstanding
                .iter()
                .filter(|p| p.probe.is_some() && p.generation == state.generation())
                .filter(|p| now < p.admitted_at.saturating_add(timeout))
                .count();
            prop_assert!(live <= probes as usize, "{} live probes > {}", live, probes);
            prop_assert!(state.probes_in_flight() <= probes);
        }
    }

    /// Handing back k slots lets exactly k more probes in.
    #[test]
    fn a_released_probe_slot_is_reusable(probes in 1u32..8, released in 0u32..8, seed in any::<u64>()) {
        let released = released.min(probes) as usize;
        let cfg = BreakerConfig::builder().half_open_probes(probes).build().unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut state = BreakerState::new(&cfg);
        state.open(&cfg, T0, &mut rng, "drill");
        let now = state.open_until().unwrap();
        let permits: Vec<_> = (0..probes).map(|_| state.admit(&cfg, now).0.permit().unwrap()).collect();
        prop_assert!(!state.admit(&cfg, now).0.is_allowed());
        for p in &permits[..released] {
            state.release(*p);
        }
        for _ in 0..released {
            prop_assert!(state.admit(&cfg, now).0.is_allowed());
        }
        prop_assert!(!state.admit(&cfg, now).0.is_allowed());
    }

    /// A probe that neither reports nor is dropped holds its slot for exactly
    /// `probe_timeout`; after that its slot is re-leased and its report ignored.
    #[test]
    fn a_hung_probe_loses_its_lease_after_probe_timeout(
        probes in 1u32..5,
        timeout_ms in 1u64..600_000,
        late in prop::sample::select(Verdict::ALL.to_vec()),
        seed in any::<u64>(),
    ) {
        let timeout = ms(timeout_ms);
        let cfg = BreakerConfig::builder().half_open_probes(probes).probe_timeout(timeout).build().unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut state = BreakerState::new(&cfg);
        state.open(&cfg, T0, &mut rng, "drill");
        let t = state.open_until().unwrap();
        let hung: Vec<_> = (0..probes).map(|_| state.admit(&cfg, t).0.permit().unwrap()).collect();
        let almost = Timestamp::from_nanos(t.saturating_add(timeout).as_nanos() - 1);
        prop_assert!(!state.admit(&cfg, almost).0.is_allowed());
        let expiry = t.saturating_add(timeout);
        for _ in 0..probes {
            prop_assert!(state.admit(&cfg, expiry).0.is_allowed());
        }
        let before = snapshot(&state);
        for p in hung {
            let outcome = Outcome::new(late, "status:503");
            prop_assert!(state.record(&cfg, KEY, p, &outcome, expiry, &mut rng).is_none());
        }
        prop_assert_eq!(snapshot(&state), before);
    }

    /// A permit from before the last change of status changes nothing, whatever it reports.
    #[test]
    fn records_from_an_earlier_generation_are_ignored(
        cfg in config(),
        steps in prop::collection::vec(step(), 1..150),
        seed in any::<u64>(),
    ) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut state = BreakerState::new(&cfg);
        let mut now = T0;
        let mut held: Vec<Permit> = vec![state.admit(&cfg, now).0.permit().unwrap()];
        for step in &steps {
            now = now.saturating_add(ms(step.advance_ms));
            let outcome = step.outcome();
            let mut i = 0;
            while i < held.len() {
                if held[i].generation == state.generation() {
                    i += 1;
                    continue;
                }
                let stale = held.swap_remove(i);
                let before = snapshot(&state);
                prop_assert!(state.record(&cfg, KEY, stale, &outcome, now, &mut rng).is_none());
                prop_assert_eq!(snapshot(&state), before);
            }
            if let Admission::Allowed(p) = state.admit(&cfg, now).0 {
                if step.hold {
                    held.push(p);
                } else {
                    state.record(&cfg, KEY, p, &outcome, now, &mut rng);
                }
            }
        }
    }

    /// A drawn cool-off lies in `[floor, nominal]` (exactly the base while
    /// held), and the nominal never exceeds `max`.
    #[test]
    fn cool_off_stays_within_its_floor_and_max(c in cooldown(), reopens in 0u32..100, seed in any::<u64>()) {
        let Cooldown::Exponential { base, max, jitter, hold, .. } = &c else { unreachable!() };
        let mut rng = fastrand::Rng::with_seed(seed);
        let nominal = c.nominal(reopens);
        let (lo, hi) = c.bounds(reopens);
        prop_assert_eq!(hi, nominal);
        prop_assert!(base.min(max) <= &nominal && nominal <= *max);
        let floor = match jitter {
            // Held cool-offs are exact.
            _ if reopens < *hold => nominal,
            Jitter::None => nominal,
            Jitter::Full => nominal.mul_f64(0.1),
            Jitter::Equal => nominal / 2,
            _ => unreachable!("the strategy draws only the jitters above"),
        };
        prop_assert_eq!(lo, floor);
        for _ in 0..16 {
            let d = c.sample(reopens, &mut rng);
            prop_assert!(lo <= d && d <= hi, "{:?} outside [{:?}, {:?}]", d, lo, hi);
        }
    }

    /// Every cool-off the state machine picks lies within the schedule's
    /// bounds, counted from when the call that opened it ended, or, for a
    /// failed probe, from when the probe was sent; and no open ends before
    /// the failure that caused it. Each call answers after a lag (often
    /// none), so a probe may fail long after it was sent.
    #[test]
    fn every_open_lasts_within_the_cool_off_bounds(
        cfg in config(),
        steps in prop::collection::vec((step(), prop_oneof![Just(0u64), 0u64..300_000]), 1..150),
        seed in any::<u64>(),
    ) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut state = BreakerState::new(&cfg);
        let mut now = T0;
        for (step, lag_ms) in &steps {
            now = now.saturating_add(ms(step.advance_ms));
            let sent = now;
            let Admission::Allowed(p) = state.admit(&cfg, sent).0 else { continue };
            now = now.saturating_add(ms(*lag_ms));
            let outcome = step.outcome();
            let Some(t) = state.record(&cfg, KEY, p, &outcome, now, &mut rng) else { continue };
            if t.to != "open" {
                continue;
            }
            // Credential cool-off: a probe's key rejected; or, from closed,
            // the credential threshold reached, or a streak of credential
            // failures only (the breakdown counts since the last success).
            let breakdown = state.failure_breakdown();
            let rejected_keys = breakdown.get("status:401").copied().unwrap_or(0);
            let key_rejected = outcome.effective_verdict() == Verdict::Credential;
            let probe_failed = t.from == "half_open";
            let credential = if probe_failed {
                key_rejected
            } else {
                key_rejected && rejected_keys >= cfg.credential_threshold
                    || breakdown.keys().all(|k| k == "status:401")
            };
            let schedule = if credential {
                &cfg.credential_cooldown
            } else {
                &cfg.cooldown
            };
            let (lo, hi) = schedule.bounds(state.reopens());
            let until = t.until.unwrap();
            prop_assert_eq!(t.at, now);
            prop_assert!(until >= now, "open until {:?}, before the failure at {:?}", until, now);
            let from = if probe_failed { sent } else { now };
            let d = until.saturating_duration_since(from);
            if until == now && from < now {
                // The whole cool-off passed while the probe was out: it
                // was at most the probe's lag.
                prop_assert!(lo <= now.saturating_duration_since(from), "{:?} > lag ({})", lo, t.reason);
            } else {
                prop_assert!(lo <= d && d <= hi, "{:?} outside [{:?}, {:?}] ({})", d, lo, hi, t.reason);
            }
        }
    }

    /// The rolling window trips exactly when a naive list of timestamped
    /// calls says so, with the documented boundaries: the current bucket and
    /// the nine before it.
    #[test]
    fn rolling_window_trips_exactly_when_ratio_and_min_calls_are_met(
        window_ms in 10u64..100_000,
        min_calls in 0u32..12,
        failure_ratio in prop_oneof![prop::sample::select(vec![0.0, 0.25, 1.0 / 3.0, 0.5, 0.75, 1.0]), 0.0f64..=1.0],
        calls in prop::collection::vec((0u64..1_000, prop::bool::weighted(0.6)), 1..300),
        seed in any::<u64>(),
    ) {
        let window = ms(window_ms);
        let cfg = BreakerConfig::builder()
            .rolling(window, min_calls, failure_ratio)
            .build()
            .unwrap();
        let width = (window.as_nanos() as u64 / ROLLING_BUCKETS as u64).max(1);
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut state = BreakerState::new(&cfg);
        let mut oracle: Vec<(Timestamp, bool)> = Vec::new();
        let mut now = T0;
        for (permille, failed) in calls {
            now = now.saturating_add(window.mul_f64(permille as f64 / 1000.0 * 0.3));
            let p = state.admit(&cfg, now).0.permit().unwrap();
            let outcome = if failed { Outcome::new(Verdict::Availability, "status:503") } else { Outcome::success() };
            let tripped = state.record(&cfg, KEY, p, &outcome, now, &mut rng).is_some();

            oracle.push((now, failed));
            let current = now.as_nanos() / width;
            let in_window: Vec<bool> = oracle
                .iter()
                .filter(|(t, _)| current - t.as_nanos() / width < ROLLING_BUCKETS as u64)
                .map(|(_, f)| *f)
                .collect();
            let n = in_window.len() as u32;
            let f = in_window.iter().filter(|f| **f).count() as u32;
            let expected = failed && n >= min_calls.max(1) && f64::from(f) / f64::from(n) >= failure_ratio;
            prop_assert_eq!(tripped, expected, "{} of {} failed, min {}, ratio {}", f, n, min_calls, failure_ratio);
            if tripped {
                state.close(now);
                oracle.clear();
            }
        }
    }
}
