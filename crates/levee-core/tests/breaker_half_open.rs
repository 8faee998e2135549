//! Open, half-open and back: cool-offs, probes, leases, generations, and
//! manual control.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use levee_core::breaker::{
    Admission, BreakerConfig, BreakerStatus, Cooldown, HALF_OPEN_RETRY_AFTER, ISOLATED_RETRY_AFTER,
    Jitter, Outcome,
};
use levee_core::classify::Verdict;
use levee_core::clock::Timestamp;
use levee_core::transition::State;
use levee_core::transition::Transition;

const KEY: &str = "api.openai.com";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Cool-offs without jitter, so the schedule can be asserted exactly.
fn exact_cooldown() -> Cooldown {
    Cooldown::Exponential {
        base: secs(30),
        multiplier: 2.0,
        max: secs(900),
        jitter: Jitter::None,
        hold: 0,
    }
}

mod support;

use support::breaker::{Harness, unavailable};

impl Harness {
    fn new(cfg: BreakerConfig) -> Self {
        Harness::start(cfg, KEY, 3, Timestamp::from_nanos(5_000_000_000))
    }

    fn exact(probes: u32, ratio: f64) -> Self {
        Harness::new(
            BreakerConfig::builder()
                .cooldown(exact_cooldown())
                .half_open_probes(probes)
                .half_open_success_ratio(ratio)
                .probe_timeout(secs(10))
                .build()
                .unwrap(),
        )
    }

    /// Five failures: open.
    fn trip(&mut self) -> Transition {
        let mut last = None;
        for _ in 0..5 {
            let p = self.permit();
            last = self.record(p, unavailable());
        }
        last.expect("tripped")
    }

    /// Advances past the cool-off; the next admit half-opens.
    fn wait_out_cool_off(&mut self) {
        self.now = self.state.open_until().expect("open with a deadline");
    }

    fn cool_off(&self) -> Duration {
        self.state
            .open_until()
            .unwrap()
            .saturating_duration_since(self.now)
    }
}

#[test]
fn after_the_cool_off_one_probe_is_admitted_and_its_success_closes() {
    let mut h = Harness::exact(1, 1.0);
    h.trip();
    h.advance(secs(29));
    assert_eq!(
        h.admit(),
        Admission::Rejected {
            retry_after: secs(1)
        }
    );
    h.advance(secs(1));

    let (admission, t) = h.state.admit(&h.cfg, h.now);
    let t = t.expect("open -> half_open");
    assert_eq!((t.from, t.to), (State::Open, State::HalfOpen));
    assert_eq!(t.reason, "cool-off over, admitting 1 probe");
    let probe = admission.permit().unwrap();
    assert!(probe.is_probe());
    assert_eq!(h.state.status(), BreakerStatus::HalfOpen);
    assert_eq!(
        h.admit(),
        Admission::Rejected {
            retry_after: HALF_OPEN_RETRY_AFTER
        },
        "one probe at a time"
    );

    let t = h.record(probe, Outcome::success()).expect("closes");
    assert_eq!((t.from, t.to), (State::HalfOpen, State::Closed));
    assert_eq!(t.reason, "closed after 1 of 1 probes succeeded");
    assert!(h.admit().is_allowed());
}

#[test]
fn a_failed_probe_reopens_with_a_longer_cool_off_and_recovery_resets_growth() {
    let mut h = Harness::exact(1, 1.0);
    h.trip();
    assert_eq!(h.cool_off(), secs(30));
    for expected in [60, 120, 240, 480, 900, 900] {
        h.wait_out_cool_off();
        let probe = h.permit();
        let t = h.record(probe, unavailable()).expect("reopens");
        assert_eq!((t.from, t.to), (State::HalfOpen, State::Open));
        assert_eq!(t.reason, "reopened after 1 of 1 probes failed (status:503)");
        assert_eq!(h.cool_off(), secs(expected));
    }
    assert_eq!(h.state.reopens(), 6);
    h.wait_out_cool_off();
    let probe = h.permit();
    h.record(probe, Outcome::success()).expect("recovers");
    assert_eq!(h.state.reopens(), 0);
    h.trip();
    assert_eq!(h.cool_off(), secs(30), "growth reset on recovery");
}

#[test]
fn a_failed_probes_cool_off_counts_from_when_it_was_sent() {
    let mut h = Harness::new(
        BreakerConfig::builder()
            .cooldown(exact_cooldown())
            .probe_timeout(secs(600))
            .build()
            .unwrap(),
    );
    h.trip();
    h.wait_out_cool_off();
    let sent = h.now;
    let probe = h.permit();
    // A slow probe: it fails 25 s after it was sent.
    h.advance(secs(25));
    h.record(probe, unavailable()).expect("reopens");
    assert_eq!(
        h.state.open_until(),
        Some(sent.saturating_add(secs(60))),
        "probes are spaced by the cool-off, not by it plus the probe's latency"
    );
    assert_eq!(h.cool_off(), secs(35));
    // A probe slower than the whole cool-off: the next may go at once.
    h.wait_out_cool_off();
    let sent = h.now;
    let probe = h.permit();
    h.advance(secs(150));
    h.record(probe, unavailable()).expect("reopens");
    assert_eq!(h.state.open_until(), Some(h.now), "never before now");
    assert!(sent.saturating_add(secs(120)) < h.now);
    assert!(h.admit().is_allowed(), "the next probe");
}

#[test]
fn three_probes_with_ratio_two_thirds_close_on_two_successes() {
    let mut h = Harness::exact(3, 2.0 / 3.0);
    h.trip();
    h.wait_out_cool_off();
    let probes: Vec<_> = (0..3).map(|_| h.permit()).collect();
    assert!(!h.admit().is_allowed(), "a fourth caller is turned away");
    assert_eq!(h.state.probes_in_flight(), 3);

    assert!(h.record(probes[0], Outcome::success()).is_none());
    assert!(
        h.record(probes[1], unavailable()).is_none(),
        "one failure is tolerated"
    );
    assert_eq!(h.state.status(), BreakerStatus::HalfOpen);
    let t = h
        .record(probes[2], Outcome::success())
        .expect("all reported");
    assert_eq!(t.reason, "closed after 2 of 3 probes succeeded");
    assert_eq!(h.state.status(), BreakerStatus::Closed);
}

#[test]
fn three_probes_with_ratio_two_thirds_reopen_as_soon_as_two_fail() {
    let mut h = Harness::exact(3, 2.0 / 3.0);
    h.trip();
    h.wait_out_cool_off();
    let probes: Vec<_> = (0..3).map(|_| h.permit()).collect();
    assert!(h.record(probes[0], unavailable()).is_none());
    let t = h
        .record(probes[1], unavailable())
        .expect("2 of 3 can no longer succeed");
    assert_eq!(t.reason, "reopened after 2 of 3 probes failed (status:503)");
    assert_eq!(h.cool_off(), secs(60));
    // The third probe reports into a newer generation: ignored.
    let generation = h.state.generation();
    assert!(h.record(probes[2], Outcome::success()).is_none());
    assert_eq!(h.state.status(), BreakerStatus::Open);
    assert_eq!(h.state.generation(), generation);
}

#[test]
fn with_ratio_one_every_probe_must_succeed() {
    let mut h = Harness::exact(2, 1.0);
    h.trip();
    h.wait_out_cool_off();
    let a = h.permit();
    let b = h.permit();
    assert!(h.record(a, Outcome::success()).is_none());
    assert_eq!(h.record(b, unavailable()).unwrap().to, "open");
}

#[test]
fn a_dropped_probe_hands_its_slot_back() {
    let mut h = Harness::exact(1, 1.0);
    h.trip();
    h.wait_out_cool_off();
    let probe = h.permit();
    assert!(!h.admit().is_allowed());
    h.state.release(probe);
    assert_eq!(h.state.probes_in_flight(), 0);
    let again = h.permit();
    assert_ne!(again.probe, probe.probe, "a fresh lease");
    assert_eq!(h.record(again, Outcome::success()).unwrap().to, "closed");
}

#[test]
fn a_neutral_probe_outcome_hands_its_slot_back_and_decides_nothing() {
    let mut h = Harness::exact(1, 1.0);
    h.trip();
    h.wait_out_cool_off();
    for outcome in [
        Outcome::new(Verdict::Throttled, "status:429"),
        Outcome::new(Verdict::Quota, "anthropic:enforced_spend_limit_reached"),
        Outcome::new(Verdict::Request, "status:400"),
    ] {
        let probe = h.permit();
        assert!(h.record(probe, outcome).is_none());
        assert_eq!(h.state.status(), BreakerStatus::HalfOpen);
    }
    let probe = h.permit();
    assert_eq!(h.record(probe, Outcome::success()).unwrap().to, "closed");
}

#[test]
fn a_hung_probe_loses_its_lease_after_probe_timeout() {
    let mut h = Harness::exact(1, 1.0);
    h.trip();
    h.wait_out_cool_off();
    let hung = h.permit();
    h.advance(Duration::from_millis(9_500));
    assert_eq!(
        h.admit(),
        Admission::Rejected {
            retry_after: Duration::from_millis(500)
        },
        "the lease expires in 500 ms"
    );
    h.advance(Duration::from_millis(500));
    let fresh = h.permit();
    // The hung call finally answers: it no longer speaks for the round.
    assert!(h.record(hung, unavailable()).is_none());
    assert_eq!(h.state.status(), BreakerStatus::HalfOpen);
    assert_eq!(h.record(fresh, Outcome::success()).unwrap().to, "closed");
}

#[test]
fn a_probe_reporting_after_its_lease_expired_is_ignored() {
    let mut h = Harness::exact(1, 1.0);
    h.trip();
    h.wait_out_cool_off();
    let slow = h.permit();
    h.advance(secs(10));
    assert!(h.record(slow, Outcome::success()).is_none());
    assert_eq!(h.state.status(), BreakerStatus::HalfOpen);
    assert!(h.admit().is_allowed(), "the slot was reclaimed");
}

#[test]
fn outcomes_from_an_earlier_generation_are_ignored() {
    let mut h = Harness::exact(1, 1.0);
    let old = h.permit();
    h.trip();
    h.wait_out_cool_off();
    let probe = h.permit();
    h.record(probe, Outcome::success()).unwrap();
    // Admitted while closed, two generations ago: its failure must not count.
    assert!(h.record(old, unavailable()).is_none());
    assert_eq!(h.state.consecutive_failures(), 0);
    assert!(h.state.failure_breakdown().is_empty());
}

#[test]
fn every_change_of_status_starts_a_new_generation() {
    let mut h = Harness::exact(1, 1.0);
    let mut seen = vec![h.state.generation()];
    h.trip();
    seen.push(h.state.generation());
    h.wait_out_cool_off();
    let p = h.permit();
    seen.push(h.state.generation());
    h.record(p, Outcome::success());
    seen.push(h.state.generation());
    assert_eq!(seen, [0, 1, 2, 3]);
}

#[test]
fn a_credential_probe_failure_reopens_with_the_credential_cool_off() {
    let mut h = Harness::new(
        BreakerConfig::builder()
            .cooldown(exact_cooldown())
            .credential_cooldown(Cooldown::fixed(secs(600)))
            .build()
            .unwrap(),
    );
    h.trip();
    h.wait_out_cool_off();
    let probe = h.permit();
    let t = h.record(probe, Outcome::new(Verdict::Credential, "status:401"));
    assert_eq!(t.unwrap().cause.as_deref(), Some("status:401"));
    assert_eq!(h.cool_off(), secs(600));
}

#[test]
fn manual_open_behaves_as_a_trip_and_close_resets_everything() {
    let mut h = Harness::exact(1, 1.0);
    let t = h
        .state
        .open(&h.cfg, h.now, &mut h.rng, "maintenance")
        .unwrap();
    assert_eq!((t.from, t.to), (State::Closed, State::Open));
    assert_eq!(t.reason, "opened manually: maintenance");
    assert_eq!(t.cause, None);
    assert_eq!(h.cool_off(), secs(30));

    // Already open: extended to a fresh cool-off, no transition.
    h.advance(secs(20));
    assert!(h.state.open(&h.cfg, h.now, &mut h.rng, "").is_none());
    assert_eq!(h.cool_off(), secs(30));

    // Half-open: a manual open counts as a failed recovery.
    h.wait_out_cool_off();
    h.permit();
    h.state.open(&h.cfg, h.now, &mut h.rng, "").unwrap();
    assert_eq!(h.cool_off(), secs(60));

    let t = h.state.close(h.now).unwrap();
    assert_eq!((t.from, t.to), (State::Open, State::Closed));
    assert_eq!(h.state.reopens(), 0);
    assert!(h.state.close(h.now).is_none(), "already closed");
    h.trip();
    assert_eq!(h.cool_off(), secs(30));
}

#[test]
fn isolate_holds_the_breaker_open_until_closed() {
    let mut h = Harness::exact(1, 1.0);
    let t = h.state.isolate(h.now).unwrap();
    assert_eq!((t.from, t.to, t.until), (State::Closed, State::Open, None));
    assert_eq!(t.reason, "isolated manually");
    assert!(h.state.is_isolated());
    assert_eq!(h.state.open_until(), None);
    h.advance(secs(86_400));
    assert_eq!(
        h.admit(),
        Admission::Rejected {
            retry_after: ISOLATED_RETRY_AFTER
        }
    );
    assert!(h.state.isolate(h.now).is_none());
    assert!(h.state.open(&h.cfg, h.now, &mut h.rng, "").is_none());
    assert!(h.state.is_isolated(), "open() does not lift isolation");
    assert_eq!(h.state.close(h.now).unwrap().to, "closed");
    assert!(h.admit().is_allowed());
}

#[test]
fn isolating_an_open_breaker_drops_its_deadline_without_a_transition() {
    let mut h = Harness::exact(1, 1.0);
    h.trip();
    assert!(h.state.isolate(h.now).is_none());
    assert_eq!(h.state.open_until(), None);
    h.advance(secs(3600));
    assert!(!h.admit().is_allowed());
}

#[test]
fn concurrent_admission_never_exceeds_half_open_probes() {
    let h = Harness::exact(3, 1.0);
    let cfg = h.cfg.clone();
    let mut state = h.state;
    let mut rng = fastrand::Rng::with_seed(9);
    let now = Timestamp::from_nanos(1);
    state.open(&cfg, now, &mut rng, "drill");
    let after = Timestamp::from_nanos(1 + 60_000_000_000);
    let shared = Arc::new(Mutex::new(state));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let shared = shared.clone();
            let cfg = cfg.clone();
            std::thread::spawn(move || {
                (0..200)
                    .filter(|_| shared.lock().unwrap().admit(&cfg, after).0.is_allowed())
                    .count()
            })
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(admitted, 3);
}
