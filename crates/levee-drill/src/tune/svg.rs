//! `tune --svg`: every evaluated setting as a dot, upstream calls across and
//! served % up, coloured by recovery time (green soon, red late); the
//! frontier ringed, the settings the text shows numbered as there, the
//! baseline a square.

use std::fmt::Write as _;

use super::{Origin, Score, TuneReport, render};
use crate::svg::esc;

const W: f64 = 900.0;
const H: f64 = 560.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// `lo..=hi` padded by a twentieth on each side (a unit when flat).
fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if hi - lo < 1e-9 {
        return (lo - 1.0, hi + 1.0);
    }
    let pad = (hi - lo) / 20.0;
    (lo - pad, hi + pad)
}

/// Green (0) through amber to red (1).
fn ramp(t: f64) -> String {
    let stops = [(0x2c, 0xa0, 0x2c), (0xff, 0xbf, 0x00), (0xd6, 0x27, 0x28)];
    let t = t.clamp(0.0, 1.0) * 2.0;
    let (a, b, f) = if t <= 1.0 {
        (stops[0], stops[1], t)
    } else {
        (stops[1], stops[2], t - 1.0)
    };
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// The SVG document for `report`.
pub fn render(report: &TuneReport) -> String {
    let scores: Vec<&Score> = report.evaluated.iter().map(|e| &e.score).collect();
    let calls = |s: &Score| s.upstream_tenths as f64 / 10.0;
    let served = |s: &Score| f64::from(s.served_bp) / 100.0;
    let fold = |f: &dyn Fn(&Score) -> f64| {
        scores.iter().fold((f64::MAX, f64::MIN), |(lo, hi), s| {
            (lo.min(f(s)), hi.max(f(s)))
        })
    };
    let (x0, x1) = {
        let (lo, hi) = fold(&calls);
        padded(lo, hi)
    };
    let (y0, y1) = {
        let (lo, hi) = fold(&served);
        padded(lo, hi)
    };
    let recoveries: Vec<u64> = scores.iter().filter_map(|s| s.recovery_ds).collect();
    let (r0, r1) = (
        recoveries.iter().copied().min().unwrap_or(0),
        recoveries.iter().copied().max().unwrap_or(0),
    );
    let colour = |s: &Score| match s.recovery_ds {
        None => "#1f77b4".to_owned(),
        Some(_) if r1 == r0 => ramp(0.0),
        Some(ds) => ramp((ds - r0) as f64 / (r1 - r0) as f64),
    };
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |v: f64| LEFT + pw * (v - x0) / (x1 - x0);
    let py = |v: f64| TOP + ph * (1.0 - (v - y0) / (y1 - y0));

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="14">{} — tune: {} settings, means of {} seed(s); frontier ringed, the ones shown numbered, baseline a square</text>"#,
        esc(&report.scenario),
        report.evaluated.len(),
        report.seeds.len()
    );
    // Axes, five ticks each.
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#999999"/>"##
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let (xv, yv) = (x0 + (x1 - x0) * f, y0 + (y1 - y0) * f);
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#666666">{xv:.0}</text><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#666666">{yv:.2}%</text>"##,
            px(xv),
            TOP + ph + 16.0,
            LEFT - 6.0,
            py(yv) + 4.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">upstream calls (mean of the seeds; fewer is better)</text>"#,
        LEFT + pw / 2.0,
        H - 20.0
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">served % (mean; higher is better)</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0
    );
    // Every setting, then the frontier on top.
    let frontier = &report.frontier;
    for (i, e) in report.evaluated.iter().enumerate() {
        if frontier.contains(&i) || e.origin == Origin::Baseline {
            continue;
        }
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}" opacity="0.75"><title>{}</title></circle>"#,
            px(calls(&e.score)),
            py(served(&e.score)),
            colour(&e.score),
            esc(&render::numbers(&e.score))
        );
    }
    for (i, e) in report.evaluated.iter().enumerate() {
        let on = frontier.contains(&i);
        if !on && e.origin != Origin::Baseline {
            continue;
        }
        let (cx, cy) = (px(calls(&e.score)), py(served(&e.score)));
        let label = render::label(report, i);
        let tip = esc(&format!("{label}: {}", render::numbers(&e.score)));
        let stroke = if on { "#000000" } else { "#666666" };
        if e.origin == Origin::Baseline {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{}" stroke="{stroke}" stroke-width="1.5"><title>{tip}</title></rect>"#,
                cx - 5.0,
                cy - 5.0,
                colour(&e.score)
            );
        } else {
            let _ = writeln!(
                s,
                r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="6" fill="{}" stroke="{stroke}" stroke-width="1.5"><title>{tip}</title></circle>"#,
                colour(&e.score)
            );
        }
        // Only what the text shows is named: a frontier's far end crowds.
        if e.origin == Origin::Baseline || report.shown().contains(&i) {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#,
                cx + 8.0,
                cy - 6.0,
                esc(&label)
            );
        }
    }
    // The colour scale of recovery.
    let lx = W - RIGHT + 30.0;
    let _ = writeln!(s, r#"<text x="{lx}" y="{:.1}">recovery</text>"#, TOP + 4.0);
    if recoveries.is_empty() {
        let _ = writeln!(
            s,
            r##"<text x="{lx}" y="{:.1}" fill="#666666">no fault that ends</text>"##,
            TOP + 20.0
        );
    } else {
        for step in 0..=10 {
            let t = f64::from(step) / 10.0;
            let _ = writeln!(
                s,
                r#"<rect x="{lx}" y="{:.1}" width="14" height="15" fill="{}"/>"#,
                TOP + 12.0 + 15.0 * f64::from(step),
                ramp(t)
            );
        }
        for (step, ds) in [(0.0, r0), (10.0, r1)] {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}">{}.{}s</text>"#,
                lx + 20.0,
                TOP + 23.0 + 15.0 * step,
                ds / 10,
                ds % 10
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
