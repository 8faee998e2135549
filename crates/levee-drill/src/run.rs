//! The virtual-time runner: the same Poisson arrivals through each stack,
//! each stack under its own paused tokio clock with a fresh provider.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::levee::{FleetLink, FleetStore, LeveeStack};
use crate::outcome::{Fail, Record, TransitionRecord};
use crate::peers::failsafe::FailsafeStack;
use crate::peers::gateway::GatewayRouter;
use crate::peers::tower_resilience::TowerResilienceStack;
use crate::provider::{CallStats, Provider};
use crate::report::{ScenarioReport, StackResult};
use crate::scenario::Scenario;
use crate::sdk::{Naive, unprotected};
use tower_levee::BoxError;

/// Arrival offsets from the start: a Poisson process of `load.rate` per
/// second over `duration`, drawn from the scenario's seed.
pub fn arrivals(sc: &Scenario) -> Vec<Duration> {
    let mut rng = fastrand::Rng::with_seed(sc.seed);
    let mut t = 0.0f64;
    let end = sc.duration.as_secs_f64();
    let mut out = Vec::new();
    loop {
        // Exponential inter-arrival gap; 1 - f64() is in (0, 1].
        t += -(1.0 - rng.f64()).ln() / sc.load.rate;
        if t >= end {
            return out;
        }
        out.push(Duration::from_secs_f64(t));
    }
}

/// The raw outcome of one stack's run.
#[derive(Debug)]
pub struct StackRun {
    /// The stack's name.
    pub stack: String,
    /// One record per arrival, in arrival order.
    pub records: Vec<Record>,
    /// Upstream call counts.
    pub calls: CallStats,
    /// Transitions, in order.
    pub transitions: Vec<TransitionRecord>,
}

/// Runs one stack over the scenario's arrivals in virtual time.
pub fn run_stack(
    sc: &Arc<Scenario>,
    stack: &str,
    arrivals: &[Duration],
) -> Result<StackRun, BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(
        &rt,
        drive(sc.clone(), stack.to_owned(), arrivals.to_vec(), false),
    )
}

enum Stack {
    /// A gateway process in front of the providers (`--through`).
    Through(Box<crate::through::ThroughClient>),
    Unprotected,
    Naive(Naive),
    TowerResilience(TowerResilienceStack),
    Failsafe(FailsafeStack),
    GatewayRouter(GatewayRouter),
    Levee(LeveeStack),
}

async fn drive(
    sc: Arc<Scenario>,
    name: String,
    arrivals: Vec<Duration>,
    live: bool,
) -> Result<StackRun, BoxError> {
    drive_with(sc, name, arrivals, live, None).await
}

async fn drive_with(
    sc: Arc<Scenario>,
    name: String,
    arrivals: Vec<Duration>,
    live: bool,
    through: Option<&crate::through::Adapter>,
) -> Result<StackRun, BoxError> {
    let start = Instant::now();
    let provider = match through {
        // A gateway calls each target as an OpenAI-compatible endpoint.
        Some(_) => Provider::new(sc.clone()).openai_api(),
        None => Provider::new(sc.clone()),
    };
    let (provider, remote) = if live {
        let remote = crate::live::serve(provider.clone()).await?;
        (provider.over(remote.clone()), Some(remote))
    } else {
        (provider, None)
    };
    let transitions: Rc<RefCell<Vec<TransitionRecord>>> = Rc::default();
    // The fleet store the `levee-fleet` replicas share, and its outages:
    // simulated in virtual time, a redis-server of the run's own live.
    let outages: Vec<(Duration, Duration)> = sc
        .faults
        .iter()
        .filter(|f| f.kind == "store_outage")
        .map(|f| (f.from, f.to))
        .collect();
    let shares_store = name == "levee-fleet" || through.is_some();
    let store = match (shares_store, &sc.fleet) {
        (true, Some(_)) if live => {
            let server = levee_redis::LocalRedis::start(None).map_err(|e| {
                format!("--live with a [fleet] runs a redis-server on 127.0.0.1: {e}")
            })?;
            let url = server.url();
            let server = Rc::new(RefCell::new(server));
            for (from, to) in outages.iter().copied() {
                let server = server.clone();
                tokio::task::spawn_local(async move {
                    tokio::time::sleep_until(start + from).await;
                    server.borrow_mut().kill();
                    tokio::time::sleep_until(start + to).await;
                    if let Err(e) = server.borrow_mut().restart() {
                        eprintln!("the drill's redis-server did not restart: {e}");
                    }
                });
            }
            Some((FleetStore::Redis(url), Some(server)))
        }
        (true, Some(spec)) => {
            let store = levee_redis::MemoryStore::new().with_latency(spec.latency);
            for (from, to) in outages.iter().copied() {
                let store = store.clone();
                tokio::task::spawn_local(async move {
                    tokio::time::sleep_until(start + from).await;
                    store.set_available(false);
                    tokio::time::sleep_until(start + to).await;
                    store.set_available(true);
                });
            }
            Some((FleetStore::Simulated(store), None))
        }
        _ => None,
    };
    // Kept until the run ends.
    let (store, _server) = store.unzip();
    let _server = _server.flatten();
    let mut replicas = Vec::with_capacity(sc.replicas());
    // The gateway processes of `--through`, one per replica, kept until the run ends.
    let mut gateways = Vec::new();
    for replica in 0..sc.replicas() {
        if let (Some(adapter), Some(remote)) = (through, &remote) {
            let redis = match &store {
                Some(FleetStore::Redis(url)) => Some(url.clone()),
                _ => None,
            };
            let spec = crate::through::Spec::new(&sc, remote.addr(), redis);
            let gateway = crate::through::GatewayProcess::start(adapter, &spec, replica).await?;
            replicas.push(Stack::Through(Box::new(
                crate::through::ThroughClient::new(&sc, &gateway.url),
            )));
            gateways.push(gateway);
            continue;
        }
        replicas.push(match name.as_str() {
            "unprotected" => Stack::Unprotected,
            "naive" => Stack::Naive(Naive::new(
                sc.targets.iter().map(|t| t.name.clone()).collect(),
                start,
                transitions.clone(),
            )),
            "tower-resilience" => {
                Stack::TowerResilience(TowerResilienceStack::new(&sc, &provider, start)?)
            }
            "failsafe" => Stack::Failsafe(FailsafeStack::new(&sc, start, replica)),
            "gateway-router" => Stack::GatewayRouter(GatewayRouter::new(
                sc.targets.iter().map(|t| t.name.clone()).collect(),
                start,
                transitions.clone(),
            )),
            "levee" | "levee-fleet" => {
                let link = store
                    .as_ref()
                    .zip(sc.fleet.as_ref())
                    .map(|(store, spec)| FleetLink {
                        store: store.clone(),
                        replica,
                        spec: spec.clone(),
                    });
                Stack::Levee(LeveeStack::new(&sc, &provider, start, link)?)
            }
            other => return Err(format!("unknown stack {other:?}").into()),
        });
    }
    let replicas = Rc::new(replicas);
    let rng = Rc::new(RefCell::new(fastrand::Rng::with_seed(
        sc.seed.wrapping_add(17),
    )));
    let records: Rc<RefCell<Vec<Option<Record>>>> =
        Rc::new(RefCell::new(vec![None; arrivals.len()]));
    let mut tasks = Vec::with_capacity(arrivals.len());
    for (i, at) in arrivals.iter().copied().enumerate() {
        tokio::time::sleep_until(start + at).await;
        // A load balancer's round robin.
        let replica = i % replicas.len();
        let (replicas, provider, rng, records) = (
            replicas.clone(),
            provider.clone(),
            rng.clone(),
            records.clone(),
        );
        let timeout = sc.load.timeout;
        tasks.push(tokio::task::spawn_local(async move {
            let began = Instant::now();
            let fut = async {
                match &replicas[replica] {
                    Stack::Through(t) => t.call(&rng).await,
                    Stack::Unprotected => unprotected(&provider, &rng).await,
                    Stack::Naive(n) => n.call(&provider, &rng).await,
                    Stack::TowerResilience(t) => t.call().await,
                    Stack::Failsafe(f) => f.call(&provider, &rng).await,
                    Stack::GatewayRouter(g) => g.call(&provider, &rng).await,
                    Stack::Levee(l) => l.call().await,
                }
            };
            let result = tokio::time::timeout(timeout, fut)
                .await
                .unwrap_or(Err(Fail::Timeout));
            records.borrow_mut()[i] = Some(Record {
                at,
                latency: Instant::now() - began,
                result,
                replica,
            });
        }));
    }
    for t in tasks {
        t.await?;
    }
    drop(gateways);
    let mut transitions = transitions.borrow().clone();
    for stack in replicas.iter() {
        match stack {
            Stack::Levee(l) => transitions.extend(l.transitions()),
            Stack::TowerResilience(t) => transitions.extend(t.transitions()),
            Stack::Failsafe(f) => transitions.extend(f.transitions()),
            _ => {}
        }
    }
    transitions.sort_by_key(|t| t.t_ms);
    let records = records
        .borrow_mut()
        .drain(..)
        .map(|r| r.expect("every request finishes"))
        .collect();
    Ok(StackRun {
        stack: name,
        records,
        calls: provider.stats(),
        transitions,
    })
}

/// Runs every stack the scenario names and builds its report.
pub fn run_scenario(sc: &Scenario) -> Result<ScenarioReport, BoxError> {
    run_scenario_with(sc, |_, _| {})
}

/// As [`run_scenario`], calling `progress(stack, requests)` before each stack runs.
pub fn run_scenario_with(
    sc: &Scenario,
    mut progress: impl FnMut(&str, usize),
) -> Result<ScenarioReport, BoxError> {
    let sc = Arc::new(sc.clone());
    let arrivals = arrivals(&sc);
    let mut results = Vec::new();
    for stack in &sc.stacks {
        progress(stack, arrivals.len());
        let run = run_stack(&sc, stack, &arrivals)?;
        results.push(StackResult::from_run(&sc, run));
    }
    Ok(ScenarioReport {
        scenario: sc.name.clone(),
        results,
    })
}

/// Runs `stack` alone over the scenario's arrivals and summarizes it: what
/// `levee-drill tune` runs for each setting and seed (the scenario's
/// `[levee]` and `seed` set by the caller).
pub fn run_one_stack(sc: &Scenario, stack: &str) -> Result<StackResult, BoxError> {
    let sc = Arc::new(sc.clone());
    let run = run_stack(&sc, stack, &arrivals(&sc))?;
    Ok(StackResult::from_run(&sc, run))
}

/// Runs the scenario live: every stack at once, each over real HTTP to its
/// own loopback provider server, in real time compressed `scale` times.
pub fn run_scenario_live(sc: &Scenario, scale: f64) -> Result<ScenarioReport, BoxError> {
    let sc = Arc::new(crate::live::scaled(sc, scale));
    let arrivals = arrivals(&sc);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let runs = local.block_on(&rt, async {
        let handles: Vec<_> = sc
            .stacks
            .iter()
            .map(|st| {
                tokio::task::spawn_local(drive(sc.clone(), st.clone(), arrivals.clone(), true))
            })
            .collect();
        let mut runs = Vec::new();
        for h in handles {
            runs.push(h.await??);
        }
        Ok::<_, BoxError>(runs)
    })?;
    let results = runs
        .into_iter()
        .map(|run| StackResult::from_run(&sc, run))
        .collect();
    Ok(ScenarioReport {
        scenario: sc.name.clone(),
        results,
    })
}

/// Runs the scenario live through each gateway an adapter starts
/// (`--through`, see [`crate::through`]), one after the other, each over
/// providers of its own: one report, a row per gateway.
pub fn run_scenario_through(
    sc: &Scenario,
    scale: f64,
    adapters: &[crate::through::Adapter],
) -> Result<ScenarioReport, BoxError> {
    let sc = Arc::new(crate::live::scaled(sc, scale));
    let arrivals = arrivals(&sc);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let mut results = Vec::new();
    for adapter in adapters {
        let run = local.block_on(
            &rt,
            drive_with(
                sc.clone(),
                adapter.name.clone(),
                arrivals.clone(),
                true,
                Some(adapter),
            ),
        )?;
        results.push(StackResult::from_run(&sc, run));
    }
    Ok(ScenarioReport {
        scenario: sc.name.clone(),
        results,
    })
}
