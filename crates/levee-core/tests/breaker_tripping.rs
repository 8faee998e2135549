//! A closed breaker: what counts, what trips it, what it remembers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use levee_core::breaker::{
    Admission, BreakerConfig, BreakerState, BreakerStatus, Outcome, Tripping, TrippingPolicy,
};
use levee_core::classify::Verdict;
use levee_core::clock::Timestamp;
use levee_core::transition::State;
use levee_core::transition::{Mechanism, Transition};

mod support;

use support::breaker::{Harness, unavailable};

impl Harness {
    fn new(cfg: BreakerConfig) -> Self {
        Harness::start(cfg, "org-a", 42, Timestamp::from_nanos(1_000_000_000))
    }

    fn calls(&mut self, n: usize, outcome: Outcome) -> Option<Transition> {
        (0..n).map(|_| self.call(outcome.clone())).last().flatten()
    }
}

fn rejected_key() -> Outcome {
    Outcome::new(Verdict::Credential, "status:401")
}

fn neutral() -> [Outcome; 3] {
    [
        Outcome::new(Verdict::Throttled, "status:429"),
        Outcome::new(Verdict::Quota, "openai:insufficient_quota"),
        Outcome::new(Verdict::Request, "status:400"),
    ]
}

#[test]
fn five_consecutive_availability_failures_open_by_default() {
    let mut h = Harness::new(BreakerConfig::default());
    assert!(h.calls(4, unavailable()).is_none());
    assert_eq!(h.state.status(), BreakerStatus::Closed);

    let t = h.call(unavailable()).expect("fifth failure opens");
    assert_eq!(t.mechanism(), Mechanism::Breaker);
    assert_eq!((t.from, t.to), (State::Closed, State::Open));
    assert_eq!(
        t.reason,
        "opened after 5 consecutive availability failures (status:503)"
    );
    assert_eq!(t.cause.as_deref(), Some("status:503"));
    assert_eq!(t.consecutive_failures, 5);
    assert_eq!(t.at, h.now);
    let until = t.until.unwrap();
    let cool_off = until.saturating_duration_since(h.now);
    assert!(
        (Duration::from_secs(3)..=Duration::from_secs(30)).contains(&cool_off),
        "{cool_off:?}"
    );

    assert_eq!(h.state.status(), BreakerStatus::Open);
    assert_eq!(h.state.open_until(), Some(until));
    assert_eq!(
        h.state.admit(&h.cfg, h.now).0,
        Admission::Rejected {
            retry_after: cool_off
        }
    );
}

#[test]
fn a_success_in_between_resets_the_streak() {
    let mut h = Harness::new(BreakerConfig::default());
    h.calls(4, unavailable());
    assert_eq!(h.state.consecutive_failures(), 4);
    assert!(h.call(Outcome::success()).is_none());
    assert_eq!(h.state.consecutive_failures(), 0);
    assert!(h.calls(4, unavailable()).is_none());
    assert_eq!(h.state.status(), BreakerStatus::Closed);
    assert!(h.call(unavailable()).is_some());
}

#[test]
fn two_credential_failures_open_with_the_longer_cool_off() {
    let mut h = Harness::new(BreakerConfig::default());
    assert!(h.call(rejected_key()).is_none());
    let t = h
        .call(rejected_key())
        .expect("second credential failure opens");
    assert_eq!(
        t.reason,
        "opened after 2 consecutive credential failures (status:401)"
    );
    let cool_off = t.until.unwrap().saturating_duration_since(h.now);
    // Credential default: 5 min with equal jitter, so never under 2.5 min,
    // always longer than the availability cool-off's 30 s at most.
    assert!(
        (Duration::from_secs(150)..=Duration::from_secs(300)).contains(&cool_off),
        "{cool_off:?}"
    );
}

#[test]
fn credential_streak_survives_availability_failures_but_not_a_success() {
    let mut h = Harness::new(BreakerConfig::default());
    h.call(rejected_key());
    h.call(unavailable());
    let t = h
        .call(rejected_key())
        .expect("credential threshold reached");
    assert!(
        t.reason.contains("2 consecutive credential failures"),
        "{}",
        t.reason
    );
    assert!(t.until.unwrap().saturating_duration_since(h.now) >= Duration::from_secs(150));

    let mut h = Harness::new(BreakerConfig::default());
    h.call(rejected_key());
    h.call(Outcome::success());
    assert!(h.call(rejected_key()).is_none());
    assert_eq!(h.state.status(), BreakerStatus::Closed);
}

#[test]
fn credential_failures_also_count_toward_the_tripping_rule() {
    let cfg = BreakerConfig::builder()
        .threshold(3)
        .credential_threshold(5)
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    h.call(rejected_key());
    h.call(unavailable());
    let t = h.call(unavailable()).expect("three failures of any kind");
    assert_eq!(t.reason, "opened after 3 consecutive failures (status:503)");
}

#[test]
fn throttled_quota_and_request_outcomes_neither_count_nor_reset() {
    let mut h = Harness::new(BreakerConfig::default());
    h.calls(4, unavailable());
    let before = h.state.failure_breakdown().clone();
    for outcome in neutral() {
        assert!(h.calls(50, outcome).is_none());
    }
    assert_eq!(h.state.consecutive_failures(), 4);
    assert_eq!(h.state.failure_breakdown(), &before);
    assert_eq!(h.state.status(), BreakerStatus::Closed);
    assert!(h.call(unavailable()).is_some(), "the streak was not reset");
}

#[test]
fn a_slow_success_counts_as_an_availability_failure() {
    let mut h = Harness::new(BreakerConfig::default());
    let slow = Outcome::success().with_slow(true);
    h.calls(4, slow.clone());
    let t = h
        .call(Outcome::slow_success())
        .expect("five slow calls open");
    assert_eq!(
        t.reason,
        "opened after 5 consecutive availability failures (slow_call)"
    );
    assert_eq!(h.state.failure_breakdown().get("slow_call"), Some(&5));
}

#[test]
fn slowness_does_not_turn_a_neutral_outcome_into_a_failure() {
    let mut h = Harness::new(BreakerConfig::default());
    for outcome in neutral() {
        h.calls(10, outcome.with_slow(true));
    }
    assert_eq!(h.state.consecutive_failures(), 0);
}

#[test]
fn failure_breakdown_attributes_causes_and_clears_on_success() {
    let mut h = Harness::new(BreakerConfig::default());
    h.calls(2, unavailable());
    h.call(Outcome::new(Verdict::Availability, "transport:timeout"));
    let breakdown: Vec<_> = h
        .state
        .failure_breakdown()
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(breakdown, [("status:503", 2), ("transport:timeout", 1)]);
    h.call(Outcome::success());
    assert!(h.state.failure_breakdown().is_empty());
}

#[test]
fn failure_breakdown_explains_an_open_breaker_until_closed() {
    let mut h = Harness::new(BreakerConfig::default());
    h.calls(5, unavailable());
    assert_eq!(h.state.status(), BreakerStatus::Open);
    assert_eq!(h.state.failure_breakdown().get("status:503"), Some(&5));
    let t = h.state.close(h.now).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason.as_str()),
        (State::Open, State::Closed, "closed manually")
    );
    assert!(h.state.failure_breakdown().is_empty());
    assert_eq!(h.state.consecutive_failures(), 0);
}

#[test]
fn rolling_window_trips_on_the_ratio_once_min_calls_are_in() {
    let cfg = BreakerConfig::builder()
        .rolling(Duration::from_secs(60), 10, 0.5)
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    // Nine failures in a row: far over the ratio, but under min_calls.
    assert!(h.calls(9, unavailable()).is_none());
    h.call(Outcome::success());
    // 10 calls, 9 failed: the next failure makes 10 of 11.
    let t = h.call(unavailable()).expect("ratio and min_calls met");
    assert_eq!(
        t.reason,
        "opened after 10 of 11 calls failed within 1m (status:503)"
    );
}

#[test]
fn an_idle_success_recorded_alone_counts_in_the_rolling_window() {
    let window = Duration::from_secs(60);
    let cfg = BreakerConfig::builder()
        .rolling(window, 2, 0.5)
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    let permit = h.state.admit(&h.cfg, h.now).0.permit().unwrap();
    assert!(h.state.record_idle_success(window, permit, h.now));
    // One success and one failure: 2 calls, half failed. Without the
    // success, one call would be under min_calls.
    assert!(h.call(unavailable()).is_some());
    // Not idle any more (open): `record` must take the next one.
    assert!(!h.state.record_idle_success(window, permit, h.now));
}

#[test]
fn an_idle_success_is_taken_only_under_rolling_tripping() {
    for tripping in [
        Tripping::Consecutive { threshold: 5 },
        Tripping::Custom(Arc::new(Logged::default())),
    ] {
        let cfg = BreakerConfig::builder().tripping(tripping).build().unwrap();
        let mut state = BreakerState::new(&cfg);
        let now = Timestamp::from_nanos(1_000_000_000);
        let permit = state.admit(&cfg, now).0.permit().unwrap();
        let before = format!("{state:?}");
        assert!(!state.record_idle_success(Duration::from_secs(60), permit, now));
        assert_eq!(format!("{state:?}"), before);
    }
}

#[test]
fn rolling_window_is_not_reset_by_a_single_success() {
    let cfg = BreakerConfig::builder()
        .rolling(Duration::from_secs(60), 4, 0.5)
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    h.call(unavailable());
    h.call(Outcome::success());
    h.call(unavailable());
    assert!(h.call(unavailable()).is_some(), "3 of 4 failed");
}

#[test]
fn rolling_window_forgets_calls_older_than_the_window() {
    let cfg = BreakerConfig::builder()
        .rolling(Duration::from_secs(60), 4, 0.5)
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    h.calls(3, unavailable());
    h.advance(Duration::from_secs(61));
    h.calls(3, Outcome::success());
    assert!(h.call(unavailable()).is_none(), "1 of 4 in the window");
    assert_eq!(h.state.status(), BreakerStatus::Closed);
}

/// Opens on the 3rd failure seen for a key; logs every call.
#[derive(Debug, Default)]
struct Logged {
    log: Mutex<Vec<String>>,
    counts: Mutex<std::collections::HashMap<String, u32>>,
}

impl TrippingPolicy for Logged {
    fn on_success(&self, key: &str) {
        self.log.lock().unwrap().push(format!("success {key}"));
    }
    fn on_failure(&self, key: &str) -> bool {
        self.log.lock().unwrap().push(format!("failure {key}"));
        let mut counts = self.counts.lock().unwrap();
        let n = counts.entry(key.to_owned()).or_default();
        *n += 1;
        *n >= 3
    }
    fn reset(&self, key: &str) {
        self.log.lock().unwrap().push(format!("reset {key}"));
        self.counts.lock().unwrap().remove(key);
    }
}

#[test]
fn a_custom_policy_decides_per_key_and_is_reset_on_trip_and_manual_close() {
    let policy = Arc::new(Logged::default());
    let cfg = BreakerConfig::builder()
        .tripping(Tripping::Custom(policy.clone()))
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    h.call(unavailable());
    h.call(Outcome::success());
    h.call(unavailable());
    let t = h
        .call(unavailable())
        .expect("policy trips on its 3rd failure");
    assert_eq!(
        t.reason,
        "opened by the tripping policy after 2 consecutive failures (status:503)"
    );
    h.state.close(h.now);
    h.call(Outcome::success());
    let log = policy.log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "failure org-a",
            "success org-a",
            "failure org-a",
            "failure org-a",
            "reset org-a",
            // The manual close had no key: its reset arrives with the next outcome.
            "reset org-a",
            "success org-a",
        ]
    );
}

#[test]
fn quiescent_only_when_a_success_would_change_nothing() {
    let mut h = Harness::new(BreakerConfig::default());
    assert!(h.state.quiescent(&h.cfg));
    assert!(h.state.is_idle());
    h.call(unavailable());
    assert!(!h.state.quiescent(&h.cfg));
    assert!(!h.state.is_idle());
    h.call(Outcome::success());
    assert!(h.state.quiescent(&h.cfg));
    h.calls(5, unavailable());
    assert!(!h.state.quiescent(&h.cfg));
    h.state.close(h.now);
    assert!(h.state.quiescent(&h.cfg));
    // Opened by hand, with nothing counted: still not idle.
    let cfg = h.cfg.clone();
    h.state.open(&cfg, h.now, &mut h.rng, "maintenance");
    assert!(!h.state.is_idle(), "an open breaker is never idle");
    h.state.close(h.now);
    assert!(h.state.is_idle());

    let rolling = BreakerConfig::builder()
        .rolling(Duration::from_secs(60), 10, 0.5)
        .build()
        .unwrap();
    let state = BreakerState::new(&rolling);
    assert!(!state.quiescent(&rolling), "a success feeds the window");
    assert!(state.is_idle());
}

#[test]
fn a_closed_breaker_admits_without_changing_anything() {
    let mut h = Harness::new(BreakerConfig::default());
    let (admission, transition) = h.state.admit(&h.cfg, h.now);
    assert!(transition.is_none());
    let permit = admission.permit().unwrap();
    assert_eq!(permit.generation, h.state.generation());
    assert_eq!(permit.probe, None);
    assert_eq!(permit.admitted_at, h.now);
}

#[test]
fn a_streak_of_rejected_keys_gets_the_credential_cool_off_whichever_rule_trips() {
    let cfg = BreakerConfig::builder()
        .threshold(2)
        .credential_threshold(3)
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    h.call(rejected_key());
    let t = h.call(rejected_key()).expect("main rule trips at 2");
    assert_eq!(
        t.reason,
        "opened after 2 consecutive credential failures (status:401)"
    );
    assert!(t.until.unwrap().saturating_duration_since(h.now) >= Duration::from_secs(150));
}

#[test]
fn a_custom_policy_opened_by_hand_hears_its_reset_with_the_next_outcome() {
    let policy = Arc::new(Logged::default());
    let cfg = BreakerConfig::builder()
        .tripping(Tripping::Custom(policy.clone()))
        .build()
        .unwrap();
    let mut h = Harness::new(cfg);
    h.call(unavailable());
    // Opened by hand: no key at hand, so the policy is told with the probe.
    let cfg = h.cfg.clone();
    h.state.open(&cfg, h.now, &mut h.rng, "maintenance");
    h.advance(Duration::from_secs(3600));
    h.call(Outcome::success());
    // The hand-opened reset arrives with the probe's outcome; the probe's
    // success then closes the breaker, which resets the policy again.
    let log = policy.log.lock().unwrap().clone();
    assert_eq!(log, ["failure org-a", "reset org-a", "reset org-a"]);
}

#[test]
fn a_failure_below_either_threshold_keeps_the_key_from_idling() {
    for failure in [unavailable(), rejected_key()] {
        let mut h = Harness::new(BreakerConfig::default());
        h.call(failure);
        assert!(!h.state.is_idle(), "a failure is counted: not idle");
        assert!(!h.state.is_isolated());
        h.state.isolate(h.now);
        assert!(h.state.is_isolated());
        h.state.close(h.now);
        assert!(!h.state.is_isolated() && h.state.is_idle());
    }
}
