//! `levee-drill tune`: the same output for the same seed, blocks that paste
//! back into the scenario and reproduce their numbers, and a frontier that
//! no evaluated setting beats.

use std::process::Command;

use levee_drill::report::recovery_from;
use levee_drill::run::run_scenario;
use levee_drill::scenario::Scenario;
use levee_drill::tune::{Score, TuneOptions, frontier, levee_block, levee_table, tune};
use proptest::prelude::*;
use tower_levee::config::LeveeConfig;

/// Two accounts, the first down for 15 s of 40: small enough that a
/// tune of a dozen settings runs in about a second in a debug build.
const TINY: &str = "name = \"tiny\"\nduration = \"40s\"\nseed = 3\nstacks = [\"levee\"]\n\
    [load]\nrate = 10\nmodel = \"gpt-4o\"\ntimeout = \"30s\"\n\
    [[target]]\nname = \"primary\"\ndialect = \"openai\"\n\
    [[target]]\nname = \"backup\"\ndialect = \"anthropic\"\n\
    [[fault]]\ntarget = \"primary\"\nkind = \"outage\"\nfrom = \"5s\"\nto = \"20s\"\nstatus = 503\n";

fn tune_cli(file: &std::path::Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_levee-drill"))
        .arg("tune")
        .arg(file)
        .args(["--budget", "8", "--seeds", "2"])
        .args(extra)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "no progress noise in a pipe");
    String::from_utf8(out.stdout).unwrap()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("levee-drill-tune-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The printed settings: (the `# label: numbers` line, the block under it).
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("# ") && line.contains(": served ") {
            out.push((line.to_owned(), String::new()));
        } else if let Some((_, block)) = out.last_mut()
            && !line.starts_with('#')
        {
            block.push_str(line);
            block.push('\n');
        }
    }
    out
}

/// The numbers line the tune prints, recomputed from runs of the scenario.
fn numbers_of(sc: &Scenario, seeds: &[u64]) -> String {
    let (mut served, mut upstream, mut recovery_ms, mut never) = (0.0, 0.0, 0.0, false);
    let mut p99 = 0.0;
    let rest = recovery_from(sc).map(|from| sc.duration - from);
    for &seed in seeds {
        let mut sc = sc.clone();
        sc.seed = seed;
        let report = run_scenario(&sc).expect("runs");
        let levee = &report.results[0];
        served += levee.success_rate();
        upstream += levee.upstream_calls as f64;
        never |= levee.recover.is_none();
        recovery_ms += levee.recover.or(rest).unwrap().as_secs_f64() * 1000.0;
        p99 += levee.latency_ms.p99 as f64;
    }
    let n = seeds.len() as f64;
    let score = Score {
        served_bp: (served / n * 10_000.0).round() as u32,
        upstream_tenths: (upstream / n * 10.0).round() as u64,
        recovery_ds: Some((recovery_ms / n / 100.0).round() as u64),
        never_recovered: never,
        p99_ms: (p99 / n / 10.0).round() as u64 * 10,
    };
    format!(
        "served {}.{:02}%, upstream calls {}.{}, recovery {}{}.{}s, p99 {} ms",
        score.served_bp / 100,
        score.served_bp % 100,
        score.upstream_tenths / 10,
        score.upstream_tenths % 10,
        if never { ">=" } else { "" },
        score.recovery_ds.unwrap() / 10,
        score.recovery_ds.unwrap() % 10,
        score.p99_ms
    )
}

#[test]
fn the_same_seed_prints_the_same_bytes() {
    let dir = scratch("same");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let first = tune_cli(&file, &["--seed", "11"]);
    assert_eq!(first, tune_cli(&file, &["--seed", "11"]));
    assert!(first.contains("seeds 11, 12"), "{first}");
    assert_ne!(
        first,
        tune_cli(&file, &["--seed", "12"]),
        "the seed matters"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn threads_do_not_change_the_result() {
    let sc = Scenario::from_toml(TINY).unwrap();
    let text = |threads| {
        let options = TuneOptions {
            budget: 6,
            seeds: 1,
            first_seed: 5,
            threads,
            min_served_bp: None,
        };
        levee_drill::tune::text(&tune(&sc, &options, &|_, _| {}).unwrap()).unwrap()
    };
    assert_eq!(text(1), text(3));
}

#[test]
fn a_printed_block_pasted_into_the_scenario_reproduces_its_numbers() {
    let dir = scratch("paste");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    // The whole frontier, not only its best-served settings.
    let text = tune_cli(&file, &["--min-served", "0"]);
    let printed = blocks(&text);
    assert!(
        printed
            .iter()
            .filter(|(_, block)| !block.is_empty())
            .count()
            >= 2,
        "settings of the search, not only the baseline:\n{text}"
    );
    for (heading, block) in printed {
        let sc = Scenario::from_toml(&format!("{TINY}{block}"))
            .unwrap_or_else(|e| panic!("{heading}: the block does not parse: {e}\n{block}"));
        let numbers = numbers_of(&sc, &[3, 4]);
        assert!(
            heading.ends_with(&numbers),
            "{heading}\nrerun: {numbers}\n{block}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_json_and_the_picture_hold_every_setting() {
    let dir = scratch("files");
    let (file, json, svg) = (dir.join("t.toml"), dir.join("t.json"), dir.join("t.svg"));
    std::fs::write(&file, TINY).unwrap();
    let text = tune_cli(
        &file,
        &[
            "--json",
            json.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let evaluated = doc["evaluated"].as_array().unwrap();
    assert_eq!(evaluated.len(), 9, "the baseline and the budget of 8");
    assert_eq!(evaluated[0]["origin"], "baseline");
    let frontier = doc["frontier"].as_array().unwrap();
    assert_eq!(
        frontier.len(),
        evaluated
            .iter()
            .filter(|e| e["on_frontier"] == true)
            .count()
    );
    for f in frontier {
        let heading = format!("# {}: served", f["label"].as_str().unwrap());
        assert_eq!(text.contains(&heading), f["shown"] == true, "{heading}");
    }
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg") && picture.ends_with("</svg>\n"));
    assert_eq!(picture.matches("<title>").count(), 9, "a dot per setting");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_evaluated_setting_dominates_the_frontier() {
    let sc = Scenario::from_toml(TINY).unwrap();
    let options = TuneOptions {
        budget: 12,
        seeds: 1,
        first_seed: 9,
        threads: 2,
        min_served_bp: None,
    };
    let report = tune(&sc, &options, &|_, _| {}).unwrap();
    assert_eq!(report.evaluated.len(), 13);
    for &f in &report.frontier {
        for e in &report.evaluated {
            assert!(!e.score.dominates(&report.evaluated[f].score));
        }
    }
}

/// A config's every key and value, to compare two (a config holds no
/// `PartialEq`: a custom policy cannot be compared).
fn keys(levee: &LeveeConfig) -> serde_json::Value {
    serde_json::to_value(levee).unwrap()
}

#[test]
fn every_levee_key_survives_a_round_trip_through_the_block() {
    let text = include_str!("data/every-levee-key.toml");
    let sc = Scenario::from_toml(text).unwrap();
    let block = levee_block(&sc.levee).unwrap();
    let head = &text[..text.find("[levee").unwrap()];
    let again = Scenario::from_toml(&format!("{head}{block}")).unwrap();
    assert_eq!(keys(&again.levee), keys(&sc.levee), "{block}");
}

#[test]
fn a_printed_block_is_the_librarys_config() {
    #[derive(serde::Deserialize)]
    struct File {
        levee: LeveeConfig,
    }
    let every = Scenario::from_toml(include_str!("data/every-levee-key.toml")).unwrap();
    let tiny = Scenario::from_toml(TINY).unwrap();
    let options = TuneOptions {
        budget: 6,
        seeds: 1,
        first_seed: 5,
        threads: 2,
        min_served_bp: Some(0),
    };
    let report = tune(&tiny, &options, &|_, _| {}).unwrap();
    let configs = std::iter::once(&every.levee).chain(report.evaluated.iter().map(|e| &e.levee));
    for levee in configs {
        let block = levee_block(levee).unwrap();
        // Pasted into a service's file (or the gateway's), it reads as the
        // same settings the drill ran, the drill's own defaults included.
        let file: File = toml::from_str(&block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert_eq!(keys(&file.levee), keys(levee), "{block}");
        // Only what differs from the library's defaults, and the bulkhead.
        let printed = levee_table(levee).unwrap();
        let defaults = toml::Table::try_from(LeveeConfig::default()).unwrap();
        for (section, table) in &printed {
            for (key, value) in table.as_table().unwrap() {
                assert!(
                    (section.as_str(), key.as_str()) == ("bulkhead", "max_concurrent")
                        || defaults[section].get(key) != Some(value),
                    "{section}.{key} is the default:\n{block}"
                );
            }
        }
        assert!(
            printed["bulkhead"].get("max_concurrent").is_some(),
            "{block}"
        );
    }
}

#[test]
fn a_partial_cooldown_is_never_printed() {
    let mut sc = Scenario::from_toml(TINY).unwrap();
    sc.levee.breaker = toml::from_str("cooldown = { base = \"5s\" }").unwrap();
    let block = levee_block(&sc.levee).unwrap();
    // `{ base = "5s" }` holds no cool-off at the base (the default holds
    // six): the block writes the schedule whole, so it reads back the same.
    assert!(
        block.contains(
            "cooldown = { base = \"5s\", hold = 0, jitter = \"equal\", max = \"15m\", multiplier = 2.0 }"
        ),
        "{block}"
    );
    let again = Scenario::from_toml(&format!("{TINY}{block}")).unwrap();
    assert_eq!(keys(&again.levee), keys(&sc.levee), "{block}");
}

fn score() -> impl Strategy<Value = Score> {
    (
        9_990u32..=10_000,
        0u64..6,
        prop::option::of(0u64..6),
        0u64..4,
    )
        .prop_map(|(s, u, r, p)| Score {
            served_bp: s,
            upstream_tenths: u,
            recovery_ds: r,
            never_recovered: false,
            p99_ms: p,
        })
}

proptest! {
    #[test]
    fn the_frontier_is_exactly_the_non_dominated(scores in prop::collection::vec(score(), 1..40)) {
        let front = frontier(&scores);
        for &f in &front {
            prop_assert!(!scores.iter().any(|o| o.dominates(&scores[f])));
        }
        for (i, s) in scores.iter().enumerate() {
            if !front.contains(&i) {
                // Beaten, or a tie of a setting listed before it.
                prop_assert!(
                    scores.iter().any(|o| o.dominates(s))
                        || front.iter().any(|&f| f < i && scores[f] == *s)
                );
            }
        }
    }
}
