//! The failover's cost per call on the primary's success path, next to the
//! breaker alone and to the floor of any router over it
//! (`common::first_target`: call the first target, count its success),
//! that floor without the handle on the router's state each call clones,
//! and, for two targets, that floor with the copy of the request a second
//! target needs kept (`common::kept_copy`). `failover-stale-open` is the
//! two-target case with a domain in the primary's layer that opened once
//! and was never called again: its cool-off over, it refuses nothing, so
//! the peeks stay on the fast path.
//!
//! Run: `cargo bench -p benches --bench failover`. Figures are ns per call;
//! compare within one run (the machine is shared and noisy).
#![allow(missing_docs)]

mod common;
use common::first_target::FirstTarget;
use common::kept_copy::KeptCopy;
use common::{Bare, contended, single_thread};

use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::Empty;
use tower::Layer;
use tower_levee::breaker::BreakerLayer;
use tower_levee::failover::{Failover, Target};

fn breaker() -> tower_levee::breaker::Breaker<Bare> {
    BreakerLayer::new().layer(Bare)
}

/// `n` targets, the primary healthy (and warmed so its domain is tracked).
fn failover(n: usize) -> Failover<(), Empty<Bytes>, Bare> {
    let mut b = Failover::builder();
    for i in 0..n {
        b = b.target(Target::new(format!("t{i}"), Bare));
    }
    b.build().unwrap()
}

/// Two targets, the primary's breaker open: every call skips it.
fn failover_primary_open() -> Failover<(), Empty<Bytes>, Bare> {
    let f = failover(2);
    f.handle().breaker("t0").unwrap().isolate("api.openai.com");
    f
}

/// Two targets, the primary healthy; its layer also holds a domain that
/// opened once and was never called again, its cool-off long over.
fn failover_stale_open() -> Failover<(), Empty<Bytes>, Bare> {
    let config = tower_levee::core::breaker::BreakerConfig::builder()
        .cooldown(tower_levee::core::breaker::Cooldown::fixed(
            Duration::from_millis(1),
        ))
        .build()
        .unwrap();
    let layer = BreakerLayer::builder().breaker(config).build().unwrap();
    let f = Failover::builder()
        .target(Target::new("t0", Bare).breaker(layer))
        .target(Target::new("t1", Bare))
        .build()
        .unwrap();
    f.handle()
        .breaker("t0")
        .unwrap()
        .open("retired.example.com");
    std::thread::sleep(Duration::from_millis(10));
    f
}

fn benches(c: &mut Criterion) {
    single_thread(c, "failover", "breaker", breaker());
    single_thread(
        c,
        "failover",
        "first-target-floor",
        FirstTarget::new(breaker()),
    );
    single_thread(
        c,
        "failover",
        "first-target-floor-without-handle",
        FirstTarget::without_handle(breaker()),
    );
    single_thread(
        c,
        "failover",
        "first-target-kept-copy-floor",
        FirstTarget::new(KeptCopy::new(breaker())),
    );
    single_thread(c, "failover", "failover-1-target", failover(1));
    single_thread(c, "failover", "failover-2-targets", failover(2));
    single_thread(
        c,
        "failover",
        "failover-primary-open",
        failover_primary_open(),
    );
    single_thread(c, "failover", "failover-stale-open", failover_stale_open());

    contended(c, "failover", "breaker", breaker());
    contended(
        c,
        "failover",
        "first-target-floor",
        FirstTarget::new(breaker()),
    );
    contended(
        c,
        "failover",
        "first-target-floor-without-handle",
        FirstTarget::without_handle(breaker()),
    );
    contended(
        c,
        "failover",
        "first-target-kept-copy-floor",
        FirstTarget::new(KeptCopy::new(breaker())),
    );
    contended(c, "failover", "failover-1-target", failover(1));
    contended(c, "failover", "failover-2-targets", failover(2));
    contended(
        c,
        "failover",
        "failover-primary-open",
        failover_primary_open(),
    );
}

criterion_group! {
    name = group;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(group);
