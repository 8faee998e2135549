//! Property tests of the retry budget's token bucket: over any schedule of
//! deposits and withdrawals, the retries granted never exceed
//! `min_per_sec × ttl + retry_ratio × requests` within a window, and the
//! bucket grants exactly what an independent reference model grants.

use std::time::Duration;

use levee_core::budget::{BudgetConfig, SLOTS, TokenBucket};
use levee_core::clock::Timestamp;
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
enum Op {
    Deposit(u64),
    Withdraw,
}

#[derive(Clone, Copy, Debug)]
struct Event {
    at: u64,
    op: Op,
    granted: bool,
}

/// Ratios exactly representable in millionths, so the reference model can use
/// exact integer arithmetic.
const RATIO_MICROS: [i64; 7] = [0, 1, 100_000, 250_000, 500_000, 1_000_000, 2_500_000];

fn ops() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let advance = prop_oneof![
        4 => Just(0u64),
        4 => 0u64..300,
        2 => 0u64..3_000,
        1 => 0u64..30_000,
    ];
    let op = prop_oneof![
        1 => (1u64..40).prop_map(Op::Deposit),
        2 => Just(Op::Withdraw),
    ];
    proptest::collection::vec((advance, op), 1..300)
}

fn config() -> impl Strategy<Value = (u64, u32, i64)> {
    (
        prop_oneof![Just(1_000u64), Just(2_500), Just(10_000)],
        0u32..20,
        proptest::sample::select(&RATIO_MICROS[..]),
    )
}

struct Model {
    ttl_ms: u64,
    min_per_sec: u32,
    ratio_micros: i64,
    events: Vec<Event>,
}

impl Model {
    fn slot_of(&self, at_ms: u64) -> u64 {
        at_ms * SLOTS as u64 / self.ttl_ms
    }

    fn reserve_micros(&self) -> i64 {
        i64::from(self.min_per_sec) * self.ttl_ms as i64 * 1_000
    }

    /// (deposited requests, granted withdrawals) over events whose slot is in
    /// `first..=last`.
    fn totals(&self, first: i64, last: i64) -> (u64, u64) {
        let (mut d, mut w) = (0, 0);
        for e in &self.events {
            let s = self.slot_of(e.at) as i64;
            if s < first || s > last {
                continue;
            }
            match e.op {
                Op::Deposit(n) => d += n,
                Op::Withdraw if e.granted => w += 1,
                Op::Withdraw => {}
            }
        }
        (d, w)
    }

    /// Whether the reference grants a withdrawal at `at_ms` given the past.
    fn grants(&self, at_ms: u64) -> bool {
        let k = self.slot_of(at_ms) as i64;
        let (d, w) = self.totals(k - SLOTS as i64 + 1, k);
        let balance = self.reserve_micros() + self.ratio_micros * d as i64 - 1_000_000 * w as i64;
        balance >= 1_000_000
    }

    /// The bound as stated: `min_per_sec × ttl + retry_ratio × requests`.
    fn bound(&self, requests: u64) -> f64 {
        f64::from(self.min_per_sec) * self.ttl_ms as f64 / 1_000.0
            + self.ratio_micros as f64 / 1e6 * requests as f64
    }
}

fn run(ttl_ms: u64, min_per_sec: u32, ratio_micros: i64, schedule: &[(u64, Op)]) -> Model {
    let config = BudgetConfig::new(
        Duration::from_millis(ttl_ms),
        min_per_sec,
        ratio_micros as f64 / 1e6,
    );
    let mut bucket = TokenBucket::new(config, Timestamp::ZERO);
    let mut model = Model {
        ttl_ms,
        min_per_sec,
        ratio_micros,
        events: Vec::new(),
    };
    let mut now = 0u64;
    for &(advance, op) in schedule {
        now += advance;
        let t = Timestamp::from_nanos(now * 1_000_000);
        let granted = match op {
            Op::Deposit(n) => {
                bucket.deposit(t, n);
                false
            }
            Op::Withdraw => {
                let expected = model.grants(now);
                let granted = bucket.withdraw(t);
                assert_eq!(granted, expected, "bucket and model disagree at {now} ms");
                granted
            }
        };
        model.events.push(Event {
            at: now,
            op,
            granted,
        });
        if granted {
            // The stated bound, in the window ending at this grant.
            let k = model.slot_of(now) as i64;
            let (d, w) = model.totals(k - SLOTS as i64 + 1, k);
            assert!(
                w as f64 <= model.bound(d) + 1e-9,
                "{w} retries in the window ending at {now} ms exceed the bound for {d} requests"
            );
        }
    }
    let stats = bucket.stats();
    let deposited: u64 = model
        .events
        .iter()
        .map(|e| match e.op {
            Op::Deposit(n) => n,
            Op::Withdraw => 0,
        })
        .sum();
    let granted = model.events.iter().filter(|e| e.granted).count() as u64;
    let withdrawals = model
        .events
        .iter()
        .filter(|e| matches!(e.op, Op::Withdraw))
        .count() as u64;
    assert_eq!(stats.deposited, deposited);
    assert_eq!(stats.granted, granted);
    assert_eq!(stats.granted + stats.refused, withdrawals);
    model
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn bucket_grants_exactly_what_the_reference_model_grants(
        (ttl_ms, min_per_sec, ratio) in config(),
        schedule in ops(),
    ) {
        run(ttl_ms, min_per_sec, ratio, &schedule);
    }

    #[test]
    fn retries_in_any_ttl_span_never_exceed_reserve_plus_ratio_of_requests(
        (ttl_ms, min_per_sec, ratio) in config(),
        schedule in ops(),
    ) {
        let model = run(ttl_ms, min_per_sec, ratio, &schedule);
        let last = model.slot_of(model.events.last().map_or(0, |e| e.at)) as i64;
        let n = SLOTS as i64;
        for first in 0..=last {
            // Retries in `first..first+n` are paid by the reserve and by
            // requests deposited in that span and the n-1 slots before it.
            let (_, w) = model.totals(first, first + n - 1);
            let (d, _) = model.totals(first - n + 1, first + n - 1);
            prop_assert!(
                w as f64 <= model.bound(d) + 1e-9,
                "{} retries in slots {}..{} exceed the bound for {} requests", w, first, first + n, d
            );
        }
    }

    #[test]
    fn retries_within_the_first_ttl_never_exceed_reserve_plus_ratio_of_requests(
        (ttl_ms, min_per_sec, ratio) in config(),
        schedule in ops(),
    ) {
        // Squeeze the schedule into the first window.
        let squeezed: Vec<(u64, Op)> = schedule.iter().map(|&(_, op)| (0, op)).collect();
        let mut schedule = squeezed;
        if let Some(first) = schedule.first_mut() {
            first.0 = ttl_ms - 1;
        }
        // Then drain the bucket: within one window it grants exactly the bound.
        let config = BudgetConfig::new(Duration::from_millis(ttl_ms), min_per_sec, ratio as f64 / 1e6);
        let requests: u64 = schedule.iter().map(|(_, op)| match op {
            Op::Deposit(n) => *n,
            Op::Withdraw => 0,
        }).sum();
        let drain = config.max_retries(requests) as usize + 1;
        schedule.extend(std::iter::repeat_n((0, Op::Withdraw), drain));
        let model = run(ttl_ms, min_per_sec, ratio, &schedule);
        let (requests, retries) = model.totals(0, SLOTS as i64 - 1);
        prop_assert!(retries as f64 <= model.bound(requests) + 1e-9);
        prop_assert_eq!(retries, config.max_retries(requests));
    }
}

#[test]
fn a_budget_config_keeps_what_it_was_given_and_refuses_each_bound() {
    let c = BudgetConfig::try_new(Duration::from_secs(10), 7, 0.25).unwrap();
    assert_eq!(
        (c.ttl(), c.min_per_sec(), c.retry_ratio()),
        (Duration::from_secs(10), 7, 0.25)
    );
    let bucket = TokenBucket::new(c, Timestamp::ZERO);
    assert_eq!(bucket.config().retry_ratio(), 0.25);
    // The bounds are inclusive, and each side of each is checked.
    for (ttl, ok) in [
        (Duration::ZERO, false),
        (Duration::from_millis(1), true),
        (Duration::from_secs(3600), true),
        (Duration::from_secs(3601), false),
    ] {
        assert_eq!(BudgetConfig::try_new(ttl, 1, 0.1).is_ok(), ok, "{ttl:?}");
    }
    for (ratio, ok) in [
        (0.0, true),
        (1000.0, true),
        (1000.5, false),
        (-0.1, false),
        (f64::NAN, false),
        (f64::INFINITY, false),
    ] {
        let r = BudgetConfig::try_new(Duration::from_secs(10), 1, ratio);
        assert_eq!(r.is_ok(), ok, "{ratio}");
        if !ok {
            assert!(r.unwrap_err().to_string().contains("budget.retry_ratio"));
        }
    }
}

#[test]
fn a_buckets_debug_shows_its_balance_in_tokens() {
    // min 1/s over 10 s: a reserve of 10 tokens; 4 requests at 0.5 add 2.
    let config = BudgetConfig::try_new(Duration::from_secs(10), 1, 0.5).unwrap();
    let mut bucket = TokenBucket::new(config, Timestamp::ZERO);
    bucket.deposit(Timestamp::ZERO, 4);
    let debug = format!("{bucket:?}");
    assert!(debug.starts_with("TokenBucket {"), "{debug}");
    assert!(debug.contains("balance: 12.0"), "{debug}");
}
