//! The gateway's configuration file: read, checked, and every key it names
//! resolved (environment variables, key files), with errors that say
//! which key, on which line and column.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Uri;
use levee_core::classify::{Rule, Rules};
use levee_core::config::duration;
use levee_redis::FleetConfig;
use serde::Deserialize;
use toml::Spanned;
use tower_levee::config::{FileError, LeveeConfig, from_toml};

use crate::secret::Secret;

/// The largest request body read by default: 32 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// A gateway configuration, checked, with every key resolved.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// TLS for the listener.
    pub tls: Option<TlsConfig>,
    /// Limits and timeouts of the server.
    pub server: ServerConfig,
    /// The gateway's `[levee]` table as written (merged under each route's).
    pub levee: toml::Table,
    /// Sharing state with the other replicas.
    pub fleet: Option<FleetConfig>,
    /// The admin key: no key, no admin routes.
    pub admin_key: Option<Secret>,
    /// The key the operations endpoints ask for, if any.
    pub ops_key: Option<Secret>,
    /// The targets, by name, in the file's order.
    pub targets: Vec<TargetConfig>,
    /// The routes, in the file's order.
    pub routes: Vec<RouteConfig>,
    /// The callers; none means no key is asked for (loopback only).
    pub clients: Vec<ClientConfig>,
    /// Classification rules checked before the built-in ones, for every
    /// target: the `[[rule]]` tables, then those of `rules_file`.
    pub rules: Rules,
    /// OpenTelemetry export: the GenAI spans and metrics of every request.
    pub otel: Option<OtelConfig>,
}

/// `[otel]`: export OpenTelemetry's GenAI spans and metrics of every
/// request over OTLP/HTTP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtelConfig {
    /// The collector's OTLP/HTTP base URL: spans go to `/v1/traces` under
    /// it, metrics to `/v1/metrics`.
    pub endpoint: Uri,
    /// The encoding.
    pub protocol: OtelProtocol,
    /// The `service.name` of the resource (`levee-gateway`).
    pub service_name: String,
    /// How often metrics are exported (60 s).
    pub metric_interval: Duration,
    /// Headers sent with every export (a vendor's key), from the
    /// environment variables `headers_env` names.
    pub headers: Vec<(http::HeaderName, Secret)>,
}

/// OTLP over HTTP: protobuf (the default) or JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum OtelProtocol {
    /// `http/protobuf`.
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// `http/json`.
    #[serde(rename = "http/json")]
    HttpJson,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOtel {
    endpoint: Spanned<String>,
    #[serde(default)]
    protocol: OtelProtocol,
    #[serde(default)]
    service_name: Option<String>,
    #[serde(default, with = "duration::option")]
    metric_interval: Option<Duration>,
    #[serde(default)]
    headers_env: BTreeMap<String, Spanned<String>>,
}

/// `[tls]`: serve HTTPS.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, PEM.
    pub cert_file: PathBuf,
    /// The private key, PEM.
    pub key_file: PathBuf,
}

/// The most threads `server.threads` may ask for.
const MAX_THREADS: usize = 1024;

/// `[server]`: what the gateway accepts from its callers.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The largest request body (32 MiB): a larger one is refused `413`
    /// without being read past the limit.
    pub max_body_bytes: usize,
    /// A request's head must arrive within this (10 s).
    #[serde(with = "duration")]
    pub header_read_timeout: Duration,
    /// A request's body must arrive within this (60 s).
    #[serde(with = "duration")]
    pub body_read_timeout: Duration,
    /// On `SIGTERM`, how long requests in flight may finish (30 s).
    #[serde(with = "duration")]
    pub shutdown_timeout: Duration,
    /// How many threads serve connections, each with a runtime of its own
    /// (0, the default: one per core).
    pub threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            threads: 0,
        }
    }
}

/// The API a target speaks, and so the routes it serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetDialect {
    /// OpenAI's API, or one compatible with it: the OpenAI routes.
    #[default]
    OpenAi,
    /// Azure OpenAI: OpenAI's API at a deployment's URL, with `api-key`
    /// and `api-version`.
    Azure,
    /// Anthropic's Messages API: `/v1/messages`.
    Anthropic,
}

/// How a target's key is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthStyle {
    /// `Authorization: Bearer <key>` (OpenAI and most compatible APIs).
    Bearer,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
    /// `api-key: <key>` (Azure).
    ApiKey,
}

/// One `[[target]]`: an account at a provider.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetConfig {
    /// Its name, unique.
    pub name: String,
    /// Scheme, host and path prefix of its API.
    pub base_url: Uri,
    /// Its API.
    pub dialect: TargetDialect,
    /// How its key is sent.
    pub auth: AuthStyle,
    /// Its key (none: nothing is sent).
    pub key: Option<Secret>,
    /// Where its key was read from, to read again on `SIGHUP`.
    pub key_source: Option<KeySource>,
    /// The name it calls the route's model by.
    pub model: Option<String>,
    /// Azure: the deployment (default: `model`, else the route's model).
    pub deployment: Option<String>,
    /// Azure: the `api-version` query parameter.
    pub api_version: String,
    /// The billing scope its spend caps park (default: its name).
    pub account: Option<String>,
    /// Provider and region labels: failover tries another provider or
    /// region first after an overload.
    pub provider: Option<String>,
    /// See `provider`.
    pub region: Option<String>,
    /// A pool: targets of one pool share traffic by what each has left.
    pub pool: Option<String>,
    /// Headers sent to it on every request.
    pub headers: BTreeMap<String, String>,
    /// Its active probe, sent while its breaker is open and no traffic
    /// reaches it.
    pub probe: Option<ProbeConfig>,
}

/// A target's `probe`: a request of the user's that shows it serving
/// (`GET /v1/models`, or a one-token completion), sent through the
/// target's rewrite (its base URL, key and headers, and its own name for a
/// model the body names) as a caller's request to the gateway would be.
/// Each route that names the target sends it on its own schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeConfig {
    /// Its method (`GET`, or `POST` when it has a body).
    pub method: http::Method,
    /// Its path and query as a caller sends them to the gateway
    /// (`/v1/models`).
    pub path: http::uri::PathAndQuery,
    /// Its body, sent as JSON (none: empty).
    pub body: Option<String>,
}

impl fmt::Debug for TargetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TargetConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("dialect", &self.dialect)
            .field("key", &self.key)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Where a key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// An environment variable, by name.
    Env(String),
    /// A file, whose first line is the key.
    File(PathBuf),
}

/// The `api-version` Azure targets send unless told otherwise (the latest
/// generally available one when this was written).
pub const DEFAULT_AZURE_API_VERSION: &str = "2024-10-21";

/// One `[[route]]`: a model and its targets in failover order.
#[derive(Clone, Debug)]
pub struct RouteConfig {
    /// The model clients name.
    pub model: String,
    /// Its targets, in failover order.
    pub targets: Vec<String>,
    /// The Levee settings of its stack: the gateway's `[levee]` with the
    /// route's own on top, checked.
    pub levee: LeveeConfig,
    /// The same, as written (for telling settings apart).
    pub levee_table: toml::Table,
}

/// One `[[client]]`: a caller, its key and limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Its name, in logs and metrics.
    pub name: String,
    /// Its key.
    pub key: Secret,
    /// Requests per minute.
    pub requests_per_minute: Option<NonZeroU64>,
    /// Tokens per minute.
    pub tokens_per_minute: Option<NonZeroU64>,
}

/// Why a configuration was refused.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Read(PathBuf, std::io::Error),
    /// A key of the file is wrong: which, where, and why.
    Invalid(PathBuf, FileError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read(path, e) => write!(f, "{}: cannot read: {e}", path.display()),
            ConfigError::Invalid(path, e) => write!(f, "{}: {e}", path.display()),
        }
    }
}

impl std::error::Error for ConfigError {}

// === the file as written ===

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    listen: Spanned<String>,
    #[serde(default)]
    tls: Option<TlsConfig>,
    #[serde(default)]
    server: ServerConfig,
    #[serde(default)]
    levee: Option<LeveeConfig>,
    #[serde(default)]
    fleet: Option<FleetConfig>,
    admin_key_env: Option<Spanned<String>>,
    ops_key_env: Option<Spanned<String>>,
    #[serde(default, rename = "target")]
    targets: Vec<RawTarget>,
    #[serde(default, rename = "route")]
    routes: Vec<RawRoute>,
    #[serde(default, rename = "client")]
    clients: Vec<RawClient>,
    #[serde(default, rename = "rule")]
    rules: Vec<Rule>,
    rules_file: Option<Spanned<PathBuf>>,
    #[serde(default)]
    otel: Option<RawOtel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    name: Spanned<String>,
    base_url: Spanned<String>,
    #[serde(default)]
    dialect: TargetDialect,
    auth: Option<AuthStyle>,
    api_key_env: Option<Spanned<String>>,
    api_key_file: Option<Spanned<PathBuf>>,
    model: Option<String>,
    deployment: Option<String>,
    api_version: Option<String>,
    account: Option<String>,
    provider: Option<String>,
    region: Option<String>,
    pool: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    probe: Option<Spanned<RawProbe>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    method: Option<String>,
    path: String,
    body: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    model: Spanned<String>,
    targets: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    levee: Option<LeveeConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    name: Spanned<String>,
    key_env: Spanned<String>,
    requests_per_minute: Option<Spanned<u64>>,
    tokens_per_minute: Option<Spanned<u64>>,
}

/// The `[levee]` tables as written, to merge a route's over the gateway's.
#[derive(Deserialize, Default)]
struct Tables {
    #[serde(default)]
    levee: toml::Table,
    #[serde(default, rename = "route")]
    routes: Vec<RouteTable>,
}

#[derive(Deserialize, Default)]
struct RouteTable {
    #[serde(default)]
    levee: toml::Table,
}

/// Reads the variables the configuration names.
pub trait Env {
    /// The variable `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process's environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl GatewayConfig {
    /// Reads and checks the file at `path`, resolving the keys it names from
    /// the process's environment and the files it names.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.to_owned(), e))?;
        Self::parse(&text, path.parent().unwrap_or(Path::new(".")), &ProcessEnv)
            .map_err(|e| ConfigError::Invalid(path.to_owned(), e))
    }

    /// Reads and checks `text`; relative key files are read from `dir`,
    /// variables from `env`.
    pub fn parse(text: &str, dir: &Path, env: &dyn Env) -> Result<Self, FileError> {
        let raw: Raw = from_toml(text)?;
        let tables: Tables = toml::from_str(text).unwrap_or_default();
        let at = |span: std::ops::Range<usize>, key: String, message: String| {
            FileError::at(text, Some(span), key, message)
        };

        let listen: SocketAddr = raw.listen.get_ref().parse().map_err(|e| {
            at(
                raw.listen.span(),
                "listen".into(),
                format!(
                    "{:?} is not an address and port ({e})",
                    raw.listen.get_ref()
                ),
            )
        })?;
        if raw.clients.is_empty() && !listen.ip().is_loopback() {
            return Err(at(
                raw.listen.span(),
                "listen".into(),
                format!(
                    "{listen} is not a loopback address, and no [[client]] is configured: \
                     without client keys anyone who reaches the gateway spends your provider \
                     keys, so it listens only on 127.0.0.1 or ::1 until a [[client]] is added"
                ),
            ));
        }
        let server = raw.server;
        if server.max_body_bytes == 0 {
            return Err(FileError::at(
                text,
                None,
                "server.max_body_bytes",
                "must be at least 1, got 0",
            ));
        }
        if server.threads > MAX_THREADS {
            return Err(FileError::at(
                text,
                None,
                "server.threads",
                format!(
                    "must be at most {MAX_THREADS} (0 is one per core), got {}",
                    server.threads
                ),
            ));
        }
        for (key, d) in [
            ("server.header_read_timeout", server.header_read_timeout),
            ("server.body_read_timeout", server.body_read_timeout),
        ] {
            if d.is_zero() {
                return Err(FileError::at(
                    text,
                    None,
                    key,
                    "must be greater than zero, got 0s",
                ));
            }
        }
        if let Some(fleet) = &raw.fleet {
            fleet
                .validate()
                .map_err(|e| FileError::at(text, None, "fleet", e.to_string()))?;
        }
        let secret_env = |key: &str, var: &Spanned<String>| -> Result<Secret, FileError> {
            match env.var(var.get_ref()) {
                Some(value) if !value.trim().is_empty() => Ok(Secret::new(value.trim())),
                Some(_) => Err(at(
                    var.span(),
                    key.to_owned(),
                    format!("the environment variable {} is empty", var.get_ref()),
                )),
                None => Err(at(
                    var.span(),
                    key.to_owned(),
                    format!("the environment variable {} is not set", var.get_ref()),
                )),
            }
        };
        let admin_key = raw
            .admin_key_env
            .as_ref()
            .map(|v| secret_env("admin_key_env", v))
            .transpose()?;
        let ops_key = raw
            .ops_key_env
            .as_ref()
            .map(|v| secret_env("ops_key_env", v))
            .transpose()?;

        // Targets.
        let mut targets = Vec::with_capacity(raw.targets.len());
        let mut names = HashSet::new();
        for (i, t) in raw.targets.into_iter().enumerate() {
            let key = |field: &str| format!("target[{i}].{field}");
            let name = t.name.get_ref().clone();
            if name.is_empty() || name.contains(['/', ' ']) {
                return Err(at(
                    t.name.span(),
                    key("name"),
                    format!("{name:?}: a target's name is a non-empty word without `/` or spaces"),
                ));
            }
            if !names.insert(name.clone()) {
                return Err(at(
                    t.name.span(),
                    key("name"),
                    format!("a second target named `{name}`"),
                ));
            }
            let base_url = parse_base_url(t.base_url.get_ref(), "api_key_env")
                .map_err(|m| at(t.base_url.span(), key("base_url"), m))?;
            let (key_value, key_source) = match (&t.api_key_env, &t.api_key_file) {
                (Some(_), Some(file)) => {
                    return Err(at(
                        file.span(),
                        key("api_key_file"),
                        "name api_key_env or api_key_file, not both".into(),
                    ));
                }
                (Some(var), None) => (
                    Some(secret_env(&key("api_key_env"), var)?),
                    Some(KeySource::Env(var.get_ref().clone())),
                ),
                (None, Some(file)) => {
                    let path = dir.join(file.get_ref());
                    let secret = read_key_file(&path)
                        .map_err(|m| at(file.span(), key("api_key_file"), m))?;
                    (Some(secret), Some(KeySource::File(path)))
                }
                (None, None) => (None, None),
            };
            let auth = t.auth.unwrap_or(match t.dialect {
                TargetDialect::OpenAi => AuthStyle::Bearer,
                TargetDialect::Azure => AuthStyle::ApiKey,
                TargetDialect::Anthropic => AuthStyle::XApiKey,
            });
            let mut headers = BTreeMap::new();
            for (name, value) in t.headers {
                let bad = http::HeaderName::from_bytes(name.as_bytes()).is_err()
                    || http::HeaderValue::from_str(value.get_ref()).is_err();
                if bad {
                    return Err(at(
                        value.span(),
                        key(&format!("headers.{name}")),
                        "not a valid HTTP header name and value".into(),
                    ));
                }
                headers.insert(name, value.into_inner());
            }
            if t.dialect != TargetDialect::Azure
                && (t.deployment.is_some() || t.api_version.is_some())
            {
                return Err(at(
                    t.name.span(),
                    key("deployment"),
                    "`deployment` and `api_version` are for dialect = \"azure\"".into(),
                ));
            }
            let probe = match t.probe {
                Some(raw) => Some(
                    probe_config(raw.get_ref())
                        .map_err(|(field, m)| at(raw.span(), key(&format!("probe.{field}")), m))?,
                ),
                None => None,
            };
            targets.push(TargetConfig {
                name,
                base_url,
                dialect: t.dialect,
                auth,
                key: key_value,
                key_source,
                model: t.model,
                deployment: t.deployment,
                api_version: t
                    .api_version
                    .unwrap_or_else(|| DEFAULT_AZURE_API_VERSION.to_owned()),
                account: t.account,
                provider: t.provider,
                region: t.region,
                pool: t.pool,
                headers,
                probe,
            });
        }

        // Routes.
        let base = tables.levee;
        let mut routes = Vec::with_capacity(raw.routes.len());
        let mut models = HashSet::new();
        for (i, r) in raw.routes.into_iter().enumerate() {
            let key = |field: &str| format!("route[{i}].{field}");
            let model = r.model.get_ref().clone();
            if model.is_empty() {
                return Err(at(r.model.span(), key("model"), "must not be empty".into()));
            }
            if !models.insert(model.clone()) {
                return Err(at(
                    r.model.span(),
                    key("model"),
                    format!("a second route for `{model}`"),
                ));
            }
            if r.targets.get_ref().is_empty() {
                return Err(at(
                    r.targets.span(),
                    key("targets"),
                    "a route needs at least one target".into(),
                ));
            }
            let mut route_targets = Vec::new();
            for (j, name) in r.targets.get_ref().iter().enumerate() {
                if !names.contains(name.get_ref()) {
                    let mut known: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
                    known.sort_unstable();
                    return Err(at(
                        name.span(),
                        format!("route[{i}].targets[{j}]"),
                        format!(
                            "no target is named `{}` (the targets: {})",
                            name.get_ref(),
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
                if route_targets.contains(name.get_ref()) {
                    return Err(at(
                        name.span(),
                        format!("route[{i}].targets[{j}]"),
                        format!("`{}` is named twice", name.get_ref()),
                    ));
                }
                route_targets.push(name.get_ref().clone());
            }
            let own = tables
                .routes
                .get(i)
                .map(|t| t.levee.clone())
                .unwrap_or_default();
            // Whether the route's own table turns shadow probes off (for
            // naming the key that did, if a probe needs them).
            let own_shadow = own
                .get("failover")
                .and_then(|f| f.get("shadow_probes"))
                .is_some();
            let mut merged = base.clone();
            merge(&mut merged, own);
            let levee: LeveeConfig =
                toml::Value::Table(merged.clone())
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        at(
                            r.model.span(),
                            key("levee"),
                            format!(
                                "the gateway's [levee] with this route's on top: {}",
                                e.message().lines().next().unwrap_or_default()
                            ),
                        )
                    })?;
            if !levee.failover.shadow_probes
                && let Some(probed) = targets
                    .iter()
                    .find(|t| t.probe.is_some() && route_targets.contains(&t.name))
            {
                return Err(at(
                    r.model.span(),
                    if own_shadow {
                        key("levee.failover.shadow_probes")
                    } else {
                        "levee.failover.shadow_probes".to_owned()
                    },
                    format!(
                        "target `{}` has a probe, which is sent on the shadow probes' \
                         schedule: this route's settings turn them off",
                        probed.name
                    ),
                ));
            }
            drop(r.levee);
            routes.push(RouteConfig {
                model,
                targets: route_targets,
                levee,
                levee_table: merged,
            });
        }
        drop(raw.levee);

        // Clients.
        let mut clients = Vec::with_capacity(raw.clients.len());
        let mut client_names = HashSet::new();
        for (i, c) in raw.clients.into_iter().enumerate() {
            let key = |field: &str| format!("client[{i}].{field}");
            let name = c.name.get_ref().clone();
            if name.is_empty() || !client_names.insert(name.clone()) {
                return Err(at(
                    c.name.span(),
                    key("name"),
                    format!("{name:?}: each client needs a name of its own"),
                ));
            }
            let limit = |field: &str, v: Option<Spanned<u64>>| {
                v.map(|v| {
                    NonZeroU64::new(*v.get_ref())
                        .ok_or_else(|| at(v.span(), key(field), "must be at least 1, got 0".into()))
                })
                .transpose()
            };
            clients.push(ClientConfig {
                name,
                key: secret_env(&key("key_env"), &c.key_env)?,
                requests_per_minute: limit("requests_per_minute", c.requests_per_minute)?,
                tokens_per_minute: limit("tokens_per_minute", c.tokens_per_minute)?,
            });
        }
        let mut seen_keys = HashSet::new();
        for (i, c) in clients.iter().enumerate() {
            if !seen_keys.insert(c.key.expose()) {
                return Err(FileError::at(
                    text,
                    None,
                    format!("client[{i}].key_env"),
                    "two clients have the same key: a caller must be told apart by its key",
                ));
            }
        }

        // Rules: the file's own, then those of `rules_file`.
        let mut rules = raw.rules;
        if let Some(file) = &raw.rules_file {
            let path = dir.join(file.get_ref());
            let read = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    from_toml::<Rules>(&text).map_err(|e| format!("{}: {e}", path.display()))
                })
                .map_err(|e| at(file.span(), "rules_file".into(), e))?;
            rules.extend(read.iter().cloned());
        }
        let rules =
            Rules::new(rules).map_err(|e| FileError::at(text, None, "rule", e.to_string()))?;

        let otel = match raw.otel {
            None => None,
            Some(o) => {
                // The collector's base URL, checked as a target's is.
                let uri = parse_base_url(o.endpoint.get_ref(), "headers_env")
                    .map_err(|e| at(o.endpoint.span(), "otel.endpoint".into(), e))?;
                let metric_interval = o.metric_interval.unwrap_or(Duration::from_secs(60));
                if metric_interval.is_zero() {
                    return Err(FileError::at(
                        text,
                        None,
                        "otel.metric_interval",
                        "must be greater than zero, got 0s",
                    ));
                }
                let mut headers = Vec::with_capacity(o.headers_env.len());
                for (name, var) in &o.headers_env {
                    let key = format!("otel.headers_env.{name}");
                    let header = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                        at(
                            var.span(),
                            key.clone(),
                            format!("{name:?} is not a header name"),
                        )
                    })?;
                    let secret = secret_env(&key, var)?;
                    if http::HeaderValue::from_str(secret.expose()).is_err() {
                        return Err(at(
                            var.span(),
                            key,
                            format!(
                                "the environment variable {} does not hold a header value",
                                var.get_ref()
                            ),
                        ));
                    }
                    headers.push((header, secret));
                }
                Some(OtelConfig {
                    endpoint: uri,
                    protocol: o.protocol,
                    service_name: o
                        .service_name
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| "levee-gateway".to_owned()),
                    metric_interval,
                    headers,
                })
            }
        };

        Ok(GatewayConfig {
            listen,
            tls: raw.tls,
            server,
            levee: base,
            fleet: raw.fleet,
            admin_key,
            ops_key,
            targets,
            routes,
            clients,
            rules,
            otel,
        })
    }

    /// Reads each target's key file again (keys rotated on disk).
    pub fn reread_key_files(&mut self) -> Result<(), String> {
        for target in &mut self.targets {
            if let Some(KeySource::File(path)) = &target.key_source {
                target.key = Some(
                    read_key_file(path)
                        .map_err(|m| format!("target `{}`: api_key_file: {m}", target.name))?,
                );
            }
        }
        Ok(())
    }

    /// The target named `name`.
    pub fn target(&self, name: &str) -> Option<&TargetConfig> {
        self.targets.iter().find(|t| t.name == name)
    }
}

/// A target's `probe` checked: a method, a path as a caller would send it,
/// a JSON body; an error names the field (`method`, `path` or `body`).
fn probe_config(raw: &RawProbe) -> Result<ProbeConfig, (&'static str, String)> {
    let method = match &raw.method {
        Some(m) => match http::Method::from_bytes(m.to_ascii_uppercase().as_bytes()) {
            Ok(method) if STANDARD_METHODS.contains(&method) => method,
            _ => return Err(("method", format!("{m:?} is not an HTTP method"))),
        },
        None if raw.body.is_some() => http::Method::POST,
        None => http::Method::GET,
    };
    if !raw.path.starts_with('/') {
        return Err((
            "path",
            format!(
                "{:?} must start with `/`, as a caller's to the gateway does (`/v1/models`)",
                raw.path
            ),
        ));
    }
    let path = raw.path.parse().map_err(|_| {
        (
            "path",
            format!("{:?} is not a valid path and query", raw.path),
        )
    })?;
    if let Some(body) = &raw.body {
        if matches!(method, http::Method::GET | http::Method::HEAD) {
            return Err(("body", format!("a {method} request sends no body")));
        }
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(body) {
            return Err(("body", format!("not JSON: {e}")));
        }
    }
    Ok(ProbeConfig {
        method,
        path,
        body: raw.body.clone(),
    })
}

/// The methods a probe may use.
const STANDARD_METHODS: [http::Method; 5] = [
    http::Method::GET,
    http::Method::HEAD,
    http::Method::POST,
    http::Method::PUT,
    http::Method::OPTIONS,
];

/// A target's `base_url`: `https://host[:port][/prefix]`, without a query.
fn parse_base_url(text: &str, keys: &str) -> Result<Uri, String> {
    let shown = redacted(text);
    let uri: Uri = text
        .parse()
        .map_err(|e| format!("{shown:?} is not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => {
            return Err(format!(
                "{shown:?}: the URL must start with https:// or http://"
            ));
        }
    }
    if uri.authority().is_none_or(|a| a.as_str().contains('@')) {
        return Err(format!(
            "{shown:?}: the URL needs a host, and no credentials (use {keys})"
        ));
    }
    if uri.query().is_some() {
        return Err(format!("{shown:?}: the URL must not carry a query"));
    }
    Ok(uri)
}

/// A URL as an error may quote it: no userinfo, no query (either may hold
/// a key).
fn redacted(text: &str) -> String {
    let (head, rest) = match text.find("://") {
        Some(at) => text.split_at(at + 3),
        None => ("", text),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => format!("…@{}", &authority[at + 1..]),
        None => authority.to_owned(),
    };
    let path = match path.find('?') {
        Some(at) => format!("{}?…", &path[..at]),
        None => path.to_owned(),
    };
    format!("{head}{host}{path}")
}

/// The key in `path`: its first line, trimmed.
fn read_key_file(path: &Path) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let key = text.lines().next().unwrap_or_default().trim();
    if key.is_empty() {
        return Err(format!("{} holds no key", path.display()));
    }
    Ok(Secret::new(key))
}

/// `over` merged into `base`, table by table; `over`'s values win.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_an_error_quotes_has_no_userinfo_and_no_query() {
        for (text, shown) in [
            ("http://user:pw@c:4318/x", "http://…@c:4318/x"),
            ("https://c/v1?key=k", "https://c/v1?…"),
            ("c:4318?api_key=k", "c:4318?…"),
            ("https://api.openai.com", "https://api.openai.com"),
        ] {
            assert_eq!(redacted(text), shown, "{text}");
        }
    }

    fn env() -> HashMap<String, String> {
        HashMap::from([
            ("K".to_owned(), "sk-k".to_owned()),
            ("C1".to_owned(), "sk-c".to_owned()),
            ("C2".to_owned(), "sk-c".to_owned()),
        ])
    }

    const TARGET: &str =
        "[[target]]\nname = \"a\"\nbase_url = \"https://api.openai.com\"\napi_key_env = \"K\"\n";

    fn parse(text: &str) -> Result<GatewayConfig, FileError> {
        GatewayConfig::parse(
            &format!("listen = \"127.0.0.1:4000\"\n{text}"),
            Path::new("."),
            &env(),
        )
    }

    #[test]
    fn rules_come_from_the_file_then_its_rules_file_and_a_mistake_names_its_key() {
        let dir = std::env::temp_dir().join(format!("levee-gw-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("rules.toml"),
            "[[rule]]\nname = \"from-file\"\nphrase = \"余额不足\"\nverdict = \"quota\"\n",
        )
        .unwrap();
        let text = format!(
            "listen = \"127.0.0.1:4000\"\nrules_file = \"rules.toml\"\n{TARGET}\
             [[route]]\nmodel = \"m\"\ntargets = [\"a\"]\n\
             [[rule]]\nname = \"inline\"\nstatus = 418\nverdict = \"throttled\"\n"
        );
        let config = GatewayConfig::parse(&text, &dir, &env()).unwrap();
        let names: Vec<_> = config.rules.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["inline", "from-file"]);

        let err = parse(&format!(
            "{TARGET}[[route]]\nmodel = \"m\"\ntargets = [\"a\"]\n\
             [[rule]]\nname = \"x\"\nstatus = \"4x\"\nverdict = \"quota\"\n"
        ))
        .unwrap_err();
        assert_eq!(err.key(), "rule[0].status");
        assert_eq!(err.line(), Some(11));
        assert!(err.message().contains("expected a status"), "{err}");

        let missing = GatewayConfig::parse(&text.replace("rules.toml", "nope.toml"), &dir, &env())
            .unwrap_err();
        assert_eq!(missing.key(), "rules_file");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_routes_levee_is_the_gateways_with_its_own_on_top() {
        let config = parse(&format!(
            "{TARGET}[levee.retry]\nmax_attempts = 2\n[levee.breaker]\nthreshold = 7\n\
             [[route]]\nmodel = \"m\"\ntargets = [\"a\"]\n[route.levee.breaker]\nthreshold = 3\n\
             [[route]]\nmodel = \"n\"\ntargets = [\"a\"]\n"
        ))
        .unwrap();
        let [m, n] = [&config.routes[0].levee, &config.routes[1].levee];
        assert_eq!((m.retry.max_attempts, n.retry.max_attempts), (2, 2));
        let threshold =
            |l: &LeveeConfig| serde_json::to_value(&l.breaker).unwrap()["threshold"].clone();
        assert_eq!((threshold(m), threshold(n)), (3.into(), 7.into()));
        assert_eq!(config.targets[0].auth, AuthStyle::Bearer);
        assert_eq!(format!("{:?}", config.targets[0].key), "Some(Secret(..))");
    }

    #[test]
    fn a_target_url_with_credentials_a_query_or_another_scheme_is_refused() {
        for (url, says) in [
            ("https://user:sk-secret@api.openai.com", "no credentials"),
            ("https://api.openai.com/v1?key=x", "query"),
            ("ftp://api.openai.com", "https://"),
            ("not a url", "not a URL"),
        ] {
            let err = parse(&format!(
                "[[target]]\nname = \"a\"\nbase_url = \"{url}\"\n[[route]]\nmodel = \"m\"\ntargets = [\"a\"]\n"
            ))
            .unwrap_err();
            assert_eq!(err.key(), "target[0].base_url");
            assert!(err.message().contains(says), "{url}: {err}");
        }
    }

    #[test]
    fn names_and_keys_must_be_told_apart() {
        let err = parse(&format!("{TARGET}{TARGET}")).unwrap_err();
        assert_eq!((err.key(), err.line()), ("target[1].name", Some(7)));
        let err = parse(&format!(
            "{TARGET}[[route]]\nmodel = \"m\"\ntargets = [\"a\"]\n\
             [[client]]\nname = \"x\"\nkey_env = \"C1\"\n[[client]]\nname = \"y\"\nkey_env = \"C2\"\n"
        ))
        .unwrap_err();
        assert!(err.message().contains("same key"), "{err}");
        assert!(!err.to_string().contains("sk-c"), "{err}");
    }

    #[test]
    fn azure_takes_its_key_header_and_a_default_version_and_others_refuse_azure_keys() {
        let config = parse(
            "[[target]]\nname = \"az\"\nbase_url = \"https://r.openai.azure.com\"\ndialect = \"azure\"\napi_key_env = \"K\"\n",
        )
        .unwrap();
        let t = &config.targets[0];
        assert_eq!(
            (t.auth, t.api_version.as_str()),
            (AuthStyle::ApiKey, DEFAULT_AZURE_API_VERSION)
        );
        let err = parse(&format!("{TARGET}deployment = \"d\"\n")).unwrap_err();
        assert_eq!(err.key(), "target[0].deployment");
    }
}
