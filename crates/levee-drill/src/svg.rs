//! `--svg`: a timeline picture of a scenario. Per stack, per target, one band
//! per mechanism (breaker, gate, park) coloured by state, and a strip of
//! request outcomes per second (served by the first target, by a fallback,
//! failed).

use std::fmt::Write as _;

use crate::report::ScenarioReport;
use crate::scenario::Scenario;

const W: f64 = 1000.0;
const LEFT: f64 = 140.0;
const BAND: f64 = 10.0;

fn colour(mechanism: &str, state: &str) -> Option<&'static str> {
    match (mechanism, state) {
        ("breaker", "open") => Some("#d62728"),
        ("breaker", "half_open") => Some("#ff7f0e"),
        ("gate", "gated") => Some("#1f77b4"),
        ("park", "parked") => Some("#9467bd"),
        _ => None,
    }
}

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The SVG document for `report`.
pub fn render(sc: &Scenario, report: &ScenarioReport) -> String {
    let total_ms = sc.duration.as_millis().max(1) as f64;
    let x = |ms: f64| LEFT + (W - LEFT - 10.0) * (ms / total_ms).min(1.0);
    let lane = 3.0 * BAND + 8.0;
    let block = 30.0 + lane * sc.targets.len() as f64 + 50.0;
    let height = 40.0 + block * report.results.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="14">{} — breaker (red open, orange half-open), gate (blue gated), park (purple parked); outcomes per second (green first target, teal fallback, red failed)</text>"#,
        esc(&report.scenario)
    );
    for f in &sc.faults {
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="28" width="{:.1}" height="{:.1}" fill="#f2e6c9" opacity="0.5"><title>{} {} on {}</title></rect>"##,
            x(f.from.as_millis() as f64),
            (x(f.to.as_millis() as f64) - x(f.from.as_millis() as f64)).max(1.0),
            height - 30.0,
            esc(&f.kind),
            esc(&format!("{:?}-{:?}", f.from, f.to)),
            esc(&f.target)
        );
    }
    for (b, r) in report.results.iter().enumerate() {
        let y0 = 40.0 + block * b as f64;
        let _ = writeln!(
            s,
            r#"<text x="10" y="{:.1}" font-weight="bold">{}: {:.2}% served</text>"#,
            y0 + 12.0,
            esc(&r.stack),
            r.success_rate() * 100.0
        );
        for (ti, t) in sc.targets.iter().enumerate() {
            let ty = y0 + 20.0 + lane * ti as f64;
            let _ = writeln!(
                s,
                r#"<text x="10" y="{:.1}">{}</text>"#,
                ty + 2.0 * BAND,
                esc(&t.name)
            );
            for (mi, mech) in ["breaker", "gate", "park"].iter().enumerate() {
                let my = ty + BAND * mi as f64;
                let _ = writeln!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}" font-size="8" fill="#666666" text-anchor="end">{mech}</text>"##,
                    LEFT - 4.0,
                    my + BAND - 2.0
                );
                let _ = writeln!(
                    s,
                    r##"<rect x="{LEFT}" y="{my:.1}" width="{:.1}" height="{:.1}" fill="#eeeeee"/>"##,
                    W - LEFT - 10.0,
                    BAND - 1.0
                );
                // Each scope of this mechanism on this target: state from its transitions.
                let mut open: Vec<(String, String, u64)> = Vec::new();
                let mut spans: Vec<(u64, u64, &'static str)> = Vec::new();
                for tr in r
                    .transitions
                    .iter()
                    .filter(|tr| tr.target == t.name && tr.mechanism == *mech)
                {
                    if let Some(pos) = open.iter().position(|(sc, _, _)| *sc == tr.scope) {
                        let (_, state, since) = open.remove(pos);
                        if let Some(c) = colour(mech, &state) {
                            spans.push((since, tr.t_ms, c));
                        }
                    }
                    open.push((tr.scope.clone(), tr.to.clone(), tr.t_ms));
                }
                for (_, state, since) in open {
                    if let Some(c) = colour(mech, &state) {
                        spans.push((since, total_ms as u64, c));
                    }
                }
                for (a, z, c) in spans {
                    let _ = writeln!(
                        s,
                        r#"<rect x="{:.1}" y="{my:.1}" width="{:.1}" height="{:.1}" fill="{c}"/>"#,
                        x(a as f64),
                        (x(z as f64) - x(a as f64)).max(0.8),
                        BAND - 1.0
                    );
                }
            }
        }
        // Outcomes per second.
        let secs = sc.duration.as_secs().max(1) as usize;
        let mut buckets = vec![(0u32, 0u32, 0u32); secs + 1];
        for rec in &r.records {
            let b = &mut buckets[(rec.at.as_secs() as usize).min(secs)];
            match rec.result {
                Ok(0) => b.0 += 1,
                Ok(_) => b.1 += 1,
                Err(_) => b.2 += 1,
            }
        }
        let max = buckets
            .iter()
            .map(|b| b.0 + b.1 + b.2)
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let base = y0 + 20.0 + lane * sc.targets.len() as f64 + 40.0;
        let _ = writeln!(
            s,
            r#"<text x="10" y="{:.1}">requests/s</text>"#,
            base - 10.0
        );
        let bw = (W - LEFT - 10.0) / secs as f64;
        for (i, (ok, fb, bad)) in buckets.iter().enumerate().take(secs) {
            let mut y = base;
            for (n, c) in [(*ok, "#2ca02c"), (*fb, "#17becf"), (*bad, "#d62728")] {
                if n == 0 {
                    continue;
                }
                let h = 36.0 * f64::from(n) / max;
                y -= h;
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{c}"/>"#,
                    LEFT + bw * i as f64,
                    bw.max(0.5)
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}
