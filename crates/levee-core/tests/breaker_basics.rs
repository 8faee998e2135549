//! The small contracts the layers build on: which outcomes count, which
//! permits are probes, how statuses print, how cool-offs are drawn, and
//! that opening an isolated breaker by hand gives it no deadline.

use std::time::Duration;

use levee_core::breaker::{BreakerConfig, BreakerState, BreakerStatus, Cooldown, Jitter, Outcome};
use levee_core::classify::Verdict;
use levee_core::clock::Timestamp;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn availability_and_credential_count_and_the_rest_are_neutral_or_healthy() {
    for v in Verdict::ALL {
        let o = Outcome::new(v, "x");
        let failure = matches!(v, Verdict::Availability | Verdict::Credential);
        let neutral = matches!(v, Verdict::Throttled | Verdict::Quota | Verdict::Request);
        assert_eq!((o.is_failure(), o.is_neutral()), (failure, neutral), "{v}");
    }
    // A success slower than the threshold is a failure, and not neutral.
    let slow = Outcome::new(Verdict::Success, "success").with_slow(true);
    assert!(slow.is_failure() && !slow.is_neutral());
}

#[test]
fn a_closed_breakers_permit_is_no_probe_and_a_half_open_ones_is() {
    let cfg = BreakerConfig::builder()
        .cooldown(Cooldown::fixed(secs(1)))
        .build()
        .unwrap();
    let mut state = BreakerState::new(&cfg);
    let closed = state.admit(&cfg, Timestamp::ZERO).0.permit().unwrap();
    assert!(!closed.is_probe());
    let mut rng = fastrand::Rng::with_seed(1);
    state.open(&cfg, Timestamp::ZERO, &mut rng, "");
    let later = Timestamp::ZERO.saturating_add(secs(2));
    let probe = state.admit(&cfg, later).0.permit().unwrap();
    assert!(probe.is_probe());
    assert_eq!(state.status(), BreakerStatus::HalfOpen);
}

#[test]
fn statuses_print_as_their_state_names() {
    let printed = [
        BreakerStatus::Closed,
        BreakerStatus::Open,
        BreakerStatus::HalfOpen,
    ]
    .map(|s| s.to_string());
    assert_eq!(printed, ["closed", "open", "half_open"]);
}

#[test]
fn full_jitter_spreads_draws_between_its_floor_and_the_nominal() {
    let mut rng = fastrand::Rng::with_seed(7);
    let d = secs(30);
    let draws: Vec<Duration> = (0..200).map(|_| Jitter::Full.apply(d, &mut rng)).collect();
    let (lo, hi) = Jitter::Full.bounds(d);
    assert!(draws.iter().all(|x| (lo..=hi).contains(x)), "{draws:?}");
    let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
    assert!(
        distinct.len() > 100,
        "jittered, not fixed: {}",
        distinct.len()
    );
    assert_eq!(Jitter::None.apply(d, &mut rng), d);
}

#[test]
fn a_multiplier_below_one_never_shrinks_the_cooloff() {
    let cooldown = Cooldown::exponential(secs(10), 0.5, secs(60));
    assert_eq!(cooldown.nominal(0), secs(10));
    assert_eq!(cooldown.nominal(3), secs(10));
}

#[test]
fn opening_an_isolated_breaker_by_hand_leaves_it_without_a_deadline() {
    let cfg = BreakerConfig::default();
    let mut state = BreakerState::new(&cfg);
    let mut rng = fastrand::Rng::with_seed(3);
    state.isolate(Timestamp::ZERO);
    assert!(
        state
            .open(&cfg, Timestamp::ZERO, &mut rng, "again")
            .is_none()
    );
    assert!(state.is_isolated());
    assert_eq!(
        state.open_until(),
        None,
        "isolated: open until closed by hand"
    );
}
