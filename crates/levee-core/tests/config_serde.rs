//! Serde configuration: round trips, humane durations, errors that name the
//! field and the value.

use std::time::Duration;

use levee_core::breaker::{BreakerConfig, Cooldown, Jitter, Tripping};
use levee_core::budget::BudgetConfig;
use levee_core::gate::GateConfig;
use levee_core::park::ParkConfig;

fn toml_round_trip<T>(value: &T) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let text = toml::to_string(value).expect("serialises");
    toml::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

fn json_round_trip<T>(value: &T) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
}

fn breaker_configs() -> Vec<BreakerConfig> {
    vec![
        BreakerConfig::default(),
        BreakerConfig::builder()
            .rolling(Duration::from_secs(60), 20, 0.5)
            .credential_threshold(1)
            .cooldown(Cooldown::exponential(
                Duration::from_millis(1500),
                1.7,
                Duration::from_secs(300),
            ))
            .credential_cooldown(Cooldown::fixed(Duration::from_secs(3600)))
            .half_open_probes(3)
            .half_open_success_ratio(2.0 / 3.0)
            .probe_timeout(Duration::from_millis(250))
            .slow_call(Duration::from_secs(20))
            .build()
            .unwrap(),
        BreakerConfig::builder()
            .threshold(3)
            .cooldown(Cooldown::Exponential {
                base: Duration::from_nanos(1_000_000_001),
                multiplier: 2.0,
                max: Duration::from_secs(90),
                jitter: Jitter::Equal,
                hold: 3,
            })
            .build()
            .unwrap(),
    ]
}

#[test]
fn breaker_config_round_trips() {
    for config in breaker_configs() {
        let expected = format!("{config:?}");
        assert_eq!(format!("{:?}", toml_round_trip(&config)), expected);
        assert_eq!(format!("{:?}", json_round_trip(&config)), expected);
        // What a file says is the same both ways.
        let written = toml::to_string(&config).unwrap();
        let back: BreakerConfig = toml::from_str(&written).unwrap();
        assert_eq!(toml::to_string(&back).unwrap(), written);
    }
}

#[test]
fn gate_park_budget_round_trip() {
    for gate in [
        GateConfig::default(),
        GateConfig::builder()
            .default_wait(Duration::from_millis(750))
            .jitter(0.0)
            .max_wait(None)
            .build()
            .unwrap(),
    ] {
        assert_eq!(toml_round_trip(&gate), gate);
        assert_eq!(json_round_trip(&gate), gate);
    }
    for park in [
        ParkConfig::default(),
        ParkConfig::builder()
            .default_park(Duration::from_secs(86_400 + 1))
            .build()
            .unwrap(),
    ] {
        assert_eq!(toml_round_trip(&park), park);
        assert_eq!(json_round_trip(&park), park);
    }
    for budget in [
        BudgetConfig::default(),
        BudgetConfig::new(Duration::from_millis(2500), 0, 0.25),
    ] {
        assert_eq!(toml_round_trip(&budget), budget);
        assert_eq!(json_round_trip(&budget), budget);
    }
}

#[test]
fn humane_file_reads_as_expected() {
    let config: BreakerConfig = toml::from_str(
        r#"
        window = "2m"
        failure_ratio = 0.5
        cooldown = "10s"
        credential_cooldown = { base = "10m", jitter = "none" }
        half_open_probes = 2
        slow_call = "250ms"
        "#,
    )
    .unwrap();
    assert!(matches!(
        config.tripping,
        Tripping::Rolling { window, min_calls: 10, failure_ratio }
            if window == Duration::from_secs(120) && failure_ratio == 0.5
    ));
    assert_eq!(config.cooldown.nominal(5), Duration::from_secs(10));
    assert_eq!(
        config.cooldown.bounds(0),
        (Duration::from_secs(10), Duration::from_secs(10))
    );
    // Missing table fields keep the credential defaults (× 2, up to 1 h).
    assert_eq!(
        config.credential_cooldown.nominal(1),
        Duration::from_secs(1200)
    );
    assert_eq!(
        config.credential_cooldown.nominal(9),
        Duration::from_secs(3600)
    );
    assert_eq!(config.half_open_probes, 2);
    assert_eq!(config.slow_call, Some(Duration::from_millis(250)));

    let gate: GateConfig = toml::from_str(r#"max_wait = "never""#).unwrap();
    assert_eq!(gate.max_wait, None);
    let gate: GateConfig = toml::from_str(r#"max_wait = "15m""#).unwrap();
    assert_eq!(gate.max_wait, Some(Duration::from_secs(900)));

    // An empty table is the default.
    let empty: BreakerConfig = toml::from_str("").unwrap();
    assert_eq!(
        format!("{empty:?}"),
        format!("{:?}", BreakerConfig::default())
    );
}

/// Loads `text` as `T` and returns the error message.
fn toml_error<T: serde::de::DeserializeOwned + std::fmt::Debug>(text: &str) -> String {
    toml::from_str::<T>(text).unwrap_err().to_string()
}

fn assert_names(err: &str, needles: &[&str]) {
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }
}

#[test]
fn bad_values_name_the_field_and_the_value() {
    let err = toml_error::<BreakerConfig>("window = \"60s\"\nfailure_ratio = 1.5");
    assert_names(&err, &["breaker.failure_ratio", "1.5"]);

    let err = toml_error::<BreakerConfig>("half_open_probes = 0");
    assert_names(&err, &["breaker.half_open_probes", "got 0"]);

    let err = toml_error::<BreakerConfig>("cooldown = \"30 parsecs\"");
    // TOML quotes the line, so the field is named; the message names the value.
    assert_names(&err, &["cooldown", "\"30 parsecs\"", "parsecs"]);

    let err = toml_error::<BreakerConfig>("cooldown = { base = \"1h\", max = \"1m\" }");
    assert_names(&err, &["breaker.cooldown.max", "60s"]);

    let err = toml_error::<BreakerConfig>("half_open_success_ratio = 0.0");
    assert_names(&err, &["breaker.half_open_success_ratio", "got 0"]);

    let err = toml_error::<BreakerConfig>("threshold = 3\nfailure_ratio = 0.5");
    assert_names(&err, &["breaker.threshold", "got 3"]);

    let err = toml_error::<BreakerConfig>("failure_ratio = 0.5");
    assert_names(&err, &["breaker.window", "required"]);

    let err = toml_error::<BreakerConfig>("treshold = 3");
    assert_names(&err, &["treshold", "unknown field"]);

    let err = toml_error::<GateConfig>("jitter = 1.0");
    assert_names(&err, &["gate.jitter", "got 1"]);

    let err = toml_error::<GateConfig>("default_wait = \"0s\"");
    assert_names(&err, &["gate.default_wait", "0s"]);

    let err = toml_error::<ParkConfig>("default_park = \"soon\"");
    assert_names(&err, &["default_park", "\"soon\""]);

    let err = toml_error::<BudgetConfig>("ttl = \"2h\"");
    assert_names(&err, &["budget.ttl", "7200s"]);

    let err = toml_error::<BudgetConfig>("retry_ratio = -0.5");
    assert_names(&err, &["budget.retry_ratio", "-0.5"]);

    // A value of the wrong type names its field too, not only serde's "expected u32".
    let err = toml_error::<BreakerConfig>("window = \"60s\"\nmin_calls = -1\nfailure_ratio = 0.5");
    assert_names(&err, &["breaker.min_calls", "-1"]);
    let err = toml_error::<GateConfig>("jitter = \"lots\"");
    assert_names(&err, &["gate.jitter", "lots"]);
    let err = toml_error::<BudgetConfig>("min_per_sec = 1.5");
    assert_names(&err, &["budget.min_per_sec", "1.5"]);
    let err = serde_json::from_str::<BreakerConfig>(r#"{"threshold": "five"}"#).unwrap_err();
    assert_names(&err.to_string(), &["breaker.threshold", "five"]);

    // JSON names the validated field the same way.
    let err = serde_json::from_str::<BreakerConfig>(r#"{"half_open_probes": 0}"#).unwrap_err();
    assert_names(&err.to_string(), &["breaker.half_open_probes", "got 0"]);
}

#[test]
fn custom_policies_do_not_serialise() {
    let config = BreakerConfig::builder()
        .cooldown(Cooldown::custom(|n| Duration::from_secs(u64::from(n) + 1)))
        .build()
        .unwrap();
    let err = serde_json::to_string(&config).unwrap_err().to_string();
    assert_names(
        &err,
        &[
            "breaker.cooldown",
            "custom cool-off function cannot be serialised",
        ],
    );
}

#[test]
fn a_pace_reserve_is_a_count_or_a_percentage_and_a_bad_one_names_its_field() {
    use levee_core::pace::{PaceConfig, Reserve};
    let c: PaceConfig = toml::from_str("requests_reserve = 5\ntokens_reserve = \"2.5%\"").unwrap();
    assert_eq!(c.requests_reserve, Reserve::Count(5));
    assert_eq!(c.tokens_reserve, Reserve::Share(0.025));
    assert!(c.enabled);
    let off: PaceConfig = toml::from_str("enabled = false").unwrap();
    assert!(!off.enabled);
    for bad in [
        "requests_reserve = \"two\"",
        "tokens_reserve = \"150%\"",
        "requests_reserve = -3",
    ] {
        let err = toml::from_str::<PaceConfig>(bad).unwrap_err().to_string();
        assert!(err.contains("pace."), "{bad}: {err}");
    }
}
