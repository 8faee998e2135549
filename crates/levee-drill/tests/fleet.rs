//! Fleets of replicas in virtual time: sharing decisions through the fleet
//! store learns a throttle or a spend cap once for the fleet, spares a dead
//! primary the thresholds of quiet replicas, and a store outage costs
//! nothing but the sharing itself.

use levee_drill::report::{ScenarioReport, StackResult};
use levee_drill::scenario::Scenario;

mod support;
use support::{assert_accounted, stack};

/// Runs `sc` with every request accounted for.
fn run(sc: &Scenario) -> ScenarioReport {
    let report = support::run(sc);
    assert_accounted(&report);
    report
}

/// The same scenario as one replica carrying one replica's share.
fn one_replica(sc: &Scenario) -> Scenario {
    let mut one = sc.clone();
    let n = sc.replicas() as f64;
    one.load.rate /= n;
    if let Some(f) = &mut one.fleet {
        f.replicas = 1;
    }
    one
}

#[test]
fn a_shared_throttle_costs_the_fleet_what_it_costs_one_replica() {
    let sc = support::scenario("fleet-throttle");
    let r = run(&sc);
    let shared = stack(&r, "levee-fleet").upstream_throttled_calls;
    let alone = stack(&r, "levee").upstream_throttled_calls;
    let single = stack(&run(&one_replica(&sc)), "levee").upstream_throttled_calls;
    println!("429s: one replica {single}, 8 sharing {shared}, 8 alone {alone}");
    assert!(single > 0);
    assert!(shared as f64 <= 1.5 * single as f64, "{shared} vs {single}");
    assert!(alone >= 5 * single, "{alone} vs {single}");
    assert_eq!(stack(&r, "levee-fleet").success_rate(), 1.0);
}

#[test]
fn a_spend_cap_one_replica_meets_parks_the_fleet() {
    let r = run(&support::scenario("fleet-spend-cap"));
    let shared = stack(&r, "levee-fleet");
    let alone = stack(&r, "levee");
    println!(
        "calls to the capped account: sharing {}, alone {}",
        shared.upstream_capped_calls, alone.upstream_capped_calls
    );
    assert!(
        shared.upstream_capped_calls <= 2,
        "{}",
        shared.upstream_capped_calls
    );
    assert!(alone.upstream_capped_calls >= 8);
    assert_eq!(shared.success_rate(), 1.0);
}

/// A quiet fleet (two requests a second across 8 replicas) over a dead
/// primary: counting failures together and probing once per cool-off, the
/// fleet's callers call it about as often as one of its replicas' alone
/// would; its shadow probes, copies no caller waits on, stay within their
/// share of the fleet's requests.
#[test]
fn a_quiet_fleet_spares_a_dead_primary_as_one_replica_would() {
    let sc = support::scenario("fleet-quiet-dead-primary");
    let r = run(&sc);
    // Only the primary is ever open: every probe went to it.
    let callers = |s: &StackResult| {
        s.upstream_calls_by_target["primary"]
            .checked_sub(s.upstream_probe_calls)
            .expect("every probe went to the primary")
    };
    let (shared, alone) = (
        callers(stack(&r, "levee-fleet")),
        callers(stack(&r, "levee")),
    );
    let single = callers(stack(&run(&one_replica(&sc)), "levee"));
    // Sharing decisions only (no lease, counting alone): what it was.
    let mut decisions = sc.clone();
    if let Some(f) = &mut decisions.fleet {
        f.probe_lease = None;
        f.share_failures = None;
    }
    let decisions = callers(stack(&run(&decisions), "levee-fleet"));
    let fleet = stack(&r, "levee-fleet");
    println!(
        "callers' calls to the dead primary: one replica {single}, 8 sharing {shared}, \
         8 sharing decisions only {decisions}, 8 alone {alone}; the fleet's copies {} \
         of {} requests",
        fleet.upstream_probe_calls, fleet.requests
    );
    assert!(shared as f64 <= 1.5 * single as f64, "{shared} vs {single}");
    assert!(shared as f64 <= 0.5 * alone as f64, "{shared} vs {alone}");
    assert!(shared < decisions, "{shared} vs {decisions}");
    // A tenth of the requests, and the first copy of each replica's spell.
    assert!(fleet.upstream_probe_calls > 0);
    assert!(
        fleet.upstream_probe_calls as f64 <= 0.1 * fleet.requests as f64 + 8.0,
        "{} copies",
        fleet.upstream_probe_calls
    );
    assert_eq!(fleet.success_rate(), 1.0);
}

#[test]
fn a_store_outage_fails_no_request_and_costs_only_the_sharing() {
    let outage = run(&support::scenario("fleet-store-outage"));
    let steady = run(&support::scenario("fleet-throttle"));
    let throttled = |r: &ScenarioReport, s: &str| stack(r, s).upstream_throttled_calls;
    let during = throttled(&outage, "levee-fleet");
    println!(
        "429s: sharing {}, sharing with the store gone 30 s {during}, alone {}",
        throttled(&steady, "levee-fleet"),
        throttled(&steady, "levee")
    );
    assert_eq!(stack(&outage, "levee-fleet").success_rate(), 1.0);
    assert!(
        during > throttled(&steady, "levee-fleet"),
        "it shared through the outage?"
    );
    assert!(
        during < throttled(&steady, "levee"),
        "it never shared again?"
    );
    // The same scenario without the outage gives exactly the shared numbers.
    let mut no_outage = support::scenario("fleet-store-outage");
    no_outage.faults.retain(|f| f.kind != "store_outage");
    assert_eq!(
        throttled(&run(&no_outage), "levee-fleet"),
        throttled(&steady, "levee-fleet")
    );
}

#[test]
fn a_fleet_table_is_checked_at_load() {
    let base = "name = \"x\"\nduration = \"10s\"\n[load]\nrate = 1\nmodel = \"m\"\n[[target]]\nname = \"a\"\ndialect = \"openai\"\n";
    for (extra, says) in [
        ("[fleet]\nreplicas = 0\n", "fleet.replicas"),
        ("[fleet]\nreplicas = 2\nstore = \"etcd\"\n", "fleet.store"),
        ("[fleet]\nreplicas = 2\npolicy = \"most\"\n", "fleet.policy"),
        (
            "[fleet]\nreplicas = 2\nsweep_every = \"1ms\"\n",
            "fleet.sweep_every",
        ),
        (
            "[fleet]\nreplicas = 2\nprobe_lease = \"1ms\"\n",
            "fleet.probe_lease",
        ),
        (
            "[fleet]\nreplicas = 2\nshare_failures = \"soon\"\n",
            "fleet.share_failures",
        ),
        (
            "[[fault]]\ntarget = \"*\"\nkind = \"store_outage\"\n",
            "store_outage",
        ),
    ] {
        let err = Scenario::from_toml(&format!("{base}{extra}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{extra}: {err}");
    }
    let err = Scenario::from_toml(&format!("{base}stacks = [\"levee-fleet\"]\n"));
    assert!(err.is_err(), "levee-fleet without a fleet");
    let sc =
        Scenario::from_toml(&format!("{base}[fleet]\nreplicas = 3\nstore = \"redis\"\n")).unwrap();
    assert_eq!(
        sc.stacks,
        [
            "unprotected",
            "naive",
            "tower-resilience",
            "failsafe",
            "gateway-router",
            "levee-fleet"
        ]
    );
}

/// Eight replicas over accounts that report their limits in headers:
/// sharing the pacing, the fleet spends the account's rate as one replica
/// would, where eight pacing alone send eight times it.
#[test]
fn a_fleet_sharing_its_pacing_spends_a_rate_limit_once() {
    let sc = support::scenario("fleet-rate-limits");
    let r = run(&sc);
    let throttled = |s: &str| stack(&r, s).upstream_throttled_calls;
    let (shared, alone) = (throttled("levee-fleet"), throttled("levee"));
    let requests = stack(&r, "levee-fleet").requests;
    let mut unshared = sc.clone();
    if let Some(f) = &mut unshared.fleet {
        f.share_pacing = false;
    }
    let before = stack(&run(&unshared), "levee-fleet").upstream_throttled_calls;
    println!(
        "429s of {requests} requests: 8 sharing {shared}, 8 sharing all but the pacing {before}, 8 alone {alone}"
    );
    assert!(shared as f64 <= 0.3 * alone as f64, "{shared} vs {alone}");
    assert!(
        shared as f64 <= 0.02 * requests as f64,
        "{shared} of {requests}"
    );
    assert!(shared < before, "{shared} vs {before}");
    assert_eq!(stack(&r, "levee-fleet").success_rate(), 1.0);
}

/// The same over accounts that send no rate-limit headers (Gemini's API):
/// the 429 itself states the per-minute quota it hit, so each replica
/// spreads at its share of it from the first 429 it sees, and the fleet
/// draws fewer than 2% of its requests in 429s.
#[test]
fn a_fleet_over_accounts_without_headers_spreads_at_its_share_of_the_stated_quota() {
    let r = run(&support::scenario("fleet-rate-limits-429s"));
    let throttled = |s: &str| stack(&r, s).upstream_throttled_calls;
    let (shared, alone) = (throttled("levee-fleet"), throttled("levee"));
    let requests = stack(&r, "levee-fleet").requests;
    println!("429s of {requests} requests without headers: 8 sharing {shared}, 8 alone {alone}");
    assert!(shared as f64 <= 0.3 * alone as f64, "{shared} vs {alone}");
    assert!(
        shared as f64 <= 0.02 * requests as f64,
        "{shared} of {requests}"
    );
    assert_eq!(stack(&r, "levee-fleet").success_rate(), 1.0);
}
