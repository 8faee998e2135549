//! Scores and the Pareto frontier: the settings no other evaluated setting
//! beats on served requests, upstream calls, recovery and p99 latency
//! together.

use std::cmp::Ordering;

/// A setting's score: means over the seeds, rounded to what is printed
/// (so two settings that print the same compare the same, and the printed
/// numbers are exactly what a rerun reproduces).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Score {
    /// Served requests, in hundredths of a percent (10 000 = all).
    pub served_bp: u32,
    /// Calls that reached the provider, in tenths of a call.
    pub upstream_tenths: u64,
    /// Fault end to the first request its target serves again, in tenths of
    /// a second; a seed whose target never served again counts the rest of
    /// the run. `None` when the scenario has no fault that ends.
    pub recovery_ds: Option<u64>,
    /// Whether some seed never saw the target serve again (the recovery
    /// is then a lower bound).
    pub never_recovered: bool,
    /// The 99th percentile of the requests' latency, in milliseconds,
    /// rounded to 10: what hedging and demotion buy, at the price of calls.
    pub p99_ms: u64,
}

impl Score {
    /// Whether `self` is at least as good as `other` on all four and
    /// better on one: more served, fewer upstream calls, sooner recovery,
    /// a lower p99.
    pub fn dominates(&self, other: &Score) -> bool {
        let recovery = self.recovery_ds.cmp(&other.recovery_ds);
        let at_least = self.served_bp >= other.served_bp
            && self.upstream_tenths <= other.upstream_tenths
            && recovery != Ordering::Greater
            && self.p99_ms <= other.p99_ms;
        at_least
            && (self.served_bp > other.served_bp
                || self.upstream_tenths < other.upstream_tenths
                || recovery == Ordering::Less
                || self.p99_ms < other.p99_ms)
    }

    /// The order the frontier is shown in: most served first, then fewest
    /// calls, then soonest recovery, then the lowest p99.
    pub fn display_order(&self, other: &Score) -> Ordering {
        other
            .served_bp
            .cmp(&self.served_bp)
            .then(self.upstream_tenths.cmp(&other.upstream_tenths))
            .then(self.recovery_ds.cmp(&other.recovery_ds))
            .then(self.p99_ms.cmp(&other.p99_ms))
    }

    /// The four numbers, as compared.
    fn key(&self) -> (u32, u64, Option<u64>, u64) {
        (
            self.served_bp,
            self.upstream_tenths,
            self.recovery_ds,
            self.p99_ms,
        )
    }
}

/// The indices of the non-dominated scores, in display order. Of settings
/// that score exactly the same, only the first evaluated is kept: the
/// frontier lists trade-offs, not aliases.
pub fn frontier(scores: &[Score]) -> Vec<usize> {
    let mut front: Vec<usize> = (0..scores.len())
        .filter(|&i| {
            let s = &scores[i];
            !scores.iter().any(|o| o.dominates(s))
                && !scores[..i].iter().any(|o| o.key() == s.key())
        })
        .collect();
    front.sort_by(|&a, &b| scores[a].display_order(&scores[b]).then(a.cmp(&b)));
    front
}
