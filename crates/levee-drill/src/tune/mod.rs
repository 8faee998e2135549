//! `levee-drill tune`: search a scenario's `[levee]` settings for the best
//! trade-offs of served requests, upstream calls, recovery time and p99
//! latency.
//!
//! # What is searched
//!
//! Sixteen keys of the `[levee]` table: the breaker's tripping rule (1 to 12
//! consecutive failures, or a share of a 10 s to 60 s rolling window), its
//! cool-off schedule (base 1 s to 1 min, multiplier, cap, jitter, and the
//! held cool-offs before growth), probes per half-open round, the throttle
//! gate's default wait and cap, the retry attempts and budget ratio, the
//! bulkhead size, and the failover's shadow probes (off, or every 1 s to
//! 5 s, at a share of 5% to 50%) and hedging (off, or 2% to 10% of
//! successes, with a demotion of 0.5 s to 5 s). Every other key of the scenario's `[levee]` (a
//! `slow_call`, pacing, timeouts) is kept as the scenario sets it.
//!
//! # How
//!
//! The grid has about 3.8 × 10¹⁰ points, so it is sampled, not walked. Half
//! of the budget goes to points drawn uniformly from the grid: random search
//! finds good regions of a space where only a few of the dimensions matter
//! for a given scenario far sooner than a grid does (Bergstra & Bengio,
//! "Random Search for Hyper-Parameter Optimization", JMLR 13, 2012,
//! <https://www.jmlr.org/papers/v13/bergstra12a.html>), and which ones
//! matter differs per scenario (the gate for a throttle storm, the cool-off
//! for an outage). The other half refines the frontier found so far: in
//! rounds of eight, each frontier setting in turn gets a neighbour (one or
//! two keys moved one step along their list), the local search step of
//! multi-objective methods such as Pareto local search (Paquete,
//! Chiarandini & Stützle, "Pareto Local Optimum Sets in the Biobjective
//! Traveling Salesman Problem", 2004). A point
//! already evaluated is never run twice. Rounds are fixed at eight points,
//! not at the number of cores, so the search is the same on every machine.
//!
//! # Scoring
//!
//! Each point runs the scenario's Levee stack once per seed (default 3:
//! the `--seed`, by default the scenario's own, and the next ones), in
//! virtual time, and is scored on the means: served % (higher is better),
//! upstream calls, recovery time and p99 latency (lower). One lucky draw of arrivals and
//! jitter cannot win alone. The means are rounded to what is printed
//! (0.01 %, 0.1 call, 0.1 s, 10 ms) before settings are compared, so a printed
//! tie is a tie: the setting evaluated first is kept, the baseline (the
//! scenario's own settings, evaluated first) ahead of every other.
//! Recovery is timed as the drill's report does it (the first provider
//! fault's end to the first request that target serves again); a seed
//! whose target never serves again counts the rest of the run, and the
//! output marks it with `>=`.
//!
//! The result: the frontier ([`frontier`]), every setting that no other
//! evaluated setting beats on all four numbers. Upstream calls fall when
//! fewer requests are served, so the frontier's far end trades requests
//! for calls (74 % served for 25 % fewer calls, in `hard-outage`); the text
//! shows the settings serving at least a point less than the baseline
//! (`--min-served` to change it), each with its numbers and its `[levee]`
//! block; `--json` and `--svg` have them all.
//!
//! # The block
//!
//! A scenario's `[levee]` is the library's `tower_levee::config::LeveeConfig`,
//! so a block pastes into the scenario, a service's config file and the
//! gateway's `[levee]` alike, and means the same in each
//! ([`levee_block`]): it writes the keys whose value differs from the
//! library's default, each whole (a `cooldown` table with all its keys,
//! since a table naming some takes the rest from the default, the hold
//! among them), and `bulkhead.max_concurrent` always, the one key whose
//! absence the drill reads differently (256, not 64). The retry timeouts
//! the drill takes from `[load]` where `[levee.retry]` names none are not
//! written: they follow the scenario's load (in a service, set them).
//!
//! # Reproducible
//!
//! The same scenario,
//! budget, seeds and `--seed` give the same output, byte for byte: runs are
//! in virtual time and spread over threads with results gathered by index.

mod frontier;
mod render;
mod space;
pub mod svg;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub use frontier::{Score, frontier};
pub use render::{json, levee_block, levee_table, text};
use space::Point;

use crate::scenario::Scenario;
use tower_levee::config::LeveeConfig;

/// Points per refinement round: fixed, so the search does not depend on
/// the machine's cores.
const ROUND: usize = 8;

/// What `tune` is asked for.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Settings to evaluate besides the baseline.
    pub budget: usize,
    /// Runs per setting, with seeds `first_seed`, `first_seed + 1`, …
    pub seeds: u32,
    /// The first run's seed; it also seeds the search.
    pub first_seed: u64,
    /// Threads running in parallel (does not change the result).
    pub threads: usize,
    /// The text shows the frontier's settings serving at least this, in
    /// hundredths of a percent (default: a point below the baseline).
    pub min_served_bp: Option<u32>,
}

/// A tune that could not run: one line, naming what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TuneError(String);

impl std::fmt::Display for TuneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TuneError {}

/// Where an evaluated setting came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The scenario's own `[levee]`.
    Baseline,
    /// Drawn uniformly from the grid.
    Sampled,
    /// A neighbour of a frontier setting.
    Refined,
}

/// One evaluated setting.
#[derive(Clone, Debug)]
pub struct Evaluated {
    /// Where it came from.
    pub origin: Origin,
    /// The whole `[levee]` table it runs with.
    pub levee: LeveeConfig,
    /// Its score over the seeds.
    pub score: Score,
}

/// The outcome of a search.
#[derive(Clone, Debug)]
pub struct TuneReport {
    /// The scenario's name.
    pub scenario: String,
    /// The stack tuned (`levee`, or `levee-fleet` for a fleet sharing decisions).
    pub stack: String,
    /// The seeds every setting ran with.
    pub seeds: Vec<u64>,
    /// Every evaluated setting, in order; the first is the baseline.
    pub evaluated: Vec<Evaluated>,
    /// Indices into `evaluated` of the frontier, in display order.
    pub frontier: Vec<usize>,
    /// The text shows the frontier's settings serving at least this, in
    /// hundredths of a percent: the rest trade requests served for fewer
    /// calls, which is rarely what a user tunes for.
    pub min_served_bp: u32,
}

impl TuneReport {
    /// The frontier settings the text shows: those serving at least
    /// `min_served_bp`, a prefix of the frontier (most served first).
    pub fn shown(&self) -> &[usize] {
        let kept = self
            .frontier
            .iter()
            .take_while(|&&i| self.evaluated[i].score.served_bp >= self.min_served_bp)
            .count();
        &self.frontier[..kept]
    }
}

/// The stack `tune` runs: the scenario's Levee stack, the fleet's if it
/// has only that one.
pub fn stack_of(sc: &Scenario) -> &'static str {
    if !sc.stacks.iter().any(|s| s == "levee") && sc.stacks.iter().any(|s| s == "levee-fleet") {
        "levee-fleet"
    } else {
        "levee"
    }
}

/// One run's four numbers.
#[derive(Clone, Copy, Debug)]
struct RunNumbers {
    served: f64,
    upstream: u64,
    /// `None`: the target never served again (or nothing to recover from).
    recovery: Option<Duration>,
    p99_ms: u64,
}

fn run_once(
    sc: &Scenario,
    levee: &LeveeConfig,
    seed: u64,
) -> Result<RunNumbers, tower_levee::BoxError> {
    let mut sc = sc.clone();
    sc.levee = levee.clone();
    sc.seed = seed;
    let result = crate::run::run_one_stack(&sc, stack_of(&sc))?;
    Ok(RunNumbers {
        served: result.success_rate(),
        upstream: result.upstream_calls,
        recovery: result.recover,
        p99_ms: result.latency_ms.p99,
    })
}

fn mean(sc: &Scenario, runs: &[RunNumbers]) -> Score {
    let n = runs.len().max(1) as f64;
    let served = runs.iter().map(|r| r.served).sum::<f64>() / n;
    let upstream = runs.iter().map(|r| r.upstream as f64).sum::<f64>() / n;
    let p99 = runs.iter().map(|r| r.p99_ms as f64).sum::<f64>() / n;
    let window = crate::report::recovery_from(sc).map(|from| sc.duration - from);
    let recovery_ds = window.map(|rest| {
        let ms = runs
            .iter()
            .map(|r| r.recovery.unwrap_or(rest).as_secs_f64() * 1000.0)
            .sum::<f64>()
            / n;
        (ms / 100.0).round() as u64
    });
    Score {
        served_bp: (served * 10_000.0).round() as u32,
        upstream_tenths: (upstream * 10.0).round() as u64,
        recovery_ds,
        never_recovered: window.is_some() && runs.iter().any(|r| r.recovery.is_none()),
        // In steps of 10 ms: a millisecond of p99 is noise, not a trade-off.
        p99_ms: (p99 / 10.0).round() as u64 * 10,
    }
}

/// Runs the search. `progress(runs_done, runs_total)` is called from the
/// worker threads as runs finish.
pub fn tune(
    sc: &Scenario,
    options: &TuneOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<TuneReport, TuneError> {
    let seeds: Vec<u64> = (0..u64::from(options.seeds.max(1)))
        .map(|i| options.first_seed.wrapping_add(i))
        .collect();
    let budget = options.budget;
    let total_runs = (budget + 1) * seeds.len();
    let runner = Runner {
        sc,
        seeds: &seeds,
        threads: options.threads.max(1),
        done: AtomicUsize::new(0),
        total: total_runs,
        progress,
    };
    let baseline = runner
        .score_all(std::slice::from_ref(&sc.levee))
        .map_err(|e| TuneError(format!("the scenario's own [levee]: {e}")))?;
    let mut evaluated = vec![Evaluated {
        origin: Origin::Baseline,
        levee: sc.levee.clone(),
        score: baseline[0],
    }];
    // The search's own draws, apart from the runs' seeds.
    let mut rng = fastrand::Rng::with_seed(options.first_seed ^ 0x7475_6e65);
    let mut seen: Vec<Point> = Vec::new();
    let mut points: Vec<Option<Point>> = vec![None];
    let sampled = budget.div_ceil(2);
    let mut batch = Vec::new();
    for _ in 0..sampled {
        if let Some(p) = fresh(&mut seen, &mut rng, Point::random) {
            batch.push(p);
        }
    }
    runner.evaluate(sc, &batch, Origin::Sampled, &mut evaluated, &mut points)?;
    let mut cursor = 0usize;
    while evaluated.len() < budget + 1 {
        let scores: Vec<Score> = evaluated.iter().map(|e| e.score).collect();
        let parents: Vec<Point> = frontier(&scores)
            .into_iter()
            .filter_map(|i| points[i])
            .collect();
        let want = ROUND.min(budget + 1 - evaluated.len());
        let mut batch = Vec::with_capacity(want);
        for _ in 0..want {
            let next = if parents.is_empty() {
                fresh(&mut seen, &mut rng, Point::random)
            } else {
                let parent = parents[cursor % parents.len()];
                cursor += 1;
                fresh(&mut seen, &mut rng, |rng| parent.neighbour(rng))
                    .or_else(|| fresh(&mut seen, &mut rng, Point::random))
            };
            batch.extend(next);
        }
        if batch.is_empty() {
            break; // the grid is exhausted
        }
        runner.evaluate(sc, &batch, Origin::Refined, &mut evaluated, &mut points)?;
    }
    let scores: Vec<Score> = evaluated.iter().map(|e| e.score).collect();
    Ok(TuneReport {
        scenario: sc.name.clone(),
        stack: stack_of(sc).to_owned(),
        seeds,
        frontier: frontier(&scores),
        min_served_bp: options
            .min_served_bp
            .unwrap_or(baseline[0].served_bp.saturating_sub(100)),
        evaluated,
    })
}

/// A point not evaluated yet, from `draw` (a few tries), remembered as seen.
fn fresh(
    seen: &mut Vec<Point>,
    rng: &mut fastrand::Rng,
    mut draw: impl FnMut(&mut fastrand::Rng) -> Point,
) -> Option<Point> {
    (0..64)
        .map(|_| draw(rng))
        .find(|p| !seen.contains(p))
        .inspect(|p| seen.push(*p))
}

/// Runs settings × seeds over a few threads, results gathered by index.
struct Runner<'a> {
    sc: &'a Scenario,
    seeds: &'a [u64],
    threads: usize,
    done: AtomicUsize,
    total: usize,
    progress: &'a (dyn Fn(usize, usize) + Sync),
}

impl Runner<'_> {
    fn evaluate(
        &self,
        sc: &Scenario,
        batch: &[Point],
        origin: Origin,
        evaluated: &mut Vec<Evaluated>,
        points: &mut Vec<Option<Point>>,
    ) -> Result<(), TuneError> {
        let configs: Vec<LeveeConfig> = batch.iter().map(|p| p.apply(&sc.levee)).collect();
        let scores = self.score_all(&configs).map_err(TuneError)?;
        for ((point, levee), score) in batch.iter().zip(configs).zip(scores) {
            evaluated.push(Evaluated {
                origin,
                levee,
                score,
            });
            points.push(Some(*point));
        }
        Ok(())
    }

    /// Every config's score; the first failing run's error, naming the setting.
    fn score_all(&self, configs: &[LeveeConfig]) -> Result<Vec<Score>, String> {
        let jobs = configs.len() * self.seeds.len();
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<RunNumbers, String>>>> = Mutex::new(vec![None; jobs]);
        std::thread::scope(|scope| {
            for _ in 0..self.threads.min(jobs) {
                scope.spawn(|| {
                    loop {
                        let job = next.fetch_add(1, Ordering::Relaxed);
                        if job >= jobs {
                            return;
                        }
                        let (config, seed) = (job / self.seeds.len(), job % self.seeds.len());
                        let run = run_once(self.sc, &configs[config], self.seeds[seed])
                            .map_err(|e| e.to_string());
                        if let Ok(mut results) = results.lock() {
                            results[job] = Some(run);
                        }
                        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
                        (self.progress)(done, self.total);
                    }
                });
            }
        });
        let results = results
            .into_inner()
            .map_err(|_| "a run panicked".to_owned())?;
        let runs = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err("a run did not finish".to_owned())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(runs
            .chunks(self.seeds.len())
            .map(|per_seed| mean(self.sc, per_seed))
            .collect())
    }
}
