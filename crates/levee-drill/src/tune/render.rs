//! The output of `tune`: the terminal text with the `[levee]` blocks to
//! paste, and the `--json` document.

use std::fmt::Write as _;

use serde::Serialize;
use tower_levee::config::LeveeConfig;

use super::{Evaluated, Origin, Score, TuneReport};

/// Keys written whatever their value: the drill reads their absence
/// differently from the library (see [`crate::scenario`]), so a block that
/// left one out would run differently in a scenario than in a service.
const ALWAYS: [(&str, &str); 1] = [("bulkhead", "max_concurrent")];

/// The keys of `levee` to print, section by section: those whose value
/// differs from the library's default, and `bulkhead.max_concurrent`
/// always (its absence means 256 in a scenario, 64 elsewhere). Keys are
/// compared and kept whole (a `cooldown` table with all its keys): a table
/// naming only some of its keys takes the others from the default when read.
pub fn levee_table(levee: &LeveeConfig) -> Result<toml::Table, toml::ser::Error> {
    let written = toml::Table::try_from(levee)?;
    let defaults = toml::Table::try_from(LeveeConfig::default())?;
    let mut out = toml::Table::new();
    for (section, table) in written {
        let Some(table) = table.as_table() else {
            continue;
        };
        let default = defaults.get(&section).and_then(toml::Value::as_table);
        // A key the default writes and `levee` does not needs no line: the
        // one such, `breaker.threshold`, is absent beside a rolling
        // window's keys, which are written and select the window.
        let keys: toml::Table = table
            .iter()
            .filter(|&(key, value)| {
                ALWAYS.contains(&(section.as_str(), key.as_str()))
                    || default.and_then(|d| d.get(key)) != Some(value)
            })
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !keys.is_empty() {
            out.insert(section, toml::Value::Table(keys));
        }
    }
    Ok(out)
}

/// `levee` as a file writes it, to paste into a scenario, a service's
/// config or the gateway's: a `[levee.section]` table per section with a
/// key to print ([`levee_table`]; `[levee.bulkhead]` at least), a
/// table-valued key inline.
pub fn levee_block(levee: &LeveeConfig) -> Result<String, toml::ser::Error> {
    let mut block = String::new();
    for (section, keys) in levee_table(levee)? {
        if !block.is_empty() {
            block.push('\n');
        }
        let _ = writeln!(block, "[levee.{section}]");
        for (key, value) in keys.as_table().into_iter().flatten() {
            let _ = writeln!(block, "{key} = {value}");
        }
    }
    Ok(block)
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
        "served {}, upstream calls {}, recovery {}, p99 {} ms",
        served(s),
        upstream(s),
        recovery(s),
        s.p99_ms
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
        "scored on the means: served % (higher is better), upstream calls, recovery and p99 (lower)\n"
    );
    let _ = writeln!(
        s,
        "  {:<10} {:>8} {:>10} {:>9} {:>8}  frontier",
        "setting", "served", "upstream", "recovery", "p99"
    );
    let baseline_on = report.frontier.contains(&0);
    let shown = report.shown();
    let mut rows = vec![0];
    rows.extend(shown.iter().copied().filter(|&i| i != 0));
    for i in rows {
        let e = &report.evaluated[i];
        let _ = writeln!(
            s,
            "  {:<10} {:>8} {:>10} {:>9} {:>8}  {}",
            label(report, i),
            served(&e.score),
            upstream(&e.score),
            recovery(&e.score),
            format!("{} ms", e.score.p99_ms),
            if i != 0 || baseline_on { "yes" } else { "no" }
        );
    }
    let floor = Score {
        served_bp: report.min_served_bp,
        ..report.evaluated[0].score
    };
    let _ = writeln!(
        s,
        "\nThe frontier: {} of {} settings, each beaten on all four by none of the others;\n\
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
        s.push_str(&levee_block(&e.levee)?);
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
        s.push_str(&levee_block(&baseline.levee)?);
    }
    Ok(s)
}

/// One setting in the `--json` document.
#[derive(Serialize)]
struct JsonSetting {
    label: String,
    origin: &'static str,
    served_percent: f64,
    upstream_calls: f64,
    recovery_s: Option<f64>,
    never_recovered: bool,
    p99_ms: u64,
    on_frontier: bool,
    /// Shown in the text (on the frontier, serving at least `min_served_percent`).
    shown: bool,
    /// The keys its `[levee]` block prints.
    levee: toml::Table,
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
        frontier: Vec<JsonSetting>,
        evaluated: Vec<JsonSetting>,
    }
    let setting = |i: usize| -> Result<JsonSetting, serde_json::Error> {
        let e: &Evaluated = &report.evaluated[i];
        let on_frontier = report.frontier.contains(&i);
        let shown = report.shown().contains(&i);
        Ok(JsonSetting {
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
            p99_ms: e.score.p99_ms,
            on_frontier,
            shown,
            levee: levee_table(&e.levee).map_err(serde::ser::Error::custom)?,
        })
    };
    let document = Document {
        scenario: &report.scenario,
        stack: &report.stack,
        seeds: &report.seeds,
        min_served_percent: f64::from(report.min_served_bp) / 100.0,
        frontier: report
            .frontier
            .iter()
            .map(|&i| setting(i))
            .collect::<Result<_, _>>()?,
        evaluated: (0..report.evaluated.len())
            .map(setting)
            .collect::<Result<_, _>>()?,
    };
    serde_json::to_string_pretty(&document).map(|t| t + "\n")
}
