//! What the scenario tests share: a built-in scenario by name, a run that
//! prints its table, a stack's result, and the accounting every report keeps.

#![allow(dead_code, unreachable_pub)]

use levee_drill::report::{ScenarioReport, StackResult, table};
use levee_drill::run::run_scenario;
use levee_drill::scenario::Scenario;
use levee_drill::suite;

/// A built-in scenario by name.
pub fn scenario(name: &str) -> Scenario {
    suite::scenarios()
        .expect("the built-in scenarios parse")
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no built-in scenario {name}"))
}

/// Runs `sc`, printing its table (`cargo test -p levee-drill -- --nocapture`).
pub fn run(sc: &Scenario) -> ScenarioReport {
    let report = run_scenario(sc).expect("the scenario runs");
    print!("{}", table(&report));
    report
}

/// The result of the stack named `name`.
pub fn stack<'a>(r: &'a ScenarioReport, name: &str) -> &'a StackResult {
    r.results
        .iter()
        .find(|s| s.stack == name)
        .expect("stack ran")
}

/// Every request is accounted for, and every stack had traffic.
pub fn assert_accounted(r: &ScenarioReport) {
    for s in &r.results {
        assert_eq!(
            s.requests,
            s.succeeded + s.failed.total(),
            "{}/{}: requests = succeeded + Σ failed",
            r.scenario,
            s.stack
        );
        assert!(s.requests > 0, "{}/{}: no traffic", r.scenario, s.stack);
    }
}
