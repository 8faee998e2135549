//! The settings `tune` searches: twelve keys of the `[levee]` table, each
//! with a short list of values that span what a user would set, ordered so
//! that neighbours in a list are neighbours in effect (the local refinement
//! steps one place along a list).

use std::time::Duration;

use crate::config::LeveeConfig;

/// How the breaker trips: on a streak, or on a share of a rolling window.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tripping {
    /// `threshold` consecutive failures.
    Consecutive(u32),
    /// `failure_ratio` of at least `min_calls` calls within `window`.
    Rolling {
        window: Duration,
        min_calls: u32,
        failure_ratio: f64,
    },
}

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

const TRIPPING: [Tripping; 10] = [
    Tripping::Consecutive(1),
    Tripping::Consecutive(2),
    Tripping::Consecutive(3),
    Tripping::Consecutive(5),
    Tripping::Consecutive(8),
    Tripping::Consecutive(12),
    Tripping::Rolling {
        window: secs(60),
        min_calls: 20,
        failure_ratio: 0.5,
    },
    Tripping::Rolling {
        window: secs(30),
        min_calls: 10,
        failure_ratio: 0.5,
    },
    Tripping::Rolling {
        window: secs(10),
        min_calls: 5,
        failure_ratio: 0.5,
    },
    Tripping::Rolling {
        window: secs(30),
        min_calls: 10,
        failure_ratio: 0.25,
    },
];
const COOLDOWN: [Duration; 7] = [
    secs(1),
    secs(2),
    secs(5),
    secs(10),
    secs(20),
    secs(30),
    secs(60),
];
const MULTIPLIER: [f64; 4] = [1.5, 2.0, 3.0, 4.0];
/// Raised to the base where the base is longer.
const MAX_COOLDOWN: [Duration; 5] = [secs(30), secs(60), secs(300), secs(900), secs(1800)];
const JITTER: [&str; 3] = ["none", "equal", "full"];
const HOLD: [u32; 4] = [0, 2, 6, 12];
const PROBES: [u32; 3] = [1, 2, 3];
const GATE_DEFAULT_WAIT: [Duration; 5] = [secs(1), secs(2), secs(5), secs(10), secs(30)];
const GATE_MAX_WAIT: [Duration; 5] = [secs(30), secs(60), secs(300), secs(600), secs(1800)];
const RETRY_ATTEMPTS: [u32; 5] = [1, 2, 3, 4, 5];
const RETRY_RATIO: [f64; 4] = [0.05, 0.1, 0.2, 0.5];
const BULKHEAD: [usize; 6] = [8, 16, 32, 64, 128, 256];

/// How many values each dimension has, in [`Point`] order.
pub(crate) const DIMENSIONS: [usize; 12] = [
    TRIPPING.len(),
    COOLDOWN.len(),
    MULTIPLIER.len(),
    MAX_COOLDOWN.len(),
    JITTER.len(),
    HOLD.len(),
    PROBES.len(),
    GATE_DEFAULT_WAIT.len(),
    GATE_MAX_WAIT.len(),
    RETRY_ATTEMPTS.len(),
    RETRY_RATIO.len(),
    BULKHEAD.len(),
];

/// One setting of the search: an index into each dimension's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Point(pub(crate) [u8; DIMENSIONS.len()]);

impl Point {
    /// A point drawn uniformly from the grid.
    pub(crate) fn random(rng: &mut fastrand::Rng) -> Point {
        Point(DIMENSIONS.map(|n| rng.u8(..n as u8)))
    }

    /// A neighbour: one or two dimensions moved one place along their list
    /// (back from an end).
    pub(crate) fn neighbour(self, rng: &mut fastrand::Rng) -> Point {
        let mut next = self;
        let moves = if rng.u8(..3) == 0 { 2 } else { 1 };
        for _ in 0..moves {
            let dim = rng.usize(..DIMENSIONS.len());
            let (at, last) = (next.0[dim], DIMENSIONS[dim] as u8 - 1);
            next.0[dim] = match (at, rng.bool()) {
                (0, _) => 1.min(last),
                (at, _) if at == last => at - 1,
                (at, true) => at + 1,
                (at, false) => at - 1,
            };
        }
        next
    }

    /// The scenario's own `[levee]` with this point's values in place of
    /// the searched keys; every other key (a `slow_call`, pacing) is kept.
    pub(crate) fn apply(self, base: &LeveeConfig) -> LeveeConfig {
        let [
            trip,
            cool,
            mult,
            max,
            jit,
            hold,
            probes,
            wait,
            cap,
            attempts,
            ratio,
            bulk,
        ] = self.0.map(usize::from);
        let mut cfg = base.clone();
        let b = &mut cfg.breaker;
        match TRIPPING[trip] {
            Tripping::Consecutive(threshold) => {
                b.threshold = Some(threshold);
                (b.window, b.min_calls, b.failure_ratio) = (None, None, None);
            }
            Tripping::Rolling {
                window,
                min_calls,
                failure_ratio,
            } => {
                b.threshold = None;
                b.window = Some(window);
                b.min_calls = Some(min_calls);
                b.failure_ratio = Some(failure_ratio);
            }
        }
        b.cooldown = Some(COOLDOWN[cool]);
        b.multiplier = Some(MULTIPLIER[mult]);
        b.max_cooldown = Some(MAX_COOLDOWN[max].max(COOLDOWN[cool]));
        b.jitter = Some(JITTER[jit].to_owned());
        b.cooldown_hold = Some(HOLD[hold]);
        b.half_open_probes = Some(PROBES[probes]);
        cfg.gate.default_wait = Some(GATE_DEFAULT_WAIT[wait]);
        cfg.gate.max_wait = Some(GATE_MAX_WAIT[cap]);
        cfg.retry.max_attempts = Some(RETRY_ATTEMPTS[attempts]);
        cfg.retry.retry_ratio = Some(RETRY_RATIO[ratio]);
        cfg.bulkhead.max_concurrent = Some(BULKHEAD[bulk]);
        cfg
    }
}
