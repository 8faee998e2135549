//! The built-in scenario suite, run by `levee-drill` with no argument.

use crate::scenario::{Scenario, ScenarioError};

/// The built-in scenarios: (file name, TOML text).
pub const SUITE: [(&str, &str); 16] = [
    (
        "hard-outage.toml",
        include_str!("../scenarios/hard-outage.toml"),
    ),
    (
        "throttle-storm.toml",
        include_str!("../scenarios/throttle-storm.toml"),
    ),
    (
        "spend-cap.toml",
        include_str!("../scenarios/spend-cap.toml"),
    ),
    (
        "revoked-key.toml",
        include_str!("../scenarios/revoked-key.toml"),
    ),
    (
        "api-wide-529.toml",
        include_str!("../scenarios/api-wide-529.toml"),
    ),
    ("brownout.toml", include_str!("../scenarios/brownout.toml")),
    ("flapping.toml", include_str!("../scenarios/flapping.toml")),
    (
        "midstream-errors.toml",
        include_str!("../scenarios/midstream-errors.toml"),
    ),
    (
        "token-limits.toml",
        include_str!("../scenarios/token-limits.toml"),
    ),
    (
        "slow-first-token.toml",
        include_str!("../scenarios/slow-first-token.toml"),
    ),
    (
        "fleet-throttle.toml",
        include_str!("../scenarios/fleet-throttle.toml"),
    ),
    (
        "fleet-spend-cap.toml",
        include_str!("../scenarios/fleet-spend-cap.toml"),
    ),
    (
        "fleet-store-outage.toml",
        include_str!("../scenarios/fleet-store-outage.toml"),
    ),
    (
        "fleet-quiet-dead-primary.toml",
        include_str!("../scenarios/fleet-quiet-dead-primary.toml"),
    ),
    (
        "fleet-rate-limits.toml",
        include_str!("../scenarios/fleet-rate-limits.toml"),
    ),
    (
        "fleet-rate-limits-429s.toml",
        include_str!("../scenarios/fleet-rate-limits-429s.toml"),
    ),
];

/// The built-in scenarios, parsed.
pub fn scenarios() -> Result<Vec<Scenario>, ScenarioError> {
    SUITE
        .iter()
        .map(|(file, text)| {
            Scenario::from_toml(text).map_err(|e| ScenarioError(format!("{file}: {e}")))
        })
        .collect()
}
