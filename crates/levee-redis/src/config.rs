//! The fleet from a configuration file, checked at load.

use std::fmt;
use std::time::Duration;

use levee_core::config::duration;
use levee_core::config_error::ConfigError;
use serde::Deserialize;

use crate::fleet::{DEFAULT_FAILURE_MEMORY, DEFAULT_PROBE_LEASE, Fleet, FleetBuilder};
use crate::policy::BreakerPolicy;
use crate::store::{RedisStore, StoreError};

/// A fleet's settings, as a `[fleet]` table beside the service's
/// `tower_levee::config::LeveeConfig` (feature `serde`). Every field but
/// `url` is optional; durations are written the human way; an unknown
/// field is an error, and every value is checked at load with an error
/// that names it.
///
/// ```
/// use levee_redis::FleetConfig;
///
/// #[derive(serde::Deserialize)]
/// struct Settings {
///     fleet: FleetConfig,
/// }
///
/// let s: Settings = toml::from_str(r#"
///     [fleet]
///     url = "redis://:s3cret@cache.internal:6379/0"
///     namespace = "chat-backend"
///     policy = "quorum(3)"
///     sweep_every = "500ms"
///     probe_lease = "2s"         # or "off": each replica probes alone
///     share_failures = "off"     # or how long a replica's failure streak counts
/// "#).unwrap();
/// assert_eq!(s.fleet.namespace, "chat-backend");
/// assert_eq!(s.fleet.share_failures, None);
/// assert!(!format!("{:?}", s.fleet).contains("s3cret"));
///
/// let err = toml::from_str::<Settings>("[fleet]\nurl = \"redis://h\"\npolicy = \"majority\"")
///     .err().unwrap();
/// assert!(err.to_string().contains("invalid fleet.policy"), "{err}");
/// ```
///
/// It deserializes only: a configuration written back out would carry the
/// password.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Raw")]
#[non_exhaustive]
pub struct FleetConfig {
    /// The Redis URL (`redis://`, `rediss://`); its password is never shown.
    pub url: String,
    /// Prefix of every key and the channel (default `levee`).
    pub namespace: String,
    /// This replica's id (default: random; a pod name is a good one).
    pub replica: Option<String>,
    /// When another replica's breaker open is adopted (default `quorum(2)`).
    pub policy: BreakerPolicy,
    /// How often the store is read back (default 1 s).
    pub sweep_every: Duration,
    /// The first wait before reconnecting (default 100 ms).
    pub reconnect_min: Duration,
    /// The longest wait before reconnecting (default 5 s).
    pub reconnect_max: Duration,
    /// How long one store operation may take (default 2 s).
    pub timeout: Duration,
    /// The fleet's probe lease, `None` (`"off"`) for every replica probing
    /// alone (default 2 s): [`FleetBuilder::probe_lease`].
    pub probe_lease: Option<Duration>,
    /// How long a replica's failure streak counts for the others, `None`
    /// (`"off"`) to count alone (default 30 s):
    /// [`FleetBuilder::share_failures`].
    pub share_failures: Option<Duration>,
    /// Whether the live replicas share the providers' rate limits
    /// (default `true`): [`FleetBuilder::share_pacing`].
    pub share_pacing: bool,
}

impl FleetConfig {
    /// The defaults, with `url`.
    pub fn new(url: impl Into<String>) -> Self {
        FleetConfig {
            url: url.into(),
            namespace: "levee".into(),
            replica: None,
            policy: BreakerPolicy::default(),
            sweep_every: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            probe_lease: Some(DEFAULT_PROBE_LEASE),
            share_failures: Some(DEFAULT_FAILURE_MEMORY),
            share_pacing: true,
        }
    }

    /// Checks every field, naming the first that is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        RedisStore::open(&self.url).map_err(|e| ConfigError::new("fleet.url", e.to_string()))?;
        if self.reconnect_min.is_zero() || self.reconnect_min > self.reconnect_max {
            return Err(ConfigError::new(
                "fleet.reconnect_min",
                format!(
                    "needs 0 < reconnect_min <= reconnect_max, got {:?} and {:?}",
                    self.reconnect_min, self.reconnect_max
                ),
            ));
        }
        self.settings().check()?;
        if self.timeout.is_zero() {
            return Err(ConfigError::new("fleet.timeout", "must be more than 0"));
        }
        Ok(())
    }

    /// A builder with these settings: attach the layers, then
    /// [`spawn`](FleetBuilder::spawn) with [`store`](Self::store).
    pub fn builder(&self) -> FleetBuilder {
        self.settings()
    }

    /// The Redis store at `url`, with `timeout`.
    pub fn store(&self) -> Result<RedisStore, StoreError> {
        Ok(RedisStore::open(&self.url)?.with_timeout(self.timeout))
    }

    fn settings(&self) -> FleetBuilder {
        let mut b = Fleet::builder()
            .namespace(self.namespace.clone())
            .policy(self.policy)
            .sweep_every(self.sweep_every)
            .reconnect_backoff(self.reconnect_min, self.reconnect_max)
            .probe_lease(self.probe_lease)
            .share_failures(self.share_failures)
            .share_pacing(self.share_pacing);
        if let Some(id) = &self.replica {
            b = b.replica(id.clone());
        }
        b
    }
}

impl fmt::Debug for FleetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetConfig")
            .field("url", &crate::store::redact(&self.url).0)
            .field("namespace", &self.namespace)
            .field("replica", &self.replica)
            .field("policy", &self.policy)
            .field("sweep_every", &self.sweep_every)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field("timeout", &self.timeout)
            .field("probe_lease", &self.probe_lease)
            .field("share_failures", &self.share_failures)
            .field("share_pacing", &self.share_pacing)
            .finish()
    }
}

/// The table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    url: String,
    #[serde(default = "default_namespace")]
    namespace: String,
    #[serde(default)]
    replica: Option<String>,
    #[serde(default = "default_policy")]
    policy: String,
    #[serde(default = "default_sweep", with = "duration")]
    sweep_every: Duration,
    #[serde(default = "default_reconnect_min", with = "duration")]
    reconnect_min: Duration,
    #[serde(default = "default_reconnect_max", with = "duration")]
    reconnect_max: Duration,
    #[serde(default = "default_timeout", with = "duration")]
    timeout: Duration,
    #[serde(default)]
    probe_lease: Option<String>,
    #[serde(default)]
    share_failures: Option<String>,
    #[serde(default = "default_share_pacing")]
    share_pacing: bool,
}

fn default_share_pacing() -> bool {
    true
}

#[doc(hidden)]
/// A duration, or `"off"`; `default` when not written: how the fleet's
/// optional mechanisms are configured, here and in the drill's scenarios.
pub fn duration_or_off(
    field: &'static str,
    text: Option<&str>,
    default: Duration,
) -> Result<Option<Duration>, ConfigError> {
    match text.map(str::trim) {
        None => Ok(Some(default)),
        Some("off") => Ok(None),
        Some(t) => duration::parse(t)
            .map(Some)
            .map_err(|e| ConfigError::new(field, format!("{e} (or \"off\")"))),
    }
}

fn default_namespace() -> String {
    "levee".into()
}
fn default_policy() -> String {
    BreakerPolicy::default().to_string()
}
fn default_sweep() -> Duration {
    Duration::from_secs(1)
}
fn default_reconnect_min() -> Duration {
    Duration::from_millis(100)
}
fn default_reconnect_max() -> Duration {
    Duration::from_secs(5)
}
fn default_timeout() -> Duration {
    Duration::from_secs(2)
}

impl TryFrom<Raw> for FleetConfig {
    type Error = ConfigError;

    fn try_from(raw: Raw) -> Result<Self, ConfigError> {
        let policy = raw
            .policy
            .parse()
            .map_err(|e: String| ConfigError::new("fleet.policy", e))?;
        let config = FleetConfig {
            url: raw.url,
            namespace: raw.namespace,
            replica: raw.replica,
            policy,
            sweep_every: raw.sweep_every,
            reconnect_min: raw.reconnect_min,
            reconnect_max: raw.reconnect_max,
            timeout: raw.timeout,
            probe_lease: duration_or_off(
                "fleet.probe_lease",
                raw.probe_lease.as_deref(),
                DEFAULT_PROBE_LEASE,
            )?,
            share_failures: duration_or_off(
                "fleet.share_failures",
                raw.share_failures.as_deref(),
                DEFAULT_FAILURE_MEMORY,
            )?,
            share_pacing: raw.share_pacing,
        };
        config.validate()?;
        Ok(config)
    }
}
