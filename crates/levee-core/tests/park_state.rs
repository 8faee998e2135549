//! The park table: park until the reset, extend but never shorten, unpark by hand.

use std::time::Duration;

use levee_core::classify::Reason;
use levee_core::clock::Timestamp;
use levee_core::park::{ParkConfig, ParkState};
use levee_core::transition::Mechanism;
use levee_core::transition::State;
use proptest::prelude::*;

const SPEND_CAP: Reason = Reason::new_static("anthropic:enforced_spend_limit_reached");

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn at(s: u64) -> Timestamp {
    Timestamp::from_nanos(s * 1_000_000_000)
}

#[test]
fn a_quota_with_a_reset_parks_until_it_then_reinstates_without_a_probe() {
    let cfg = ParkConfig::default();
    let mut park = ParkState::new();
    let t = park
        .park(&cfg, at(10), Some(secs(86_400)), &SPEND_CAP)
        .expect("active -> parked");
    assert_eq!(t.mechanism(), Mechanism::Park);
    assert_eq!((t.from, t.to), (State::Active, State::Parked));
    assert_eq!(
        t.reason,
        "parked until the quota resets in 1d (anthropic:enforced_spend_limit_reached)"
    );
    assert_eq!(
        t.cause.as_deref(),
        Some("anthropic:enforced_spend_limit_reached")
    );
    assert_eq!(t.until, Some(at(86_410)));
    assert_eq!(park.until(), Some(at(86_410)));
    assert_eq!(park.reason(), Some(&SPEND_CAP));
    assert_eq!(park.parked_since(), Some(at(10)));
    assert!(!park.is_idle());

    assert_eq!(park.check(at(86_400)), (Some(secs(10)), None));
    let (remaining, t) = park.check(at(86_410));
    assert_eq!(remaining, None);
    let t = t.expect("parked -> active");
    assert_eq!(
        (t.from, t.to, t.reason.as_str()),
        (State::Parked, State::Active, "quota reset time passed")
    );
    assert!(park.is_idle());
    assert_eq!(park.reason(), None);
}

#[test]
fn no_reset_parks_for_the_default_and_a_zero_reset_counts_as_none() {
    let cfg = ParkConfig::default();
    for wait in [None, Some(Duration::ZERO)] {
        let mut park = ParkState::new();
        let t = park.park(&cfg, at(0), wait, &SPEND_CAP).unwrap();
        assert_eq!(t.until, Some(at(3600)));
        assert_eq!(
            t.reason,
            "parked for 1h with no reset time given (anthropic:enforced_spend_limit_reached)"
        );
    }
    let short = ParkConfig::builder()
        .default_park(secs(60))
        .build()
        .unwrap();
    let mut park = ParkState::new();
    assert_eq!(
        park.park(&short, at(0), None, &SPEND_CAP).unwrap().until,
        Some(at(60))
    );
}

#[test]
fn a_later_signal_extends_a_park_but_never_shortens_it() {
    let cfg = ParkConfig::default();
    let mut park = ParkState::new();
    park.park(&cfg, at(0), Some(secs(600)), &SPEND_CAP);
    assert!(
        park.park(&cfg, at(10), Some(secs(60)), &SPEND_CAP)
            .is_none()
    );
    assert_eq!(park.until(), Some(at(600)));
    let other = Reason::new_static("openai:insufficient_quota");
    assert!(park.park(&cfg, at(20), Some(secs(1000)), &other).is_none());
    assert_eq!(park.until(), Some(at(1020)));
    assert_eq!(park.reason(), Some(&other), "the extension's cause");
    assert_eq!(park.parked_since(), Some(at(0)));
}

#[test]
fn a_signal_after_an_unobserved_reset_parks_afresh() {
    let cfg = ParkConfig::default();
    let mut park = ParkState::new();
    park.park(&cfg, at(0), Some(secs(60)), &SPEND_CAP);
    let t = park.park(&cfg, at(100), Some(secs(60)), &SPEND_CAP);
    assert_eq!(t.expect("the old park had ended").until, Some(at(160)));
    assert_eq!(park.parked_since(), Some(at(100)));
}

#[test]
fn unpark_lifts_a_park_by_hand() {
    let cfg = ParkConfig::default();
    let mut park = ParkState::new();
    assert!(park.unpark(at(0)).is_none(), "nothing to lift");
    park.park(&cfg, at(0), None, &SPEND_CAP);
    let t = park.unpark(at(5)).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason.as_str()),
        (State::Parked, State::Active, "unparked manually")
    );
    assert!(park.is_idle());
    assert_eq!(park.check(at(6)), (None, None));
}

#[test]
fn park_config_errors_name_the_field() {
    let err = ParkConfig::builder()
        .default_park(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field, "park.default_park");
    assert_eq!(ParkConfig::default().default_park, secs(3600));
}

proptest! {
    /// While parked, the reset never moves earlier, whatever signals arrive.
    #[test]
    fn a_park_never_shortens(
        ops in prop::collection::vec((0u64..4_000, prop::option::of(0u64..100_000), any::<bool>()), 1..100),
    ) {
        let cfg = ParkConfig::default();
        let mut park = ParkState::new();
        let mut now = at(0);
        for (advance, wait, check) in ops {
            now = now.saturating_add(secs(advance));
            let before = park.until().filter(|u| now < *u);
            if check {
                park.check(now);
            } else {
                let t = park.park(&cfg, now, wait.map(secs), &SPEND_CAP);
                prop_assert_eq!(t.is_some(), before.is_none());
            }
            if let (Some(before), false) = (before, check) {
                prop_assert!(park.until() >= Some(before));
            }
        }
    }
}

#[test]
fn a_park_that_ends_exactly_now_is_over_so_a_new_quota_answer_parks_afresh() {
    let cfg = ParkConfig::default();
    let mut park = ParkState::new();
    park.park(&cfg, at(0), Some(secs(60)), &SPEND_CAP)
        .expect("active -> parked");
    // At its deadline the old park has ended (check() reinstates at this
    // instant too): a new cap is a new park, with its own transition and start.
    let t = park.park(&cfg, at(60), Some(secs(30)), &SPEND_CAP);
    assert_eq!(
        t.map(|t| (t.from, t.to)),
        Some((State::Active, State::Parked)),
        "a new park, not an extension"
    );
    assert_eq!(park.until(), Some(at(90)));
    assert_eq!(park.parked_since(), Some(at(60)));
}

#[test]
fn a_quota_answer_naming_the_same_reset_changes_nothing() {
    let cfg = ParkConfig::default();
    let mut park = ParkState::new();
    park.park(&cfg, at(0), Some(secs(60)), &SPEND_CAP)
        .expect("active -> parked");
    // A later answer naming the same reset: the park keeps its reason.
    let other = Reason::new_static("openai:insufficient_quota");
    assert!(park.park(&cfg, at(30), Some(secs(30)), &other).is_none());
    assert_eq!(park.until(), Some(at(60)));
    assert_eq!(park.reason(), Some(&SPEND_CAP));
    // One naming a later reset extends it, under the new reason.
    assert!(park.park(&cfg, at(30), Some(secs(31)), &other).is_none());
    assert_eq!((park.until(), park.reason()), (Some(at(61)), Some(&other)));
}

#[test]
fn a_park_another_replica_reports_parks_here_and_only_ever_extends() {
    let mut park = ParkState::new();
    assert!(
        park.adopt(at(10), at(10), &SPEND_CAP).is_none(),
        "already reset"
    );
    let t = park
        .adopt(at(10), at(3610), &SPEND_CAP)
        .expect("active -> parked");
    assert_eq!(
        (t.from, t.to, t.until),
        (State::Active, State::Parked, Some(at(3610)))
    );
    assert!(t.reason.contains("seen by the fleet"), "{}", t.reason);
    assert!(park.adopt(at(11), at(100), &SPEND_CAP).is_none());
    assert_eq!(park.until(), Some(at(3610)), "never shortened");
    assert!(park.adopt(at(11), at(7200), &SPEND_CAP).is_none());
    assert_eq!(park.until(), Some(at(7200)), "extended");
}
