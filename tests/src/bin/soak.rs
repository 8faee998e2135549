//! The long soak, outside the test suite:
//!
//! ```sh
//! cargo run --release -p integration-tests --bin soak -- [REQUESTS]
//! ```
//!
//! (default: 1,000,000 requests at concurrency 64). Exits non-zero if a
//! promise broke. The memory per tracked key is `--bin keys`.

use integration_tests::soak::{self, SoakConfig};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let requests = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("REQUESTS"));
    let report = soak::run(SoakConfig {
        requests,
        concurrency: 64,
        seed: 7,
    })
    .await;
    println!(
        "soak: {} requests in {:.1} s ({:.0}/s), {} answered, {} upstream calls",
        report.requests,
        report.elapsed.as_secs_f64(),
        report.rate(),
        report.answered,
        report.upstream_calls
    );
    for (kind, n) in &report.answers {
        println!("  {kind:<28} {n:>9}");
    }
    println!(
        "  resident set by quarter (MiB): {:?}; peak {:.1} MiB",
        report
            .rss_kib
            .iter()
            .map(|k| format!("{:.1}", *k as f64 / 1024.0))
            .collect::<Vec<_>>(),
        report.peak_rss_kib as f64 / 1024.0
    );
    if report.violations.is_empty() {
        println!("soak: every promise kept");
    } else {
        for v in &report.violations {
            println!("VIOLATION: {v}");
        }
        std::process::exit(1);
    }
}
