//! `levee-drill classify` and the binary's other entry points, run as a user would.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn drill(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_levee-drill"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run levee-drill");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn classify(stdin: &str) -> Vec<Value> {
    let out = drill(&["classify"], stdin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each output line is JSON"))
        .collect()
}

#[test]
fn classify_prints_one_verdict_line_per_case_in_order() {
    let input = [
        json!({"status": 429, "headers": {"retry-after": "7"}, "body": "", "stream": false}),
        json!({"status": 200, "headers": {"content-type": "text/event-stream"},
               "body": "data: {\"error\":{\"type\":\"server_error\"}}\n\n", "stream": true}),
        json!({"status": null, "headers": {}, "body": "", "transport": "timeout"}),
        json!({"status": 429, "body": "{\"error\":{\"code\":\"insufficient_quota\"}}", "provider": "openai", "expect_verdict": "x"}),
    ]
    .map(|v| v.to_string())
    .join("\n");
    let out = classify(&input);
    assert_eq!(
        out,
        [
            json!({"verdict": "throttled", "wait_ms": 7000, "reason": "status:429"}),
            json!({"verdict": "availability", "wait_ms": null, "reason": "openai:server_error"}),
            json!({"verdict": "availability", "wait_ms": null, "reason": "transport:timeout"}),
            json!({"verdict": "quota", "wait_ms": null, "reason": "openai:insufficient_quota"}),
        ]
    );
}

#[test]
fn output_keys_come_in_the_documented_order() {
    let out = drill(
        &["classify"],
        "{\"status\":503,\"headers\":{\"retry-after\":\"3\"}}\n",
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"verdict\":\"availability\",\"wait_ms\":3000,\"reason\":\"status:503\"}\n"
    );
}

#[test]
fn bad_lines_get_an_error_line_and_the_rest_still_run() {
    let input = "{\"status\":429}\nnot json\n\n{\"headers\":{}}\n{\"status\":1000}\n[1]\n{\"status\":400,\"dialect\":\"klingon\"}\n{\"status\":401}\n";
    let out = drill(&["classify"], input);
    assert!(
        out.status.success(),
        "bad input lines do not fail the command"
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7, "the blank line is skipped: {lines:?}");
    assert_eq!(lines[0]["verdict"], "throttled");
    for (i, line_no) in [(1, 2), (2, 4), (3, 5), (4, 6), (5, 7)] {
        let err = lines[i]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("line {line_no}: {:?}", lines[i]));
        assert!(err.starts_with(&format!("line {line_no}: ")), "{err}");
    }
    assert!(lines[2]["error"].as_str().unwrap().contains("status"));
    assert!(lines[4]["error"].as_str().unwrap().contains("object"));
    assert_eq!(lines[6]["verdict"], "credential");
}

#[test]
fn a_dialect_hint_names_the_reason() {
    let case = json!({"status": 429, "dialect": "groq", "body": "{\"error\":{\"code\":\"rate_limit_exceeded\"}}"});
    assert_eq!(
        classify(&case.to_string())[0]["reason"],
        "groq:rate_limit_exceeded"
    );
}

#[test]
fn every_committed_signal_classifies_as_expected_through_the_command() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../levee-core/tests/data/provider-signals.json"
    );
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let input: String = cases.iter().map(|c| format!("{c}\n")).collect();
    let out = classify(&input);
    assert_eq!(out.len(), cases.len());
    for (case, got) in cases.iter().zip(&out) {
        assert_eq!(got["verdict"], case["expect_verdict"], "{case}");
        let (got, want) = (got["wait_ms"].as_i64(), case["expect_wait_ms"].as_i64());
        assert!(
            got.zip(want)
                .map_or(got == want, |(g, w)| (g - w).abs() <= 1000),
            "{case}: wait {got:?}"
        );
    }
}

#[test]
fn samples_prints_the_sample_table() {
    let out = drill(&["samples"], "");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for word in [
        "throttled",
        "quota",
        "availability",
        "credential",
        "request",
        "anthropic:overloaded_error",
    ] {
        assert!(text.contains(word), "{word} missing from:\n{text}");
    }
}

#[test]
fn help_prints_usage_and_unknown_arguments_fail() {
    let help = drill(&["--help"], "");
    assert!(help.status.success());
    assert!(
        String::from_utf8(help.stdout)
            .unwrap()
            .contains("levee-drill classify")
    );
    let bad = drill(&["frobnicate"], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8(bad.stderr).unwrap().contains("Usage:"));
}

fn rules_file(text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "levee-drill-rules-{}-{}.toml",
        std::process::id(),
        text.len()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn classify_with_rules_names_the_rule_that_decided_each_line() {
    let rules = rules_file(
        "[[rule]]\nname = \"acme-frozen\"\nstatus = 503\nphrase = \"account frozen\"\nverdict = \"quota\"\n",
    );
    let input = [
        json!({"status": 503, "body": "{\"error\":{\"message\":\"Account frozen\"}}"}),
        json!({"status": 503, "body": "{\"error\":{\"message\":\"busy\"}}"}),
    ]
    .map(|v| v.to_string())
    .join("\n");
    let out = drill(&["classify", "--rules", rules.to_str().unwrap()], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            json!({"verdict": "quota", "wait_ms": null, "reason": "acme-frozen", "rule": "acme-frozen"}),
            json!({"verdict": "availability", "wait_ms": null, "reason": "status:503", "rule": null}),
        ]
    );
}

#[test]
fn classify_refuses_a_rules_file_with_a_mistake_naming_its_line() {
    let rules = rules_file("[[rule]]\nname = \"x\"\nverdict = \"quota\"\nstatus = \"5x\"\n");
    let out = drill(&["classify", "--rules", rules.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rule[0].status") && err.contains("line 4"),
        "{err}"
    );
}

#[test]
fn classify_jsonl_counts_a_day_of_answers_and_lists_what_no_rule_recognised() {
    let rules = rules_file(
        "[[rule]]\nname = \"acme-frozen\"\nphrase = \"account frozen\"\nverdict = \"quota\"\n",
    );
    let day = [
        json!({"status": 429, "body": "{\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"Please try again in 2s.\"}}"}),
        json!({"status": 429, "body": "{\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"Please try again in 3s.\"}}"}),
        json!({"status": 403, "body": "{\"error\":{\"message\":\"Account frozen\"}}"}),
        json!({"status": 418, "body": "I'm a teapot"}),
        json!({"status": 200, "body": "{\"base_resp\":{\"status_code\":1008,\"status_msg\":\"insufficient balance\"}}"}),
    ]
    .map(|v| v.to_string())
    .join("\n")
        + "\nnot json\n";
    let file = rules_file(&day);
    let out = drill(
        &[
            "classify",
            "--rules",
            rules.to_str().unwrap(),
            "--jsonl",
            file.to_str().unwrap(),
            "--json",
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["answers"], 5);
    assert_eq!(
        report["verdicts"],
        json!({"throttled": 2, "quota": 2, "request": 1})
    );
    assert_eq!(report["reasons"]["openai:rate_limit_exceeded"], 2);
    assert_eq!(
        report["reasons"]["generic:1008"], 1,
        "an error inside a 200"
    );
    assert_eq!(report["rules"], json!({"acme-frozen": 1}));
    assert_eq!(report["unrecognised_count"], 1);
    assert_eq!(report["unrecognised"][0]["line"], 4);
    assert_eq!(report["unrecognised"][0]["status"], 418);
    assert_eq!(report["bad_lines"].as_array().unwrap().len(), 1);

    // As text, from stdin, without the rules: the frozen account is a
    // 403 no rule recognises too.
    let out = drill(&["classify", "--jsonl", "-"], &day);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("5 answers"), "{text}");
    assert!(
        text.contains("recognised by no rule (verdict from the status alone): 2"),
        "{text}"
    );
}
