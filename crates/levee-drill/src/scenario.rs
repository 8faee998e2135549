//! Scenario files: the TOML a user writes down (accounts, load, faults), parsed
//! and validated with errors naming the field.
//!
//! A scenario's `[levee]` table is the library's own configuration,
//! [`tower_levee::config::LeveeConfig`], with the same keys, value forms and
//! defaults as a service's file and the gateway's `[levee]`, so a table
//! proven here pastes into either unchanged. The drill departs from the
//! library's defaults where a key is not written, and only there:
//!
//! | key | the drill, when unset | the library |
//! |---|---|---|
//! | `bulkhead.max_concurrent` | 256 per target ([`DRILL_MAX_CONCURRENT`]) | 1024 |
//! | `retry.timeout` | `load.timeout` | none |
//! | `retry.attempt_timeout` | a third of `load.timeout` | none |
//!
//! The first is filled in when the file is read (so [`Scenario::levee`]
//! holds it, and `levee-drill tune` prints it); the timeouts follow
//! `[load]` and are filled in when the stack is built
//! ([`Scenario::retry_config`]). The drill names each target's bulkhead
//! after the target (`bulkhead.name` is not read) and seeds the breaker's
//! and the retry layer's jitter with the scenario's `seed`.

use std::fmt;
use std::time::Duration;

use levee_core::classify::{Rule, Rules};
use serde::Deserialize;
use tower_levee::config::{LeveeConfig, RetryConfig};

/// `bulkhead.max_concurrent` of a scenario whose `[levee.bulkhead]` names
/// none: high enough that no scenario's load queues on it, so a drill
/// measures the breaker, gate and park unless it sets a bulkhead itself.
pub const DRILL_MAX_CONCURRENT: usize = 256;

/// The stacks a scenario can compare, in report order: the baselines, the
/// peers users would otherwise pick ([`crate::peers`]), then Levee.
/// `levee-fleet` is Levee with its replicas sharing decisions through the
/// fleet store (a scenario with a `[fleet]` table runs it beside `levee`,
/// whose replicas share nothing).
pub const STACKS: [&str; 7] = [
    "unprotected",
    "naive",
    "tower-resilience",
    "failsafe",
    "gateway-router",
    "levee",
    "levee-fleet",
];

/// The stacks every scenario runs unless it names its own: all but Levee's.
const BASELINES_AND_PEERS: [&str; 5] = [
    "unprotected",
    "naive",
    "tower-resilience",
    "failsafe",
    "gateway-router",
];

/// The fault kinds a scenario can script.
pub const FAULT_KINDS: [&str; 13] = [
    "outage",
    "overload",
    "hang",
    "connect_error",
    "brownout",
    "throttle",
    "spend_cap",
    "revoke_key",
    "midstream_error",
    "flap",
    "slow_first_token",
    "store_outage",
    // A scripted answer: `status` and `body` as written (an unknown
    // provider's error, to teach Levee with a `[[rule]]`).
    "answer",
];

/// The dialects the simulated provider speaks.
pub const DIALECTS: [&str; 5] = ["openai", "azure", "anthropic", "gemini", "bedrock"];

/// A parsed, validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The scenario's name, used in reports.
    pub name: String,
    /// How long traffic arrives.
    pub duration: Duration,
    /// Seeds arrivals, latency jitter and every stack's jitter.
    pub seed: u64,
    /// The stacks to run, in report order.
    pub stacks: Vec<String>,
    /// The offered load.
    pub load: Load,
    /// The targets, in failover order.
    pub targets: Vec<Target>,
    /// The scripted faults.
    pub faults: Vec<Fault>,
    /// The Levee stack's configuration: the scenario's `[levee]` table,
    /// with [`DRILL_MAX_CONCURRENT`] where it names no
    /// `bulkhead.max_concurrent`.
    pub levee: LeveeConfig,
    /// Replicas of the service sharing the load, if more than one process.
    pub fleet: Option<FleetSpec>,
    /// Classification rules the Levee stacks check before the built-in
    /// ones: the scenario's `[[rule]]` tables.
    pub rules: Rules,
    /// The same `[[rule]]` tables as TOML, for a gateway run `--through`.
    pub rules_toml: String,
}

/// A fleet of replicas: each runs its own copy of every stack over the same
/// providers, and arrivals go to them in turn, as a load balancer's
/// round robin would.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    /// How many replicas (1 to 64).
    pub replicas: u32,
    /// One-way latency of the fleet store (in virtual time the simulated
    /// store with Redis's semantics).
    pub latency: Duration,
    /// When a replica adopts another's breaker open.
    pub policy: levee_redis::BreakerPolicy,
    /// How often each replica reads the store back.
    pub sweep_every: Duration,
    /// The probe lease's life (`None`: each replica probes on its own).
    pub probe_lease: Option<Duration>,
    /// How long a replica's failure streak counts (`None`: not shared).
    pub share_failures: Option<Duration>,
    /// Whether the replicas share the providers' rate limits.
    pub share_pacing: bool,
}

impl Scenario {
    /// The number of replicas (1 without a `[fleet]`).
    pub fn replicas(&self) -> usize {
        self.fleet.as_ref().map_or(1, |f| f.replicas as usize)
    }

    /// The retry layer's settings the drill runs: `[levee.retry]`, with the
    /// caller's deadline (`load.timeout`) and a third of it per attempt
    /// where the table names none.
    pub fn retry_config(&self) -> RetryConfig {
        let mut retry = self.levee.retry.clone();
        retry.timeout.get_or_insert(self.load.timeout);
        retry.attempt_timeout.get_or_insert(self.load.timeout / 3);
        retry
    }
}

/// The offered load.
#[derive(Clone, Debug)]
pub struct Load {
    /// Requests per second (Poisson arrivals).
    pub rate: f64,
    /// The model every request names.
    pub model: String,
    /// Whether responses stream (SSE).
    pub stream: bool,
    /// The caller's overall deadline per request.
    pub timeout: Duration,
    /// Tokens each request counts against a token limit: its prompt and
    /// its `max_tokens` (0: token limits are not simulated).
    pub tokens: u64,
}

/// One target: an account (or deployment, region) at one provider.
#[derive(Clone, Debug)]
pub struct Target {
    /// The target's name (also its failure domain).
    pub name: String,
    /// Which provider's status codes, headers and bodies it answers with.
    pub dialect: String,
    /// The account: the rate limit and spend cap are per account (× model).
    pub account: String,
    /// Normal latency of a call.
    pub latency: Duration,
    /// Requests per minute per account × model (0 = unlimited).
    pub rpm: u32,
    /// Tokens per minute per account × model (0 = unlimited; needs
    /// `load.tokens`).
    pub tpm: u64,
    /// Requests until the spend cap is exhausted (0 = none).
    pub spend_cap: u64,
    /// The Levee stack's failover pool, if any: targets naming the same
    /// pool share traffic by what each has left.
    pub pool: Option<String>,
}

/// One scripted fault.
#[derive(Clone, Debug)]
pub struct Fault {
    /// A target's name, or `*` for every target.
    pub target: String,
    /// One of [`FAULT_KINDS`].
    pub kind: String,
    /// When the fault starts, from the scenario's start.
    pub from: Duration,
    /// When it ends.
    pub to: Duration,
    /// The status code, for kinds that answer with one.
    pub status: Option<u16>,
    /// The latency multiplier of a brownout.
    pub factor: f64,
    /// The half-period of a flap.
    pub period: Duration,
    /// How long after the head a slow first token comes.
    pub delay: Duration,
    /// The body of an `answer` (JSON, sent as `application/json`).
    pub body: Option<String>,
}

impl Fault {
    /// Whether this fault applies to `target` at `t` from the start.
    pub fn active(&self, target: &str, t: Duration) -> bool {
        if !(self.target == "*" || self.target == target) || t < self.from || t >= self.to {
            return false;
        }
        if self.kind == "flap" {
            let half = self.period.as_nanos().max(1);
            return ((t - self.from).as_nanos() / half).is_multiple_of(2);
        }
        true
    }
}

/// A scenario that failed to parse or validate, naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

fn err(field: &str, msg: impl fmt::Display) -> ScenarioError {
    ScenarioError(format!("`{field}`: {msg}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    duration: String,
    #[serde(default)]
    seed: u64,
    stacks: Option<Vec<String>>,
    load: RawLoad,
    #[serde(default)]
    target: Vec<RawTarget>,
    #[serde(default)]
    fault: Vec<RawFault>,
    #[serde(default)]
    levee: LeveeConfig,
    fleet: Option<RawFleet>,
    #[serde(default)]
    rule: Vec<Rule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFleet {
    replicas: u32,
    store: Option<RawStores>,
    latency: Option<String>,
    policy: Option<String>,
    sweep_every: Option<String>,
    probe_lease: Option<String>,
    share_failures: Option<String>,
    share_pacing: Option<bool>,
}

/// `store = "redis"`, or a list to compare: `["none", "redis"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawStores {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    rate: f64,
    model: String,
    #[serde(default)]
    stream: bool,
    timeout: Option<String>,
    #[serde(default)]
    tokens: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    name: String,
    dialect: String,
    account: Option<String>,
    latency: Option<String>,
    #[serde(default)]
    rpm: u32,
    #[serde(default)]
    tpm: u64,
    #[serde(default)]
    spend_cap: u64,
    pool: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    target: String,
    kind: String,
    from: Option<String>,
    to: Option<String>,
    status: Option<u16>,
    factor: Option<f64>,
    period: Option<String>,
    delay: Option<String>,
    body: Option<String>,
}

fn dur(field: &str, s: &str) -> Result<Duration, ScenarioError> {
    humantime::parse_duration(s).map_err(|e| {
        err(
            field,
            format!("{s:?} is not a duration ({e}); write e.g. \"250ms\", \"30s\", \"2m\""),
        )
    })
}

impl Scenario {
    /// Parses and validates a scenario from TOML text.
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        // The key, its line and column: `` `levee.breaker.cooldown` (line
        // 10, column 12): .. ``, on one line.
        let raw: RawScenario =
            tower_levee::config::from_toml(text).map_err(|e| ScenarioError(e.to_string()))?;
        let duration = dur("duration", &raw.duration)?;
        if duration.is_zero() {
            return Err(err("duration", "must be above zero"));
        }
        let fleet = raw.fleet.map(fleet_spec).transpose()?;
        let stacks = match raw.stacks {
            Some(stacks) => stacks,
            None => {
                // Levee with each store the fleet compares; without a
                // fleet, one process and nothing to share.
                let stores = fleet
                    .as_ref()
                    .map_or(vec!["none"], |(_, stores)| stores.clone());
                let mut stacks: Vec<String> = BASELINES_AND_PEERS
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect();
                for store in stores {
                    stacks.push(
                        if store == "redis" {
                            "levee-fleet"
                        } else {
                            "levee"
                        }
                        .to_owned(),
                    );
                }
                stacks
            }
        };
        let fleet = fleet.map(|(spec, _)| spec);
        for (i, s) in stacks.iter().enumerate() {
            if !STACKS.contains(&s.as_str()) {
                return Err(err(
                    &format!("stacks[{i}]"),
                    format!("unknown stack {s:?}; expected one of {STACKS:?}"),
                ));
            }
            if s == "levee-fleet" && fleet.is_none() {
                return Err(err(
                    &format!("stacks[{i}]"),
                    "`levee-fleet` needs a [fleet] table (replicas and their store)",
                ));
            }
        }
        if !(raw.load.rate > 0.0 && raw.load.rate.is_finite()) {
            return Err(err(
                "load.rate",
                format!(
                    "must be a positive number of requests/s, got {}",
                    raw.load.rate
                ),
            ));
        }
        let timeout = match &raw.load.timeout {
            Some(t) => dur("load.timeout", t)?,
            None => Duration::from_secs(30),
        };
        if timeout.is_zero() {
            return Err(err("load.timeout", "must be above zero"));
        }
        if raw.target.is_empty() {
            return Err(err("target", "at least one [[target]] is required"));
        }
        let mut targets = Vec::new();
        for (i, t) in raw.target.into_iter().enumerate() {
            if !DIALECTS.contains(&t.dialect.as_str()) {
                return Err(err(
                    &format!("target[{i}].dialect"),
                    format!(
                        "unknown dialect {:?}; expected one of {DIALECTS:?}",
                        t.dialect
                    ),
                ));
            }
            if t.name.is_empty()
                || t.name == "*"
                || targets.iter().any(|o: &Target| o.name == t.name)
            {
                return Err(err(
                    &format!("target[{i}].name"),
                    format!("{:?} must be non-empty, not \"*\", and unique", t.name),
                ));
            }
            let latency = match &t.latency {
                Some(l) => dur(&format!("target[{i}].latency"), l)?,
                None => Duration::from_millis(400),
            };
            targets.push(Target {
                account: t.account.unwrap_or_else(|| t.name.clone()),
                name: t.name,
                dialect: t.dialect,
                latency,
                rpm: t.rpm,
                tpm: t.tpm,
                pool: t.pool,
                spend_cap: t.spend_cap,
            });
        }
        let mut faults = Vec::new();
        for (i, f) in raw.fault.into_iter().enumerate() {
            let field = |k: &str| format!("fault[{i}].{k}");
            if f.target != "*" && !targets.iter().any(|t| t.name == f.target) {
                return Err(err(
                    &field("target"),
                    format!("no target named {:?}", f.target),
                ));
            }
            if !FAULT_KINDS.contains(&f.kind.as_str()) {
                return Err(err(
                    &field("kind"),
                    format!("unknown kind {:?}; expected one of {FAULT_KINDS:?}", f.kind),
                ));
            }
            if f.kind == "answer" && f.status.is_none() {
                return Err(err(
                    &field("status"),
                    "an answer needs the status to answer with (and a body)",
                ));
            }
            if f.body.is_some() && f.kind != "answer" {
                return Err(err(&field("body"), "only an `answer` fault has a body"));
            }
            if f.kind == "store_outage" && (fleet.is_none() || f.target != "*") {
                return Err(err(
                    &field("kind"),
                    "a store_outage takes the fleet store away: it needs a [fleet] table and target = \"*\"",
                ));
            }
            let from = f
                .from
                .as_deref()
                .map_or(Ok(Duration::ZERO), |s| dur(&field("from"), s))?;
            let to =
                f.to.as_deref()
                    .map_or(Ok(duration), |s| dur(&field("to"), s))?;
            if to <= from {
                return Err(err(
                    &field("to"),
                    format!("must be after `from` ({from:?}), got {to:?}"),
                ));
            }
            if let Some(s) = f.status
                && !(100..=599).contains(&s)
            {
                return Err(err(&field("status"), format!("{s} is not an HTTP status")));
            }
            let factor = f.factor.unwrap_or(10.0);
            if !(factor >= 1.0 && factor.is_finite()) {
                return Err(err(
                    &field("factor"),
                    format!("must be at least 1, got {factor}"),
                ));
            }
            let period = f
                .period
                .as_deref()
                .map_or(Ok(Duration::from_secs(5)), |s| dur(&field("period"), s))?;
            if period.is_zero() {
                return Err(err(&field("period"), "must be above zero"));
            }
            let delay = f
                .delay
                .as_deref()
                .map_or(Ok(Duration::from_secs(20)), |s| dur(&field("delay"), s))?;
            faults.push(Fault {
                target: f.target,
                kind: f.kind,
                from,
                to,
                status: f.status,
                factor,
                period,
                delay,
                body: f.body,
            });
        }
        let mut levee = raw.levee;
        if !writes_max_concurrent(text) {
            levee.bulkhead.max_concurrent = DRILL_MAX_CONCURRENT;
        }
        Ok(Scenario {
            name: raw.name,
            duration,
            seed: raw.seed,
            stacks,
            load: Load {
                rate: raw.load.rate,
                model: raw.load.model,
                stream: raw.load.stream,
                timeout,
                tokens: raw.load.tokens,
            },
            targets,
            faults,
            levee,
            fleet,
            rules: Rules::new(raw.rule).map_err(|e| err("rule", e))?,
            rules_toml: rules_toml(text),
        })
    }
}

/// The `[[rule]]` tables of a scenario's text, as TOML (empty without any).
fn rules_toml(text: &str) -> String {
    let Ok(mut table) = toml::from_str::<toml::Table>(text) else {
        return String::new();
    };
    match table.remove("rule") {
        Some(rules) => toml::to_string(&toml::Table::from_iter([("rule".to_owned(), rules)]))
            .unwrap_or_default(),
        None => String::new(),
    }
}

/// Whether the scenario writes `levee.bulkhead.max_concurrent` (the
/// library's config holds a plain number, the same whether written or not).
fn writes_max_concurrent(text: &str) -> bool {
    text.parse::<toml::Table>().is_ok_and(|doc| {
        doc.get("levee")
            .and_then(|l| l.get("bulkhead"))
            .and_then(|b| b.get("max_concurrent"))
            .is_some()
    })
}

/// The fleet's settings, and the stores it compares.
fn fleet_spec(raw: RawFleet) -> Result<(FleetSpec, Vec<&'static str>), ScenarioError> {
    if !(1..=64).contains(&raw.replicas) {
        return Err(err(
            "fleet.replicas",
            format!("must be within 1..=64, got {}", raw.replicas),
        ));
    }
    let named = match raw.store {
        None => vec!["none".to_owned(), "redis".to_owned()],
        Some(RawStores::One(s)) => vec![s],
        Some(RawStores::Many(v)) => v,
    };
    let mut stores = Vec::new();
    for s in &named {
        let store = match s.as_str() {
            "none" => "none",
            "redis" => "redis",
            other => {
                return Err(err(
                    "fleet.store",
                    format!("unknown store {other:?}; expected \"none\" or \"redis\""),
                ));
            }
        };
        if !stores.contains(&store) {
            stores.push(store);
        }
    }
    if stores.is_empty() {
        return Err(err("fleet.store", "name at least one store"));
    }
    let latency = match &raw.latency {
        Some(l) => dur("fleet.latency", l)?,
        None => Duration::from_millis(1),
    };
    let policy = match &raw.policy {
        Some(p) => p.parse().map_err(|e: String| err("fleet.policy", e))?,
        None => levee_redis::BreakerPolicy::default(),
    };
    let sweep_every = match &raw.sweep_every {
        Some(s) => dur("fleet.sweep_every", s)?,
        None => Duration::from_secs(1),
    };
    if !(Duration::from_millis(10)..=Duration::from_secs(3600)).contains(&sweep_every) {
        return Err(err(
            "fleet.sweep_every",
            format!("must be within 10ms..=1h, got {sweep_every:?}"),
        ));
    }
    let optional = |field, value: &Option<String>, default| {
        levee_redis::duration_or_off(field, value.as_deref(), default)
            .map_err(|e| err(e.field, e.message))
    };
    let probe_lease = optional(
        "fleet.probe_lease",
        &raw.probe_lease,
        levee_redis::DEFAULT_PROBE_LEASE,
    )?;
    let share_failures = optional(
        "fleet.share_failures",
        &raw.share_failures,
        levee_redis::DEFAULT_FAILURE_MEMORY,
    )?;
    levee_redis::Fleet::builder()
        .probe_lease(probe_lease)
        .share_failures(share_failures)
        .check()
        .map_err(|e| err(e.field, e.message))?;
    Ok((
        FleetSpec {
            replicas: raw.replicas,
            latency,
            policy,
            sweep_every,
            probe_lease,
            share_failures,
            share_pacing: raw.share_pacing.unwrap_or(true),
        },
        stores,
    ))
}
