//! The binary's contract: no argument runs the suite; `run FILE.toml`
//! writes the JSON report; each subcommand has its own `--help`; bad
//! arguments exit with 2 and a suggestion; a bad file is one line on stderr.

use std::process::Command;

fn drill(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_levee-drill"))
        .args(args)
        .output()
        .expect("runs")
}

#[test]
fn no_argument_runs_the_builtin_suite() {
    let out = drill(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "hard-outage",
        "throttle-storm",
        "spend-cap",
        "revoked-key",
        "api-wide-529",
        "brownout",
        "flapping",
        "midstream-errors",
    ] {
        assert!(
            text.contains(&format!("scenario: {name}")),
            "{name} missing from:\n{text}"
        );
    }
    for stack in ["unprotected", "naive", "levee"] {
        assert!(text.contains(stack));
    }
}

#[test]
fn run_writes_the_json_report_and_the_svg() {
    let dir = std::env::temp_dir().join(format!("levee-drill-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        "name = \"tiny\"\nduration = \"20s\"\nseed = 1\n[load]\nrate = 5\nmodel = \"gpt-4o\"\n\
         [[target]]\nname = \"a\"\ndialect = \"openai\"\n[[target]]\nname = \"b\"\ndialect = \"anthropic\"\n\
         [[fault]]\ntarget = \"a\"\nkind = \"outage\"\nfrom = \"5s\"\nto = \"15s\"\n",
    )
    .unwrap();
    let (json, svg) = (dir.join("o.json"), dir.join("o.svg"));
    let out = drill(&[
        "run",
        scenario.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["scenario"], "tiny");
    assert_eq!(v["results"].as_array().unwrap().len(), 6, "every stack");
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let first = std::fs::read(&json).unwrap();
    assert!(
        drill(&[
            "run",
            scenario.to_str().unwrap(),
            "--json",
            json.to_str().unwrap()
        ])
        .status
        .success()
    );
    assert_eq!(
        first,
        std::fs::read(&json).unwrap(),
        "same seed, same bytes"
    );

    let bad_scale = drill(&[
        "run",
        scenario.to_str().unwrap(),
        "--live",
        "--time-scale",
        "0",
    ]);
    assert_eq!(bad_scale.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_scale.stderr).contains("--time-scale"));

    std::fs::write(
        &scenario,
        "name = \"bad\"\nduration = \"soon\"\n[load]\nrate = 1\nmodel = \"m\"\n",
    )
    .unwrap();
    let bad = drill(&["run", scenario.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("duration"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_subcommand_has_its_own_help() {
    for (command, says) in [
        ("run", "--time-scale"),
        ("suite", "--svg-dir"),
        ("tune", "--budget"),
        ("classify", "verdict"),
        ("samples", "real provider responses"),
    ] {
        let out = drill(&[command, "--help"]);
        assert!(out.status.success(), "{command} --help");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(&format!("Usage: levee-drill {command}")) && text.contains(says),
            "{command} --help:\n{text}"
        );
    }
}

#[test]
fn a_mistyped_flag_gets_a_suggestion_and_fails() {
    let out = drill(&["run", "s.toml", "--jsn", "o.json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("'--jsn'") && err.contains("similar argument exists: '--json'"),
        "{err}"
    );
    let out = drill(&["sute"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8(out.stderr).unwrap().contains("'suite'"),
        "a mistyped subcommand gets one too"
    );
}

#[test]
fn a_bad_file_fails_with_one_line() {
    let dir = std::env::temp_dir().join(format!("levee-drill-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.toml");
    let malformed = dir.join("malformed.toml");
    std::fs::write(&malformed, "name = \"x\"\nduration = 5\n").unwrap();
    for (file, code, says) in [
        (&missing, 1, "missing.toml: "),
        (
            &malformed,
            2,
            "`duration` (line 2, column 12): invalid type: integer `5`",
        ),
    ] {
        let out = drill(&["run", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(code), "{}", file.display());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with("levee-drill: ") && err.contains(says),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
