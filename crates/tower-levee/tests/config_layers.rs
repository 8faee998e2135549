//! Per-service configuration of the layers: round trips, validation at
//! load, and the layers built from a file.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use levee_core::breaker::{BreakerConfig, Cooldown};
use levee_core::budget::BudgetConfig;
use tower_levee::config::{
    BreakerLayerConfig, BulkheadConfig, FailoverConfig, LeveeConfig, RetryConfig,
};

fn round_trip<T>(value: &T) -> (T, T)
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let text = toml::to_string(value).expect("serialises to TOML");
    let from_toml = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    let json = serde_json::to_string(value).expect("serialises to JSON");
    let from_json = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}\n{e}"));
    (from_toml, from_json)
}

fn custom() -> LeveeConfig {
    let mut config = LeveeConfig::default();
    config.breaker = BreakerConfig::builder()
        .rolling(Duration::from_secs(30), 8, 0.25)
        .cooldown(Cooldown::fixed(Duration::from_secs(7)))
        .half_open_probes(4)
        .half_open_success_ratio(0.75)
        .slow_call(Duration::from_millis(12_500))
        .build()
        .unwrap();
    config.gate = levee_core::gate::GateConfig::builder()
        .default_wait(Duration::from_secs(2))
        .max_wait(None)
        .build()
        .unwrap();
    config.park = levee_core::park::ParkConfig::builder()
        .default_park(Duration::from_secs(600))
        .build()
        .unwrap();
    config.pace = levee_core::pace::PaceConfig::builder()
        .enabled(true)
        .requests_reserve(levee_core::pace::Reserve::Count(3))
        .tokens_reserve(levee_core::pace::Reserve::Share(0.05))
        .max_pause(Duration::from_secs(30))
        .spread(false)
        .build()
        .unwrap();
    config.breaker_layer = BreakerLayerConfig::default()
        .peek_limit(4096)
        .max_keys(50)
        .isolate_by_model(true)
        .slow_stream(Some(Duration::from_secs(120)))
        .slow_call_by_model(BTreeMap::from([
            ("gpt-4o".to_owned(), Duration::from_secs(30)),
            ("o3".to_owned(), Duration::from_secs(240)),
        ]))
        .first_content_timeout(Some(Duration::from_secs(20)))
        .first_content_timeout_by_model(BTreeMap::from([(
            "o3".to_owned(),
            Duration::from_secs(120),
        )]))
        .stall_timeout(Some(Duration::from_secs(45)))
        .stream_hold(true)
        .stream_hold_max_bytes(8192)
        .stream_hold_max_events(16)
        .latency_estimate(true)
        .empty_body_is_failure(false);
    config.retry = RetryConfig::default()
        .max_attempts(5)
        .backoff_base(Duration::from_millis(250))
        .backoff_cap(Duration::from_secs(4))
        .max_wait(Duration::from_secs(20))
        .timeout(Some(Duration::from_secs(90)))
        .attempt_timeout(Some(Duration::from_secs(30)))
        .budget(BudgetConfig::new(Duration::from_secs(5), 2, 0.2));
    config.bulkhead = BulkheadConfig::default()
        .name("anthropic".into())
        .max_concurrent(16)
        .max_wait(Some(Duration::from_millis(50)));
    config.failover = FailoverConfig::default()
        .max_targets_per_request(Some(2))
        .max_retry_after(Duration::from_secs(60))
        .overload_window(Duration::from_secs(10));
    config
}

#[test]
fn every_layer_config_round_trips() {
    for config in [LeveeConfig::default(), custom()] {
        let expected = format!("{config:?}");
        let (t, j) = round_trip(&config);
        assert_eq!(format!("{t:?}"), expected);
        assert_eq!(format!("{j:?}"), expected);

        let (t, j) = round_trip(&config.breaker_layer);
        assert_eq!((&t, &j), (&config.breaker_layer, &config.breaker_layer));
        let (t, j) = round_trip(&config.retry);
        assert_eq!((&t, &j), (&config.retry, &config.retry));
        let (t, j) = round_trip(&config.bulkhead);
        assert_eq!((&t, &j), (&config.bulkhead, &config.bulkhead));
        let (t, j) = round_trip(&config.failover);
        assert_eq!((&t, &j), (&config.failover, &config.failover));
    }
}

const TWO_SERVICES: &str = r#"
[llm.breaker]
threshold = 3
cooldown = { base = "10s", max = "2m" }
slow_call = "20s"

[llm.gate]
max_wait = "5m"

[llm.breaker_layer]
isolate_by_model = true
slow_call_by_model = { "o3" = "4m" }

[llm.retry]
max_attempts = 4
timeout = "2m"
budget = { retry_ratio = 0.2 }

[llm.bulkhead]
name = "llm"
max_concurrent = 32

[search.breaker]
window = "1m"
failure_ratio = 0.5

[search.retry]
max_attempts = 2
backoff_base = "50ms"
backoff_cap = "400ms"

[search.bulkhead]
name = "search"
max_concurrent = 8
max_wait = "25ms"
"#;

#[test]
fn a_file_of_two_services_builds_their_layers() {
    let services: HashMap<String, LeveeConfig> = toml::from_str(TWO_SERVICES).unwrap();
    let llm = &services["llm"];
    assert_eq!(llm.breaker.slow_call, Some(Duration::from_secs(20)));
    assert_eq!(llm.gate.max_wait, Some(Duration::from_secs(300)));
    assert_eq!(llm.retry.budget.retry_ratio(), 0.2);
    assert_eq!(llm.retry.budget.ttl(), Duration::from_secs(10));
    let search = &services["search"];
    assert_eq!(search.breaker_layer, BreakerLayerConfig::default());

    for (name, config) in &services {
        config.validate().unwrap();
        let layer = config.breaker_layer().unwrap().build().unwrap();
        let _ = format!("{layer:?}");
        let _ = config.retry.layer().unwrap();
        let bulkhead = config.bulkhead.layer().unwrap();
        assert_eq!(bulkhead.name(), name);
        assert_eq!(bulkhead.limit(), config.bulkhead.max_concurrent);
    }
}

fn load_error(text: &str) -> String {
    toml::from_str::<LeveeConfig>(text).unwrap_err().to_string()
}

fn assert_names(err: &str, needles: &[&str]) {
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }
}

#[test]
fn bad_values_fail_at_load_naming_field_and_value() {
    let cases: &[(&str, &[&str])] = &[
        (
            "[breaker]\nwindow = \"60s\"\nfailure_ratio = 1.5",
            &["breaker.failure_ratio", "1.5"],
        ),
        (
            "[breaker]\nhalf_open_probes = 0",
            &["breaker.half_open_probes", "got 0"],
        ),
        (
            "[breaker]\ncooldown = \"30 parsecs\"",
            &["cooldown", "\"30 parsecs\""],
        ),
        ("[gate]\njitter = 2.0", &["gate.jitter", "got 2"]),
        (
            "[park]\ndefault_park = \"0s\"",
            &["park.default_park", "0s"],
        ),
        (
            "[breaker_layer]\npeek_limit = 0",
            &["breaker_layer.peek_limit", "got 0"],
        ),
        (
            "[breaker_layer]\nmax_keys = 0",
            &["breaker_layer.max_keys", "got 0"],
        ),
        (
            "[breaker_layer]\nslow_call_by_model = { \"o3\" = \"0s\" }",
            &["breaker_layer.slow_call_by_model", "o3", "0s"],
        ),
        (
            "[retry]\nmax_attempts = 0",
            &["retry.max_attempts", "got 0"],
        ),
        (
            "[retry]\nbackoff_base = \"2s\"\nbackoff_cap = \"1s\"",
            &["retry.backoff_cap", "got 1s", "2s"],
        ),
        (
            "[retry]\ntimeout = \"fortnight\"",
            &["timeout", "\"fortnight\""],
        ),
        (
            "[retry.budget]\nretry_ratio = 1e9",
            &["budget.retry_ratio", "1000000000"],
        ),
        (
            "[bulkhead]\nmax_concurrent = 0",
            &["bulkhead.max_concurrent", "got 0"],
        ),
        (
            "[bulkhead]\nmax_concurent = 4",
            &["max_concurent", "unknown field"],
        ),
        ("[retri]\nmax_attempts = 2", &["retri", "unknown field"]),
        // A value of the wrong type names its field, wherever it is.
        (
            "[breaker]\nwindow = \"60s\"\nmin_calls = -1\nfailure_ratio = 0.5",
            &["breaker.min_calls", "-1"],
        ),
        ("[retry]\nmax_attempts = -2", &["retry.max_attempts", "-2"]),
        (
            "[retry.budget]\nmin_per_sec = \"many\"",
            &["budget.min_per_sec", "many"],
        ),
        (
            "[breaker_layer]\npeek_limit = \"16k\"",
            &["breaker_layer.peek_limit", "16k"],
        ),
        (
            "[bulkhead]\nmax_concurrent = 1.5",
            &["bulkhead.max_concurrent", "1.5"],
        ),
        (
            "[breaker_layer]\nstall_timeout = \"0s\"",
            &["breaker_layer.stall_timeout", "0s"],
        ),
        (
            "[breaker_layer]\nfirst_content_timeout = \"0s\"",
            &["breaker_layer.first_content_timeout", "0s"],
        ),
        (
            "[breaker_layer]\nfirst_content_timeout_by_model = { \"o3\" = \"0s\" }",
            &["breaker_layer.first_content_timeout_by_model", "o3", "0s"],
        ),
        (
            "[breaker_layer]\nstream_hold_max_bytes = 0",
            &["breaker_layer.stream_hold_max_bytes", "got 0"],
        ),
        (
            "[breaker_layer]\nstream_hold_max_events = 0",
            &["breaker_layer.stream_hold_max_events", "got 0"],
        ),
        (
            "[failover]\nmax_targets_per_request = 0",
            &["failover.max_targets_per_request", "got 0"],
        ),
        (
            "[failover]\noverload_window = \"soon\"",
            &["failover.overload_window", "soon"],
        ),
        (
            "[failover]\nshadow_probe_share = 0.0",
            &["failover.shadow_probe_share", "got 0"],
        ),
        (
            "[failover]\nshadow_probe_share = 1.5",
            &["failover.shadow_probe_share", "got 1.5"],
        ),
        ("[failover]\ndemotion = \"0s\"", &["failover.demotion", "0"]),
    ];
    for (text, needles) in cases {
        assert_names(&load_error(text), needles);
    }
}

#[test]
fn custom_policies_are_refused_when_serialising() {
    let mut config = LeveeConfig::default();
    config.breaker = BreakerConfig::builder()
        .cooldown(Cooldown::custom(|_| Duration::from_secs(1)))
        .build()
        .unwrap();
    let err = toml::to_string(&config).unwrap_err().to_string();
    assert_names(&err, &["cannot be serialised"]);
}
