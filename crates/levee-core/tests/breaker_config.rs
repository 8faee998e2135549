//! Breaker configuration: defaults, and validation errors that name the field.

use std::sync::Arc;
use std::time::Duration;

use levee_core::breaker::{
    BreakerConfig, BreakerConfigBuilder, Cooldown, Jitter, Tripping, TrippingPolicy,
};
use levee_core::config_error::ConfigError;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn defaults_follow_the_design() {
    let cfg = BreakerConfig::default();
    assert!(matches!(
        cfg.tripping,
        Tripping::Consecutive { threshold: 5 }
    ));
    assert_eq!(cfg.credential_threshold, 2);
    assert!(matches!(
        cfg.cooldown,
        Cooldown::Exponential { base, multiplier, max, jitter: Jitter::Equal, hold: 6 }
            if base == secs(10) && multiplier == 2.0 && max == secs(900)
    ));
    assert!(matches!(
        cfg.credential_cooldown,
        Cooldown::Exponential { base, max, .. } if base == secs(300) && max == secs(3600)
    ));
    assert_eq!(cfg.half_open_probes, 1);
    assert_eq!(cfg.half_open_success_ratio, 1.0);
    assert_eq!(cfg.probe_timeout, secs(60));
    assert_eq!(cfg.slow_call, None);
    cfg.validate().expect("defaults are valid");
    BreakerConfig::builder()
        .build()
        .expect("builder defaults are valid");
}

fn field_of(builder: BreakerConfigBuilder) -> &'static str {
    builder.build().expect_err("invalid").field
}

#[test]
fn every_invalid_value_fails_with_the_name_of_its_field() {
    let b = BreakerConfig::builder;
    let nan = f64::NAN;
    let cases: Vec<(BreakerConfigBuilder, &str)> = vec![
        (b().threshold(0), "breaker.threshold"),
        (b().rolling(secs(60), 10, 1.5), "breaker.failure_ratio"),
        (b().rolling(secs(60), 10, -0.1), "breaker.failure_ratio"),
        (b().rolling(secs(60), 10, nan), "breaker.failure_ratio"),
        (b().rolling(Duration::ZERO, 10, 0.5), "breaker.window"),
        (b().credential_threshold(0), "breaker.credential_threshold"),
        (b().half_open_probes(0), "breaker.half_open_probes"),
        (
            b().half_open_success_ratio(0.0),
            "breaker.half_open_success_ratio",
        ),
        (
            b().half_open_success_ratio(1.01),
            "breaker.half_open_success_ratio",
        ),
        (
            b().half_open_success_ratio(nan),
            "breaker.half_open_success_ratio",
        ),
        (b().probe_timeout(Duration::ZERO), "breaker.probe_timeout"),
        (b().slow_call(Duration::ZERO), "breaker.slow_call"),
        (
            b().cooldown(Cooldown::exponential(secs(30), 0.5, secs(60))),
            "breaker.cooldown.multiplier",
        ),
        (
            b().cooldown(Cooldown::exponential(secs(30), nan, secs(60))),
            "breaker.cooldown.multiplier",
        ),
        (
            b().cooldown(Cooldown::exponential(secs(30), f64::INFINITY, secs(60))),
            "breaker.cooldown.multiplier",
        ),
        (
            b().cooldown(Cooldown::exponential(secs(120), 2.0, secs(60))),
            "breaker.cooldown.max",
        ),
        (
            b().cooldown(Cooldown::exponential(Duration::ZERO, 2.0, secs(60))),
            "breaker.cooldown.base",
        ),
        (
            b().credential_cooldown(Cooldown::exponential(secs(120), 2.0, secs(60))),
            "breaker.credential_cooldown.max",
        ),
    ];
    for (builder, field) in cases {
        assert_eq!(field_of(builder), field);
    }
}

#[test]
fn errors_read_as_sentences_with_the_value_given() {
    let err = BreakerConfig::builder()
        .rolling(secs(60), 20, 1.5)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid breaker.failure_ratio: must be a finite number in [0, 1], got 1.5"
    );
    let err = BreakerConfig::builder().threshold(0).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid breaker.threshold: must be at least 1, got 0"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(err.clone());
    assert_eq!(boxed.to_string(), err.to_string());
    assert_eq!(
        ConfigError::new("gate.jitter", "bad").to_string(),
        "invalid gate.jitter: bad"
    );
}

#[test]
fn seed_semantics_accept_edge_values() {
    // min_calls 0 and failure_ratio 0 / 1 are valid (seed 001: non-negative, [0, 1]).
    BreakerConfig::builder()
        .rolling(secs(1), 0, 0.0)
        .build()
        .unwrap();
    BreakerConfig::builder()
        .rolling(secs(1), 0, 1.0)
        .build()
        .unwrap();
    // A fixed cool-off and a custom schedule need no growth.
    BreakerConfig::builder()
        .cooldown(Cooldown::fixed(secs(30)))
        .build()
        .unwrap();
    BreakerConfig::builder()
        .cooldown(Cooldown::custom(|n| Duration::from_secs(u64::from(n))))
        .build()
        .unwrap();
}

#[derive(Debug)]
struct Never;

impl TrippingPolicy for Never {
    fn on_success(&self, _: &str) {}
    fn on_failure(&self, _: &str) -> bool {
        false
    }
    fn reset(&self, _: &str) {}
}

#[test]
fn a_custom_policy_and_cooldown_are_debuggable_and_cloneable() {
    let cfg = BreakerConfig::builder()
        .policy(Arc::new(Never))
        .cooldown(Cooldown::custom(|_| secs(1)))
        .build()
        .unwrap();
    let copy = cfg.clone();
    let debug = format!("{copy:?}");
    assert!(debug.contains("Custom(Never)"), "{debug}");
    assert!(debug.contains("Custom(..)"), "{debug}");
}

#[test]
fn required_successes_is_the_ceiling_of_ratio_times_probes() {
    let needed = |probes, ratio| {
        BreakerConfig::builder()
            .half_open_probes(probes)
            .half_open_success_ratio(ratio)
            .build()
            .unwrap()
            .required_successes()
    };
    assert_eq!(needed(1, 1.0), 1);
    assert_eq!(needed(3, 2.0 / 3.0), 2);
    assert_eq!(needed(3, 0.66), 2);
    assert_eq!(needed(3, 0.67), 3);
    assert_eq!(needed(4, 0.5), 2);
    assert_eq!(needed(10, 0.01), 1);
}
