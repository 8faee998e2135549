//! A scenario's `[[rule]]` tables teach the Levee stack a provider: an
//! unknown provider's frozen-account answer, a `503` the built-in rules
//! read as an outage (probed again and again), parks the account once a
//! rule names it a quota.

use levee_drill::scenario::Scenario;

mod support;
use support::{assert_accounted, stack};

const SCENARIO: &str = r#"
name = "unknown-provider-frozen"
duration = "120s"
seed = 7
stacks = ["levee"]

[load]
rate = 10
model = "gpt-4o"
timeout = "30s"

[[target]]
name = "acme"
dialect = "openai"
account = "acme-1"
latency = "300ms"

[[target]]
name = "backup"
dialect = "openai"
account = "backup-1"
latency = "300ms"

[[fault]]
target = "acme"
kind = "answer"
status = 503
body = '{"error":{"message":"Account frozen: settle the outstanding invoice to resume service.","type":"server_error","code":"acct_frozen"}}'
"#;

const RULE: &str = r#"
[[rule]]
name = "acme-frozen"
status = 503
code = "acct_frozen"
verdict = "quota"
"#;

#[test]
fn a_rule_turns_an_unknown_providers_answer_from_an_outage_into_a_parked_account() {
    let plain = Scenario::from_toml(SCENARIO).unwrap();
    let taught = Scenario::from_toml(&format!("{SCENARIO}{RULE}")).unwrap();
    assert_eq!(taught.rules.len(), 1);

    let without = support::run(&plain);
    let with = support::run(&taught);
    assert_accounted(&without);
    assert_accounted(&with);
    let (without, with) = (stack(&without, "levee"), stack(&with, "levee"));
    let calls = |s: &levee_drill::report::StackResult| s.upstream_calls_by_target["acme"];
    println!(
        "calls to the frozen account: {} as an outage, {} parked",
        calls(without),
        calls(with)
    );
    // As an outage the breaker probes the account after every cool-off;
    // parked, it waits for an operator (or the reset) and asks nothing.
    assert!(
        calls(with) * 2 <= calls(without),
        "{} vs {}",
        calls(with),
        calls(without)
    );
    let parked =
        |s: &levee_drill::report::StackResult| s.transitions.iter().any(|t| t.mechanism == "park");
    assert!(parked(with), "the rule parks the account");
    assert!(!parked(without), "the built-in rules read an outage");
    assert_eq!(with.success_rate(), 1.0);
}

#[test]
fn a_scenario_refuses_a_rule_with_a_mistake_naming_it() {
    let bad = format!("{SCENARIO}[[rule]]\nname = \"x\"\nstatus = \"5x\"\nverdict = \"quota\"\n");
    let err = Scenario::from_toml(&bad).unwrap_err().to_string();
    assert!(err.contains("rule[0].status"), "{err}");
    let no_status = SCENARIO.replace("status = 503\n", "");
    let err = Scenario::from_toml(&no_status).unwrap_err().to_string();
    assert!(err.contains("fault[0].status"), "{err}");
}
