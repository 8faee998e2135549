//! The report: the `--json` object, and the terminal table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::outcome::{Fail, Record, TransitionRecord};
use crate::run::StackRun;
use crate::scenario::Scenario;

/// One scenario's report: `{"scenario":..,"results":[..]}`.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// The scenario's name.
    pub scenario: String,
    /// One result per stack, in the scenario's order.
    pub results: Vec<StackResult>,
}

/// Failed requests by cause: exactly the eight keys of the contract.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Failed {
    /// Refused by an open breaker.
    pub circuit_open: u64,
    /// Refused by a gate or answered with a throttling 429.
    pub throttled: u64,
    /// Refused by a parked account.
    pub parked: u64,
    /// Refused by a full bulkhead.
    pub bulkhead_full: u64,
    /// The retry budget refused the retry.
    pub budget_exhausted: u64,
    /// Every target refused, for different reasons.
    pub no_target: u64,
    /// The provider's last answer was an error.
    pub upstream: u64,
    /// The caller's deadline passed.
    pub timeout: u64,
}

impl Failed {
    /// The sum of every cause.
    pub fn total(&self) -> u64 {
        self.circuit_open
            + self.throttled
            + self.parked
            + self.bulkhead_full
            + self.budget_exhausted
            + self.no_target
            + self.upstream
            + self.timeout
    }

    fn add(&mut self, f: Fail) {
        let slot = match f {
            Fail::CircuitOpen => &mut self.circuit_open,
            Fail::Throttled => &mut self.throttled,
            Fail::Parked => &mut self.parked,
            Fail::BulkheadFull => &mut self.bulkhead_full,
            Fail::BudgetExhausted => &mut self.budget_exhausted,
            Fail::NoTarget => &mut self.no_target,
            Fail::Upstream => &mut self.upstream,
            Fail::Timeout => &mut self.timeout,
        };
        *slot += 1;
    }
}

/// Latency percentiles in milliseconds, over every request (succeeded or failed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
}

/// One stack's result.
#[derive(Clone, Debug, Serialize)]
pub struct StackResult {
    /// `unprotected`, `naive` or `levee`.
    pub stack: String,
    /// Requests offered.
    pub requests: u64,
    /// Requests that got a successful answer.
    pub succeeded: u64,
    /// Failed requests by cause; `requests = succeeded + Σ failed`.
    pub failed: Failed,
    /// Calls that reached the provider.
    pub upstream_calls: u64,
    /// Calls that reached the provider, per target.
    pub upstream_calls_by_target: BTreeMap<String, u64>,
    /// Calls the provider did not answer with a success (wasted calls).
    pub upstream_rejected_calls: u64,
    /// Calls the provider answered with a throttle (a 429 with its wait).
    pub upstream_throttled_calls: u64,
    /// Calls that reached an account whose spend cap was exhausted.
    pub upstream_capped_calls: u64,
    /// Calls that were hedges: copies of late first calls sent to another
    /// target.
    pub upstream_hedged_calls: u64,
    /// Calls that were shadow or active probes: copies of requests served
    /// elsewhere, or the user's probe requests, sent to a target whose
    /// breaker is open (counted among the calls above).
    pub upstream_probe_calls: u64,
    /// With a `[fleet]`: each replica's share of the requests (the numbers
    /// above are the fleet's totals).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaResult>,
    /// Succeeded requests served by a target other than the first, over succeeded requests.
    pub fallback_share: f64,
    /// Latency percentiles.
    pub latency_ms: Latency,
    /// Every transition of every breaker, gate and park.
    pub transitions: Vec<TransitionRecord>,
    /// Time from the first fault's start (or the first spend cap reached) to
    /// the first mechanism reacting on its target.
    #[serde(rename = "detect_ms", serialize_with = "millis")]
    pub detect: Option<Duration>,
    /// Time from the first fault's end to the first request served by its target.
    #[serde(rename = "recovery_ms", serialize_with = "millis")]
    pub recover: Option<Duration>,
    /// The per-request records, for the timeline picture.
    #[serde(skip)]
    pub records: Vec<Record>,
}

/// A time as whole milliseconds, `null` when there is none.
fn millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .serialize(s)
}

/// One replica's requests, in a fleet's result.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplicaResult {
    /// The replica's index.
    pub replica: usize,
    /// Requests the load balancer gave it.
    pub requests: u64,
    /// Of them, answered with a success.
    pub succeeded: u64,
    /// Failed ones by cause.
    pub failed: Failed,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl StackResult {
    /// Summarizes a run.
    pub fn from_run(sc: &Scenario, run: StackRun) -> StackResult {
        let mut failed = Failed::default();
        let mut succeeded = 0u64;
        let mut fallback = 0u64;
        for r in &run.records {
            match r.result {
                Ok(i) => {
                    succeeded += 1;
                    if i != 0 {
                        fallback += 1;
                    }
                }
                Err(f) => failed.add(f),
            }
        }
        let mut lat: Vec<u64> = run
            .records
            .iter()
            .map(|r| r.latency.as_millis() as u64)
            .collect();
        lat.sort_unstable();
        let (detect, recover) = timings(sc, &run);
        let mut replicas =
            vec![ReplicaResult::default(); if sc.fleet.is_some() { sc.replicas() } else { 0 }];
        for (i, r) in replicas.iter_mut().enumerate() {
            r.replica = i;
        }
        for rec in &run.records {
            if let Some(r) = replicas.get_mut(rec.replica) {
                r.requests += 1;
                match rec.result {
                    Ok(_) => r.succeeded += 1,
                    Err(f) => r.failed.add(f),
                }
            }
        }
        StackResult {
            stack: run.stack,
            requests: run.records.len() as u64,
            succeeded,
            failed,
            upstream_calls: run.calls.by_target.values().sum(),
            upstream_calls_by_target: sc
                .targets
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        run.calls.by_target.get(&t.name).copied().unwrap_or(0),
                    )
                })
                .collect(),
            upstream_rejected_calls: run.calls.rejected,
            upstream_throttled_calls: run.calls.throttled,
            upstream_capped_calls: run.calls.capped,
            upstream_hedged_calls: run.calls.hedged,
            upstream_probe_calls: run.calls.probes,
            replicas,
            fallback_share: if succeeded == 0 {
                0.0
            } else {
                ((fallback as f64 / succeeded as f64) * 10_000.0).round() / 10_000.0
            },
            latency_ms: Latency {
                p50: percentile(&lat, 0.50),
                p99: percentile(&lat, 0.99),
            },
            transitions: run.transitions,
            detect,
            recover,
            records: run.records,
        }
    }

    /// Succeeded over requests.
    pub fn success_rate(&self) -> f64 {
        if self.requests == 0 {
            1.0
        } else {
            self.succeeded as f64 / self.requests as f64
        }
    }

    /// Breaker transitions to `open`.
    pub fn breaker_opens(&self) -> usize {
        self.transitions
            .iter()
            .filter(|t| t.mechanism == "breaker" && t.to == "open")
            .count()
    }
}

/// The first scripted fault of a provider (a store outage is the fleet's):
/// the one `detect` and `recover` are timed from.
fn first_provider_fault(sc: &Scenario) -> Option<&crate::scenario::Fault> {
    sc.faults.iter().find(|f| f.kind != "store_outage")
}

/// When the clock of [`StackResult::recover`] starts: the end of the first
/// provider fault, if it ends before the run does. `None`: nothing to
/// recover from, and `recover` is always `None`.
pub fn recovery_from(sc: &Scenario) -> Option<Duration> {
    first_provider_fault(sc)
        .map(|f| f.to)
        .filter(|to| *to < sc.duration)
}

fn timings(sc: &Scenario, run: &StackRun) -> (Option<Duration>, Option<Duration>) {
    // The first fault of a provider; else the first spend cap reached (no end).
    let (target, from, to) = match first_provider_fault(sc) {
        Some(f) => (f.target.as_str(), f.from, f.to),
        None => match run.calls.cap_reached.iter().min_by_key(|(_, at)| **at) {
            Some((name, at)) => (name.as_str(), *at, sc.duration),
            None => return (None, None),
        },
    };
    let fault = crate::scenario::Fault {
        target: target.to_owned(),
        kind: String::new(),
        from,
        to,
        status: None,
        factor: 1.0,
        period: Duration::from_secs(1),
        delay: Duration::ZERO,
        body: None,
    };
    let on_target = |name: &str| fault.target == "*" || fault.target == name;
    let from_ms = fault.from.as_millis() as u64;
    let detect = run
        .transitions
        .iter()
        .find(|t| {
            t.t_ms >= from_ms
                && on_target(&t.target)
                && matches!(t.to.as_str(), "open" | "gated" | "parked")
        })
        .map(|t| Duration::from_millis(t.t_ms - from_ms));
    let recover = if fault.to >= sc.duration {
        None
    } else {
        run.records
            .iter()
            .filter(|r| r.at >= fault.to)
            .find(|r| matches!(r.result, Ok(i) if on_target(&sc.targets[i].name)))
            .map(|r| r.at + r.latency - fault.to)
    };
    (detect, recover)
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.1}s", d.as_secs_f64()))
}

/// The terminal table of one scenario.
pub fn table(report: &ScenarioReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scenario: {}", report.scenario);
    let _ = writeln!(
        s,
        "  {:<16} {:>8} {:>8} {:>9} {:>7} {:>9} {:>7} {:>7} {:>6} {:>8}  failures",
        "stack",
        "requests",
        "success",
        "upstream",
        "wasted",
        "fallback",
        "p50",
        "p99",
        "detect",
        "recover"
    );
    for r in &report.results {
        let fails: Vec<String> = Fail::ALL
            .iter()
            .filter_map(|f| {
                let n = match f {
                    Fail::CircuitOpen => r.failed.circuit_open,
                    Fail::Throttled => r.failed.throttled,
                    Fail::Parked => r.failed.parked,
                    Fail::BulkheadFull => r.failed.bulkhead_full,
                    Fail::BudgetExhausted => r.failed.budget_exhausted,
                    Fail::NoTarget => r.failed.no_target,
                    Fail::Upstream => r.failed.upstream,
                    Fail::Timeout => r.failed.timeout,
                };
                (n > 0).then(|| format!("{}={n}", f.as_str()))
            })
            .collect();
        let _ = writeln!(
            s,
            "  {:<16} {:>8} {:>7.2}% {:>9} {:>7} {:>8.1}% {:>5}ms {:>5}ms {:>6} {:>8}  {}",
            r.stack,
            r.requests,
            r.success_rate() * 100.0,
            r.upstream_calls,
            r.upstream_rejected_calls,
            r.fallback_share * 100.0,
            r.latency_ms.p50,
            r.latency_ms.p99,
            secs(r.detect),
            secs(r.recover),
            if fails.is_empty() {
                "-".into()
            } else {
                fails.join(" ")
            }
        );
        for (what, calls) in [
            ("hedges", r.upstream_hedged_calls),
            ("probes (shadow and active)", r.upstream_probe_calls),
        ] {
            if calls > 0 {
                let _ = writeln!(
                    s,
                    "  {:<16} {what}: {calls} ({:.1}% of requests)",
                    "",
                    calls as f64 * 100.0 / r.requests.max(1) as f64
                );
            }
        }
        if !r.replicas.is_empty() {
            let served: Vec<String> = r
                .replicas
                .iter()
                .map(|x| {
                    let rate = if x.requests == 0 {
                        1.0
                    } else {
                        x.succeeded as f64 / x.requests as f64
                    };
                    format!("{:.1}%", rate * 100.0)
                })
                .collect();
            let _ = writeln!(
                s,
                "  {:<16} {} replica{}, upstream 429s {}, calls to capped accounts {}; served by replica: {}",
                "",
                r.replicas.len(),
                if r.replicas.len() == 1 { "" } else { "s" },
                r.upstream_throttled_calls,
                r.upstream_capped_calls,
                served.join(" ")
            );
        }
    }
    s
}

/// One line per scenario: each stack's success rate and upstream calls.
pub fn summary(reports: &[ScenarioReport]) -> String {
    let mut s = String::new();
    let stacks: Vec<&str> = crate::scenario::STACKS
        .into_iter()
        .filter(|st| {
            reports
                .iter()
                .any(|r| r.results.iter().any(|x| x.stack == *st))
        })
        .collect();
    let _ = writeln!(
        s,
        "| scenario | {} |",
        stacks
            .iter()
            .map(|st| format!("{st}: served (upstream calls)"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(s, "|---|{}", "---|".repeat(stacks.len()));
    for r in reports {
        let cells: Vec<String> = stacks
            .iter()
            .map(|st| {
                r.results.iter().find(|x| x.stack == *st).map_or_else(
                    || "-".to_owned(),
                    |x| format!("{:.2}% ({})", x.success_rate() * 100.0, x.upstream_calls),
                )
            })
            .collect();
        let _ = writeln!(s, "| {} | {} |", r.scenario, cells.join(" | "));
    }
    s
}

/// Every stack of every scenario, one row each: served, upstream calls,
/// wasted calls, p99 and recovery (the README's comparison table).
pub fn comparison(reports: &[ScenarioReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| scenario | stack | served | upstream calls | wasted calls | p99 | recovery |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|");
    for r in reports {
        for x in &r.results {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2}% | {} | {} | {} ms | {} |",
                r.scenario,
                x.stack,
                x.success_rate() * 100.0,
                x.upstream_calls,
                x.upstream_rejected_calls,
                x.latency_ms.p99,
                secs(x.recover)
            );
        }
    }
    s
}
