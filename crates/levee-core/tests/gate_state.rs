//! The throttle gate: deadlines that never shorten, defaults with jitter,
//! long waits that park, and the time-gated capacity signal.

use std::time::Duration;

use levee_core::classify::Reason;
use levee_core::clock::Timestamp;
use levee_core::gate::{GATE_HISTORY_SPANS, GateConfig, GateDecision, GateState};
use levee_core::transition::Mechanism;
use levee_core::transition::State;
use proptest::prelude::*;

const CAUSE: Reason = Reason::new_static("openai:rate_limit_exceeded");

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn at(s: u64) -> Timestamp {
    Timestamp::from_nanos(s * 1_000_000_000)
}

fn rng() -> fastrand::Rng {
    fastrand::Rng::with_seed(11)
}

fn gated(d: GateDecision) -> (Timestamp, Option<levee_core::transition::Transition>) {
    match d {
        GateDecision::Gated { until, transition } => (until, transition),
        GateDecision::Park { wait } => panic!("parked for {wait:?}"),
    }
}

#[test]
fn a_hinted_throttle_gates_until_the_hint_then_clears_without_a_probe() {
    let cfg = GateConfig::default();
    let mut gate = GateState::new();
    let (until, t) = gated(gate.throttle(&cfg, at(100), Some(secs(7)), &CAUSE, &mut rng()));
    assert_eq!(until, at(107));
    let t = t.expect("clear -> gated");
    assert_eq!(t.mechanism(), Mechanism::Gate);
    assert_eq!((t.from, t.to), (State::Clear, State::Gated));
    assert_eq!(t.reason, "throttled for 7s (openai:rate_limit_exceeded)");
    assert_eq!(t.cause.as_deref(), Some("openai:rate_limit_exceeded"));
    assert_eq!(t.until, Some(at(107)));
    assert_eq!(t.consecutive_failures, 0);
    assert_eq!(gate.until(), Some(at(107)));
    assert!(!gate.is_idle(at(100)));

    assert_eq!(gate.check(at(103)), (Some(secs(4)), None));
    let (remaining, t) = gate.check(at(107));
    assert_eq!(remaining, None);
    let t = t.expect("gated -> clear");
    assert_eq!(
        (t.from, t.to, t.reason.as_str()),
        (State::Gated, State::Clear, "throttle deadline passed")
    );
    assert_eq!(gate.until(), None);
    assert!(gate.is_idle(at(107)));
    assert_eq!(gate.check(at(108)), (None, None));
    assert_eq!(gate.closings().throttled, 1, "one closing counted");
    gated(gate.throttle(&cfg, at(110), Some(secs(1)), &CAUSE, &mut rng()));
    assert_eq!(gate.closings().throttled, 2);
}

#[test]
fn a_re_throttle_never_shortens_the_wait_and_a_longer_one_extends_it() {
    let cfg = GateConfig::default();
    let mut gate = GateState::new();
    gate.throttle(&cfg, at(0), Some(secs(30)), &CAUSE, &mut rng());
    let (until, t) = gated(gate.throttle(&cfg, at(10), Some(secs(1)), &CAUSE, &mut rng()));
    assert_eq!(until, at(30));
    assert!(t.is_none(), "still gated: no transition");
    let (until, t) = gated(gate.throttle(&cfg, at(20), None, &CAUSE, &mut rng()));
    assert_eq!(until, at(30), "a default wait does not shorten either");
    assert!(t.is_none());
    let (until, _) = gated(gate.throttle(&cfg, at(25), Some(secs(20)), &CAUSE, &mut rng()));
    assert_eq!(until, at(45));
    assert_eq!(gate.check(at(44)).0, Some(secs(1)));
}

#[test]
fn no_hint_gates_for_the_default_wait_with_jitter() {
    let cfg = GateConfig::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut rng = rng();
    for _ in 0..200 {
        let mut gate = GateState::new();
        let (until, t) = gated(gate.throttle(&cfg, at(0), None, &CAUSE, &mut rng));
        let wait = until.saturating_duration_since(at(0));
        assert!(
            (secs(4)..=secs(6)).contains(&wait),
            "{wait:?} outside 5 s ± 20%"
        );
        assert!(
            t.unwrap()
                .reason
                .starts_with("throttled with no wait hint, gated for")
        );
        seen.insert(wait);
    }
    assert!(
        seen.len() > 100,
        "gated clients must not return in lockstep"
    );

    let exact = GateConfig::builder().jitter(0.0).build().unwrap();
    let mut gate = GateState::new();
    assert_eq!(
        gated(gate.throttle(&exact, at(0), None, &CAUSE, &mut rng)).0,
        at(5)
    );
}

#[test]
fn a_wait_beyond_max_wait_parks_instead_and_leaves_the_gate_alone() {
    let cfg = GateConfig::default();
    let mut gate = GateState::new();
    let day = secs(86_400);
    assert_eq!(
        gate.throttle(&cfg, at(0), Some(day), &CAUSE, &mut rng()),
        GateDecision::Park { wait: day }
    );
    assert_eq!(gate.until(), None);
    // Exactly max_wait is still a throttle.
    let (until, _) = gated(gate.throttle(&cfg, at(0), Some(secs(600)), &CAUSE, &mut rng()));
    assert_eq!(until, at(600));

    let never_park = GateConfig::builder().max_wait(None).build().unwrap();
    let mut gate = GateState::new();
    assert_eq!(
        gated(gate.throttle(&never_park, at(0), Some(day), &CAUSE, &mut rng())).0,
        at(86_400)
    );
}

#[test]
fn a_zero_hint_leaves_the_gate_clear() {
    let cfg = GateConfig::default();
    let mut gate = GateState::new();
    let (until, t) = gated(gate.throttle(&cfg, at(3), Some(Duration::ZERO), &CAUSE, &mut rng()));
    assert_eq!((until, t), (at(3), None));
    assert_eq!(gate.check(at(3)), (None, None));
    assert_eq!(gate.gated_time(at(10)), Duration::ZERO);
}

#[test]
fn a_throttle_after_an_unobserved_expiry_starts_a_new_gated_span() {
    let cfg = GateConfig::default();
    let mut gate = GateState::new();
    gate.throttle(&cfg, at(0), Some(secs(5)), &CAUSE, &mut rng());
    // Nobody called check() at 5 s; a new 429 arrives at 8 s.
    let (until, t) = gated(gate.throttle(&cfg, at(8), Some(secs(2)), &CAUSE, &mut rng()));
    assert_eq!(until, at(10));
    assert_eq!(t.expect("the gate was clear at 8 s").from, "clear");
    assert_eq!(
        gate.gated_time(at(20)),
        secs(7),
        "5 s + 2 s, not the 3 s between"
    );
}

#[test]
fn gated_time_and_gated_in_last_measure_the_capacity_signal() {
    let cfg = GateConfig::default();
    let mut gate = GateState::new();
    gate.throttle(&cfg, at(0), Some(secs(10)), &CAUSE, &mut rng());
    assert_eq!(
        gate.gated_time(at(4)),
        secs(4),
        "the open span counts up to now"
    );
    gate.check(at(10));
    gate.throttle(&cfg, at(100), Some(secs(20)), &CAUSE, &mut rng());
    gate.check(at(120));
    assert_eq!(gate.gated_time(at(200)), secs(30));
    assert_eq!(gate.gated_in_last(at(200), secs(100)), secs(20));
    assert_eq!(
        gate.gated_in_last(at(200), secs(95)),
        secs(15),
        "partial overlap"
    );
    assert_eq!(gate.gated_in_last(at(200), secs(3600)), secs(30));
    assert_eq!(gate.gated_in_last(at(200), secs(10)), Duration::ZERO);
    assert_eq!(gate.last_gated(), Some(at(120)));
}

#[test]
fn gated_history_stays_bounded_and_exact_in_total() {
    let cfg = GateConfig::default();
    let mut gate = GateState::new();
    // 1000 gated seconds, one every 10 s.
    for i in 0..1000 {
        gate.throttle(&cfg, at(i * 10), Some(secs(1)), &CAUSE, &mut rng());
        gate.check(at(i * 10 + 1));
    }
    let now = at(10_000);
    assert_eq!(gate.gated_time(now), secs(1000));
    assert_eq!(gate.gated_in_last(now, secs(20_000)), secs(1000));
    // The latest GATE_HISTORY_SPANS spans are exact.
    let recent = GATE_HISTORY_SPANS as u64 - 1;
    assert_eq!(gate.gated_in_last(now, secs(recent * 10)), secs(recent));
    // Older ones are merged and prorated: close, not exact.
    let hour = gate.gated_in_last(now, secs(3600)).as_secs_f64();
    assert!((340.0..=380.0).contains(&hour), "{hour}");
}

#[test]
fn gate_config_errors_name_the_field() {
    let field = |b: levee_core::gate::GateConfigBuilder| b.build().unwrap_err().field;
    assert_eq!(
        field(GateConfig::builder().default_wait(Duration::ZERO)),
        "gate.default_wait"
    );
    assert_eq!(field(GateConfig::builder().jitter(1.0)), "gate.jitter");
    assert_eq!(field(GateConfig::builder().jitter(f64::NAN)), "gate.jitter");
    assert_eq!(
        field(GateConfig::builder().max_wait(secs(1))),
        "gate.max_wait"
    );
    let cfg = GateConfig::default();
    assert_eq!(
        (cfg.default_wait, cfg.jitter, cfg.max_wait),
        (secs(5), 0.2, Some(secs(600)))
    );
    cfg.validate().unwrap();
}

proptest! {
    /// Whatever the sequence of throttles (hinted, unhinted, zero, huge) and
    /// checks, the deadline never moves earlier.
    #[test]
    fn the_gate_deadline_never_decreases(
        ops in prop::collection::vec(
            (0u64..20_000, prop::option::of(0u64..1_200_000), any::<bool>()),
            1..200,
        ),
        seed in any::<u64>(),
    ) {
        let cfg = GateConfig::default();
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut gate = GateState::new();
        let mut now = at(1);
        let mut deadline = Timestamp::ZERO;
        let mut elapsed = Duration::ZERO;
        let mut last_gated_time = Duration::ZERO;
        for (advance_ms, wait_ms, check) in ops {
            now = now.saturating_add(Duration::from_millis(advance_ms));
            elapsed += Duration::from_millis(advance_ms);
            if check {
                let (remaining, _) = gate.check(now);
                prop_assert_eq!(remaining.is_some(), now < deadline);
            } else {
                let wait = wait_ms.map(Duration::from_millis);
                if let GateDecision::Gated { until, .. } = gate.throttle(&cfg, now, wait, &CAUSE, &mut rng) {
                    prop_assert!(until >= deadline, "{:?} < {:?}", until, deadline);
                    prop_assert!(until >= now.saturating_add(wait.unwrap_or(Duration::ZERO)));
                    deadline = until;
                }
            }
            if let Some(until) = gate.until() {
                prop_assert_eq!(until, deadline);
            }
            let gated_time = gate.gated_time(now);
            prop_assert!(gated_time >= last_gated_time && gated_time <= elapsed);
            prop_assert_eq!(gate.gated_in_last(now, elapsed + Duration::from_secs(1)), gated_time);
            last_gated_time = gated_time;
        }
    }
}

#[test]
fn a_max_wait_equal_to_the_default_wait_is_valid() {
    let cfg = GateConfig::builder()
        .default_wait(secs(5))
        .max_wait(secs(5))
        .build();
    assert!(cfg.is_ok(), "{cfg:?}");
    let err = GateConfig::builder()
        .default_wait(secs(5))
        .max_wait(Duration::from_millis(4999))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("gate.max_wait"), "{err}");
}

#[test]
fn a_default_wait_without_jitter_draws_nothing_from_the_rng() {
    // The rng is shared with the breaker's cool-offs: a draw that cannot
    // change the wait must not shift their sequence.
    let cfg = GateConfig::builder().jitter(0.0).build().unwrap();
    let mut shared = rng();
    let (until, _) = gated(GateState::new().throttle(&cfg, at(0), None, &CAUSE, &mut shared));
    assert_eq!(until, at(0).saturating_add(cfg.default_wait));
    assert_eq!(shared.u64(..), rng().u64(..), "no draw was taken");
}

fn rate_limits(pairs: &[(&str, &str)]) -> levee_core::classify::hints::RateLimits {
    let mut h = http::HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            http::HeaderValue::from_str(v).unwrap(),
        );
    }
    levee_core::classify::hints::RateLimits::read(&h, std::time::UNIX_EPOCH)
}

#[test]
fn a_scope_paced_at_its_reserve_is_gated_like_a_throttle_and_counted_apart() {
    let pace = levee_core::pace::PaceConfig::default();
    let mut gate = GateState::new();
    assert!(gate.allowance().is_none(), "nothing reported yet");
    // Plenty left: nothing happens, but the allowance is kept.
    let plenty = rate_limits(&[
        ("x-ratelimit-limit-requests", "100"),
        ("x-ratelimit-remaining-requests", "50"),
        ("x-ratelimit-reset-requests", "30s"),
    ]);
    assert_eq!(gate.pace(&pace, at(0), &plenty, Default::default()), None);
    assert!(gate.allowance().is_some());
    assert_eq!(gate.until(), None);
    // At the reserve (2 of 100): gated until one more has refilled.
    let low = rate_limits(&[
        ("x-ratelimit-limit-requests", "100"),
        ("x-ratelimit-remaining-requests", "2"),
        ("x-ratelimit-reset-requests", "98s"),
    ]);
    let (until, t) = gate
        .pace(&pace, at(10), &low, Default::default())
        .expect("paced");
    assert_eq!(until, at(11));
    let t = t.expect("clear -> gated");
    assert_eq!((t.from, t.to), (State::Clear, State::Gated));
    assert!(
        t.reason.starts_with("paced for 1s (requests"),
        "{}",
        t.reason
    );
    assert_eq!(t.cause.as_deref(), Some("paced"));
    // A provider's 429 meanwhile extends it, and is counted as a throttle.
    gate.throttle(
        &GateConfig::default(),
        at(10),
        Some(secs(5)),
        &CAUSE,
        &mut rng(),
    );
    assert_eq!(gate.until(), Some(at(15)));
    let closings = gate.closings();
    assert_eq!(
        (closings.paced, closings.throttled),
        (1, 0),
        "one closing, paced"
    );
    // A response without rate-limit headers says nothing.
    assert_eq!(
        gate.pace(&pace, at(12), &rate_limits(&[]), Default::default()),
        None
    );
}

#[test]
fn a_throttle_another_replica_reports_gates_here_counts_as_a_throttle_and_never_shortens() {
    let mut gate = GateState::new();
    let (until, t) = gate.adopt(at(5), at(35), "status:429");
    let t = t.expect("clear -> gated");
    assert_eq!(
        (until, t.to, t.cause.as_deref()),
        (at(35), State::Gated, Some("fleet"))
    );
    assert!(
        t.reason.contains("seen by the fleet: status:429"),
        "{}",
        t.reason
    );
    assert_eq!(gate.closings().throttled, 1);
    let (until, t) = gate.adopt(at(6), at(20), "status:429");
    assert_eq!((until, t), (at(35), None), "never shortened");
    assert_eq!(gate.closings().throttled, 1, "one closing");
}
