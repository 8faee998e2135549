//! `levee-drill run --live --through ADAPTER`: the scenario's load through a
//! real gateway process. levee-gateway's adapter runs here on the debug
//! binary `cargo test --workspace` builds; LiteLLM's where its proxy is
//! installed, skipped with a message where it is not.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn drill() -> &'static str {
    env!("CARGO_BIN_EXE_levee-drill")
}

fn scenario() -> PathBuf {
    data("through-outage.toml")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs the drill through `adapter`; its JSON report.
fn through(adapter: &str, scale: &str, env: &[(&str, &Path)]) -> serde_json::Value {
    through_file(&scenario(), adapter, scale, env)
}

/// Runs `file` through `adapter`; its JSON report.
fn through_file(
    file: &Path,
    adapter: &str,
    scale: &str,
    env: &[(&str, &Path)],
) -> serde_json::Value {
    let stem = file.file_stem().unwrap().to_string_lossy();
    let dir = std::env::temp_dir().join(format!(
        "levee-drill-through-test-{}-{adapter}-{stem}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join(format!("{adapter}.json"));
    let mut command = Command::new(drill());
    command
        .args(["run"])
        .arg(file)
        .args([
            "--live",
            "--time-scale",
            scale,
            "--through",
            adapter,
            "--json",
        ])
        .arg(&json);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    report
}

#[test]
fn the_load_through_levee_gateway_fails_over_unseen_and_the_report_counts_it() {
    let binary = workspace().join("target/debug/levee-gateway");
    if !binary.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs `cargo test --workspace`, which builds {}",
            binary.display()
        );
        eprintln!(
            "skipped: no {} (run `cargo build -p levee-gateway`)",
            binary.display()
        );
        return;
    }
    let report = through("levee-gateway", "4", &[("LEVEE_GATEWAY_BIN", &binary)]);
    let result = &report["results"][0];
    assert_eq!(result["stack"], "levee-gateway");
    let requests = result["requests"].as_u64().unwrap();
    let succeeded = result["succeeded"].as_u64().unwrap();
    assert!(requests > 100, "{requests} requests");
    // Every request is accounted for, and the outage costs the caller nothing.
    assert_eq!(succeeded, requests, "{result}");
    let by_target = &result["upstream_calls_by_target"];
    assert!(by_target["secondary"].as_u64().unwrap() > 0, "{by_target}");
    assert!(result["fallback_share"].as_f64().unwrap() > 0.0);
    // The served target comes from the provider's stamp through the gateway.
    assert!(result["recover"].is_number() || result["recover"].is_null());
}

#[test]
fn a_scenarios_rule_teaches_levee_gateway_a_frozen_account_it_parks_instead_of_probing() {
    let binary = workspace().join("target/debug/levee-gateway");
    if !binary.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI builds {}",
            binary.display()
        );
        eprintln!("skipped: no {}", binary.display());
        return;
    }
    let taught = data("through-frozen.toml");
    let text = std::fs::read_to_string(&taught).unwrap();
    let untaught =
        std::env::temp_dir().join(format!("through-frozen-norule-{}.toml", std::process::id()));
    std::fs::write(&untaught, &text[..text.find("[[rule]]").unwrap()]).unwrap();
    let env = [("LEVEE_GATEWAY_BIN", binary.as_path())];
    let calls = |report: &serde_json::Value| {
        let result = &report["results"][0];
        assert_eq!(result["succeeded"], result["requests"], "{result}");
        result["upstream_calls_by_target"]["primary"]
            .as_u64()
            .unwrap()
    };
    let with = calls(&through_file(&taught, "levee-gateway", "4", &env));
    let without = calls(&through_file(&untaught, "levee-gateway", "4", &env));
    let _ = std::fs::remove_file(&untaught);
    println!("calls to the frozen primary: {without} read as an outage, {with} parked by the rule");
    // The same healthy calls before the fault in both; after it, one call
    // parks the account, where an outage takes five to open the breaker and
    // a probe after every cool-off.
    assert!(with + 3 <= without, "{with} vs {without}");
}

#[test]
fn the_load_through_litellm_runs_where_its_proxy_is_installed() {
    let venv = std::env::var_os("GB_LITELLM_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/gatewaybench/litellm"))
        });
    if !venv.is_some_and(|v| v.join("bin/litellm").exists()) {
        eprintln!(
            "skipped: LiteLLM's proxy is not installed (../shared/gatewaybench/install-litellm.sh installs it)"
        );
        return;
    }
    let report = through("litellm", "1", &[]);
    let result = &report["results"][0];
    assert_eq!(result["stack"], "litellm");
    assert!(result["requests"].as_u64().unwrap() > 100);
}
