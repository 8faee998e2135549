//! The output of `tune`: the terminal text with the `[levee]` blocks to
//! paste, and the `--json` document.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Evaluated, Origin, Score, TuneReport};
use crate::config::LeveeConfig;

/// `levee` as the scenario file writes it: `[levee]` and its sub-tables,
/// only the keys that are set; empty for an empty table.
pub fn levee_block(levee: &LeveeConfig) -> Result<String, toml::ser::Error> {
    #[derive(Serialize)]
    struct File<'a> {
        levee: &'a LeveeConfig,
    }
    if *levee == LeveeConfig::default() {
        return Ok(String::new());
    }
    toml::to_string(&File { levee })
}

fn served(s: &Score) -> String {
    format!("{}.{:02}%", s.served_bp / 100, s.served_bp % 100)
}

fn upstream(s: &Score) -> String {
    format!("{}.{}", s.upstream_tenths / 10, s.upstream_tenths % 10)
}

fn recovery(s: &Score) -> String {
    match s.recovery_ds {
        None => "-".to_owned(),
        Some(ds) => format!(
            "{}{}.{}s",
            if s.never_recovered { ">=" } else { "" },
            ds / 10,
            ds % 10
        ),
    }
}

/// The numbers of one setting, on one line.
pub(super) fn numbers(s: &Score) -> String {
    format!(
        "served {}, upstream calls {}, recovery {}",
        served(s),
        upstream(s),
        recovery(s)
    )
}

/// A frontier setting's name: `#1`, `#2`, … in display order; the baseline
/// keeps its own.
pub(super) fn label(report: &TuneReport, index: usize) -> String {
    if report.evaluated[index].origin == Origin::Baseline {
        return "baseline".to_owned();
    }
    let rank = report
        .frontier
        .iter()
        .filter(|&&i| report.evaluated[i].origin != Origin::Baseline)
        .position(|&i| i == index)
        .map_or(0, |p| p + 1);
    format!("#{rank}")
}

/// The terminal text: the numbers of the baseline and the frontier, then
/// each frontier setting's `[levee]` block.
pub fn text(report: &TuneReport) -> Result<String, toml::ser::Error> {
    let mut s = String::new();
    let seeds: Vec<String> = report.seeds.iter().map(u64::to_string).collect();
    let searched = report.evaluated.len() - 1;
    let _ = writeln!(
        s,
        "tune: {}, the {} stack: the baseline and {searched} settings, each run with seed{} {} ({} runs in virtual time)",
        report.scenario,
        report.stack,
        if seeds.len() == 1 { "" } else { "s" },
        seeds.join(", "),
        report.evaluated.len() * seeds.len(),
    );
    let _ = writeln!(
        s,
        "scored on the means: served % (higher is better), upstream calls and recovery (lower)\n"
    );
    let _ = writeln!(
        s,
        "  {:<10} {:>8} {:>10} {:>9}  frontier",
        "setting", "served", "upstream", "recovery"
    );
    let baseline_on = report.frontier.contains(&0);
    let shown = report.shown();
    let mut rows = vec![0];
    rows.extend(shown.iter().copied().filter(|&i| i != 0));
    for i in rows {
        let e = &report.evaluated[i];
        let _ = writeln!(
            s,
            "  {:<10} {:>8} {:>10} {:>9}  {}",
            label(report, i),
            served(&e.score),
            upstream(&e.score),
            recovery(&e.score),
            if i != 0 || baseline_on { "yes" } else { "no" }
        );
    }
    let floor = Score {
        served_bp: report.min_served_bp,
        ..report.evaluated[0].score
    };
    let _ = writeln!(
        s,
        "\nThe frontier: {} of {} settings, each beaten on all three by none of the others;\n\
         shown: the {} serving at least {} (--min-served), the rest in --json and --svg.\n\
         To use one, replace the scenario's [levee] tables with its block.",
        report.frontier.len(),
        report.evaluated.len(),
        shown.len(),
        served(&floor),
    );
    for &i in shown {
        let e = &report.evaluated[i];
        let _ = writeln!(s, "\n# {}: {}", label(report, i), numbers(&e.score));
        let block = levee_block(&e.levee)?;
        if block.is_empty() {
            let _ = writeln!(s, "# (the defaults: no [levee] table)");
        } else {
            s.push_str(&block);
        }
    }
    if !shown.contains(&0) {
        let baseline = &report.evaluated[0];
        let _ = writeln!(
            s,
            "\n# baseline (the scenario's own{}): {}",
            if baseline_on {
                ""
            } else {
                ", not on the frontier"
            },
            numbers(&baseline.score)
        );
        let block = levee_block(&baseline.levee)?;
        if block.is_empty() {
            let _ = writeln!(s, "# (the defaults: no [levee] table)");
        } else {
            s.push_str(&block);
        }
    }
    Ok(s)
}

/// One setting in the `--json` document.
#[derive(Serialize)]
struct JsonSetting<'a> {
    label: String,
    origin: &'static str,
    served_percent: f64,
    upstream_calls: f64,
    recovery_s: Option<f64>,
    never_recovered: bool,
    on_frontier: bool,
    /// Shown in the text (on the frontier, serving at least `min_served_percent`).
    shown: bool,
    levee: &'a LeveeConfig,
}

/// The `--json` document: `{"scenario":..,"stack":..,"seeds":[..],
/// "min_served_percent":..,"frontier":[..],"evaluated":[..]}`, the baseline
/// first of `evaluated`.
pub fn json(report: &TuneReport) -> Result<String, serde_json::Error> {
    #[derive(Serialize)]
    struct Document<'a> {
        scenario: &'a str,
        stack: &'a str,
        seeds: &'a [u64],
        min_served_percent: f64,
        frontier: Vec<JsonSetting<'a>>,
        evaluated: Vec<JsonSetting<'a>>,
    }
    let setting = |i: usize| {
        let e: &Evaluated = &report.evaluated[i];
        let on_frontier = report.frontier.contains(&i);
        let shown = report.shown().contains(&i);
        JsonSetting {
            label: if on_frontier || i == 0 {
                label(report, i)
            } else {
                String::new()
            },
            origin: match e.origin {
                Origin::Baseline => "baseline",
                Origin::Sampled => "sampled",
                Origin::Refined => "refined",
            },
            served_percent: f64::from(e.score.served_bp) / 100.0,
            upstream_calls: e.score.upstream_tenths as f64 / 10.0,
            recovery_s: e.score.recovery_ds.map(|ds| ds as f64 / 10.0),
            never_recovered: e.score.never_recovered,
            on_frontier,
            shown,
            levee: &e.levee,
        }
    };
    let document = Document {
        scenario: &report.scenario,
        stack: &report.stack,
        seeds: &report.seeds,
        min_served_percent: f64::from(report.min_served_bp) / 100.0,
        frontier: report.frontier.iter().map(|&i| setting(i)).collect(),
        evaluated: (0..report.evaluated.len()).map(setting).collect(),
    };
    serde_json::to_string_pretty(&document).map(|t| t + "\n")
}
