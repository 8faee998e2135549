//! The `[fleet]` table: defaults, and a bad value refused at load naming
//! its field, without ever showing the password.

use std::time::Duration;

use levee_redis::{BreakerPolicy, FleetConfig};

#[derive(Debug, serde::Deserialize)]
struct Settings {
    #[allow(dead_code)]
    fleet: FleetConfig,
}

fn load(table: &str) -> Result<FleetConfig, String> {
    toml::from_str::<Settings>(&format!("[fleet]\n{table}"))
        .map(|s| s.fleet)
        .map_err(|e| e.to_string())
}

#[test]
fn only_the_url_is_needed_and_the_rest_defaults() {
    let c = load(r#"url = "redis://127.0.0.1:6379""#).unwrap();
    assert_eq!(c, FleetConfig::new("redis://127.0.0.1:6379"));
    assert_eq!(c.policy, BreakerPolicy::Quorum(2));
    assert_eq!(c.sweep_every, Duration::from_secs(1));
    assert_eq!(c.namespace, "levee");
    assert_eq!(c.probe_lease, Some(Duration::from_secs(2)));
    assert_eq!(c.share_failures, Some(Duration::from_secs(30)));
    assert!(c.share_pacing);
}

#[test]
fn every_field_reads_the_human_way() {
    let c = load(
        r#"
        url = "redis://cache:6380/2"
        namespace = "chat.prod"
        replica = "web-7f9c"
        policy = "follow"
        sweep_every = "250ms"
        reconnect_min = "50ms"
        reconnect_max = "10s"
        timeout = "1s"
        probe_lease = "500ms"
        share_failures = "off"
        share_pacing = false
        "#,
    )
    .unwrap();
    assert!(!c.share_pacing);
    assert_eq!(c.probe_lease, Some(Duration::from_millis(500)));
    assert_eq!(c.share_failures, None);
    assert_eq!(c.replica.as_deref(), Some("web-7f9c"));
    assert_eq!(c.policy, BreakerPolicy::Follow);
    assert_eq!(
        (c.sweep_every, c.reconnect_min, c.reconnect_max, c.timeout),
        (
            Duration::from_millis(250),
            Duration::from_millis(50),
            Duration::from_secs(10),
            Duration::from_secs(1)
        )
    );
}

#[test]
fn a_bad_value_is_refused_at_load_naming_its_field() {
    for (table, field) in [
        (r#"url = "http://:pw-secret@h""#, "fleet.url"),
        (
            r#"url = "redis://h"
            namespace = "a:b""#,
            "fleet.namespace",
        ),
        (
            r#"url = "redis://h"
            replica = """#,
            "fleet.replica",
        ),
        (
            r#"url = "redis://h"
            policy = "quorum(0)""#,
            "fleet.policy",
        ),
        (
            r#"url = "redis://h"
            sweep_every = "1ms""#,
            "fleet.sweep_every",
        ),
        (
            r#"url = "redis://h"
            reconnect_min = "9s""#,
            "fleet.reconnect_min",
        ),
        (
            r#"url = "redis://h"
            timeout = "0s""#,
            "fleet.timeout",
        ),
        (
            r#"url = "redis://h"
            sweep_every = "soon""#,
            "invalid duration",
        ),
        (
            r#"url = "redis://h"
            probe_lease = "5ms""#,
            "fleet.probe_lease",
        ),
        (
            r#"url = "redis://h"
            probe_lease = "never""#,
            "fleet.probe_lease",
        ),
        (
            r#"url = "redis://h"
            share_failures = "2h""#,
            "fleet.share_failures",
        ),
        (
            r#"url = "redis://h"
            password = "x""#,
            "unknown field",
        ),
        ("namespace = \"x\"", "missing field `url`"),
    ] {
        let err = load(table).unwrap_err();
        assert!(err.contains(field), "{table}: {err}");
        assert!(!err.contains("pw-secret"), "{err}");
    }
}

#[test]
fn the_password_never_shows_in_debug() {
    let c = load(r#"url = "redis://:pw-secret@cache:6379""#).unwrap();
    let shown = format!("{c:?} {:?}", c.store().unwrap());
    assert!(!shown.contains("pw-secret"), "{shown}");
    assert!(shown.contains("redis://:***@cache:6379"), "{shown}");
}
