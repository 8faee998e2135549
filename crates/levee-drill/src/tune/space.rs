//! The settings `tune` searches: sixteen keys of the `[levee]` table, each
//! with a short list of values that span what a user would set, ordered so
//! that neighbours in a list are neighbours in effect (the local refinement
//! steps one place along a list).

use std::time::Duration;

use levee_core::breaker::{Cooldown, Jitter, Tripping};
use levee_core::budget::BudgetConfig;
use tower_levee::config::LeveeConfig;

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// On a streak of failures, or on a share of a rolling window.
const TRIPPING: [Tripping; 10] = [
    Tripping::Consecutive { threshold: 1 },
    Tripping::Consecutive { threshold: 2 },
    Tripping::Consecutive { threshold: 3 },
    Tripping::Consecutive { threshold: 5 },
    Tripping::Consecutive { threshold: 8 },
    Tripping::Consecutive { threshold: 12 },
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
const JITTER: [Jitter; 3] = [Jitter::None, Jitter::Equal, Jitter::Full];
const HOLD: [u32; 4] = [0, 2, 6, 12];
const PROBES: [u32; 3] = [1, 2, 3];
const GATE_DEFAULT_WAIT: [Duration; 5] = [secs(1), secs(2), secs(5), secs(10), secs(30)];
const GATE_MAX_WAIT: [Duration; 5] = [secs(30), secs(60), secs(300), secs(600), secs(1800)];
const RETRY_ATTEMPTS: [u32; 5] = [1, 2, 3, 4, 5];
const RETRY_RATIO: [f64; 4] = [0.05, 0.1, 0.2, 0.5];
const BULKHEAD: [usize; 6] = [8, 16, 32, 64, 128, 256];
/// Shadow probes off, then copies ever closer together.
const SHADOW_INTERVAL: [Option<Duration>; 4] = [None, Some(secs(5)), Some(secs(2)), Some(secs(1))];
const SHADOW_SHARE: [f64; 4] = [0.05, 0.1, 0.2, 0.5];
/// Hedging off, then ever more hedges allowed.
const HEDGE_RATIO: [Option<f64>; 4] = [None, Some(0.02), Some(0.05), Some(0.1)];
/// A slow target's demotion, and its longest, ever longer.
const DEMOTION: [(Duration, Duration); 4] = [
    (Duration::from_millis(500), secs(1)),
    (secs(1), secs(2)),
    (secs(2), secs(4)),
    (secs(5), secs(10)),
];

/// How many values each dimension has, in [`Point`] order.
pub(crate) const DIMENSIONS: [usize; 16] = [
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
    SHADOW_INTERVAL.len(),
    SHADOW_SHARE.len(),
    HEDGE_RATIO.len(),
    DEMOTION.len(),
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
            shadow,
            share,
            hedge,
            demotion,
        ] = self.0.map(usize::from);
        let mut cfg = base.clone();
        let b = &mut cfg.breaker;
        b.tripping = TRIPPING[trip].clone();
        // The whole schedule: a table naming only some of its keys would
        // take the others from the default, the hold among them.
        b.cooldown = Cooldown::Exponential {
            base: COOLDOWN[cool],
            multiplier: MULTIPLIER[mult],
            max: MAX_COOLDOWN[max].max(COOLDOWN[cool]),
            jitter: JITTER[jit],
            hold: HOLD[hold],
        };
        b.half_open_probes = PROBES[probes];
        cfg.gate.default_wait = GATE_DEFAULT_WAIT[wait];
        cfg.gate.max_wait = Some(GATE_MAX_WAIT[cap]);
        cfg.retry.max_attempts = RETRY_ATTEMPTS[attempts];
        let budget = cfg.retry.budget;
        cfg.retry.budget =
            BudgetConfig::new(budget.ttl(), budget.min_per_sec(), RETRY_RATIO[ratio]);
        cfg.bulkhead.max_concurrent = BULKHEAD[bulk];
        // A feature's settings only where it is on: a block never names a
        // key that does nothing.
        let f = &mut cfg.failover;
        f.shadow_probes = SHADOW_INTERVAL[shadow].is_some();
        if let Some(interval) = SHADOW_INTERVAL[shadow] {
            f.shadow_probe_interval = interval;
            f.shadow_probe_share = SHADOW_SHARE[share];
        }
        f.hedging = HEDGE_RATIO[hedge].is_some();
        if let Some(ratio) = HEDGE_RATIO[hedge] {
            f.hedge_ratio = ratio;
            (f.demotion, f.max_demotion) = DEMOTION[demotion];
        }
        cfg
    }
}
