//! Time open: how long a breaker spent away from `closed`, kept on
//! transitions only.

use std::time::Duration;

use levee_core::breaker::{BreakerConfig, BreakerState, Cooldown, Outcome};
use levee_core::classify::Verdict;
use levee_core::clock::{Clock, ManualClock};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A breaker that trips on the first failure and cools off for exactly 30 s.
fn config() -> BreakerConfig {
    BreakerConfig::builder()
        .threshold(1)
        .cooldown(Cooldown::fixed(secs(30)))
        .build()
        .unwrap()
}

fn fail(
    state: &mut BreakerState,
    cfg: &BreakerConfig,
    clock: &ManualClock,
    rng: &mut fastrand::Rng,
) {
    let permit = state.admit(cfg, clock.now()).0.permit().unwrap();
    let outage = Outcome::new(Verdict::Availability, "status:503");
    state.record(cfg, "org-a", permit, &outage, clock.now(), rng);
}

fn succeed(
    state: &mut BreakerState,
    cfg: &BreakerConfig,
    clock: &ManualClock,
    rng: &mut fastrand::Rng,
) {
    let permit = state.admit(cfg, clock.now()).0.permit().unwrap();
    state.record(cfg, "org-a", permit, &Outcome::success(), clock.now(), rng);
}

#[test]
fn time_open_counts_open_and_half_open_spells_and_survives_recovery() {
    let cfg = config();
    let clock = ManualClock::new();
    let mut rng = fastrand::Rng::with_seed(1);
    let mut state = BreakerState::new(&cfg);

    // Closed and serving: nothing counted, however long.
    succeed(&mut state, &cfg, &clock, &mut rng);
    clock.advance(secs(100));
    assert_eq!(state.time_open(clock.now()), Duration::ZERO);
    assert_eq!(state.open_since(), None);

    // Trips at t=100; still open at t=110: 10 s so far, read without a transition.
    fail(&mut state, &cfg, &clock, &mut rng);
    assert_eq!(state.open_since(), Some(clock.now()));
    clock.advance(secs(10));
    assert_eq!(state.time_open(clock.now()), secs(10));

    // Cool-off over at t=130: half-open is still away from closed.
    clock.advance(secs(20));
    clock.advance(secs(5));
    // The probe is admitted at t=135 and succeeds at t=137.
    let permit = state.admit(&cfg, clock.now()).0.permit().unwrap();
    clock.advance(secs(2));
    state.record(
        &cfg,
        "org-a",
        permit,
        &Outcome::success(),
        clock.now(),
        &mut rng,
    );
    assert_eq!(state.status().as_str(), "closed");
    assert_eq!(state.open_since(), None);
    assert_eq!(state.time_open(clock.now()), secs(37));

    // Closed again: the total stays, and does not grow.
    clock.advance(secs(1000));
    assert_eq!(state.time_open(clock.now()), secs(37));

    // A second spell, opened by hand and closed by hand, adds to it.
    state.open(&cfg, clock.now(), &mut rng, "maintenance");
    clock.advance(secs(8));
    state.close(clock.now());
    assert_eq!(state.time_open(clock.now()), secs(45));

    // Isolation counts too, until closed.
    state.isolate(clock.now());
    clock.advance(secs(5));
    assert_eq!(state.time_open(clock.now()), secs(50));
    state.close(clock.now());
    clock.advance(secs(5));
    assert_eq!(state.time_open(clock.now()), secs(50));
}

#[test]
fn a_failed_probe_continues_the_same_spell() {
    let cfg = config();
    let clock = ManualClock::new();
    let mut rng = fastrand::Rng::with_seed(1);
    let mut state = BreakerState::new(&cfg);

    fail(&mut state, &cfg, &clock, &mut rng);
    let since = state.open_since();
    clock.advance(secs(30));
    fail(&mut state, &cfg, &clock, &mut rng); // the probe fails: reopened
    assert_eq!(state.status().as_str(), "open");
    assert_eq!(state.open_since(), since);
    clock.advance(secs(30));
    assert_eq!(state.time_open(clock.now()), secs(60));
}
