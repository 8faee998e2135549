//! A short soak through the whole stack over loopback HTTP (the long one:
//! `cargo run --release -p integration-tests --bin soak`).

use integration_tests::soak::{self, SoakConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_answered_once_and_every_permit_and_probe_slot_comes_back() {
    let report = soak::run(SoakConfig {
        requests: 20_000,
        concurrency: 64,
        seed: 7,
    })
    .await;
    assert!(report.violations.is_empty(), "{report:#?}");
    assert_eq!(report.answered, 20_000);
    // The mix really happened: most served, streams cut or failing in-band
    // read to their end, and refusals or failures answered as such.
    let answers = &report.answers;
    let count = |k: &str| answers.get(k).copied().unwrap_or(0);
    // Served: 12,061 to 14,293 of 20,000 in 20 runs; the primary's outage
    // is counted in its calls, so a run whose breaker opens early keeps it
    // out longer (5,803 once, 9,703 on CI's fresh machine). Refusals are
    // the point of the mix; a fifth served proves the traffic flowed.
    assert!(count("200") > 4_000, "{answers:?}");
    assert!(count("200+body_error") > 0, "{answers:?}");
    assert!(report.upstream_calls > 10_000, "{report:?}");
    assert!(answers.keys().any(|k| !k.starts_with("200")), "{answers:?}");
}
