//! The heap a tracked model costs, and that eviction bounds it:
//!
//! ```sh
//! cargo run --release -p integration-tests --bin keys -- [MODELS] [MAX_KEYS]
//! ```
//!
//! (defaults: 100,000 models through one breaker capped at 10,000 keys).

use integration_tests::soak;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let models = args.next().map_or(100_000, |a| a.parse().expect("MODELS"));
    let max_keys = args.next().map_or(10_000, |a| a.parse().expect("MAX_KEYS"));
    let keys = soak::keys(models, max_keys).await;
    println!(
        "{} models through one breaker (cap {} per mechanism): {} breakers and {} gates \
         tracked, {} B per tracked scope; {:.2} MiB held halfway, {:.2} MiB at the end; \
         peak resident set {:.1} MiB",
        keys.models,
        keys.max_keys,
        keys.breakers,
        keys.gates,
        keys.bytes_per_key(),
        keys.live_halfway as f64 / 1048576.0,
        keys.live_at_end as f64 / 1048576.0,
        soak::proc_status_kib("VmHWM:") as f64 / 1024.0,
    );
    if keys.breakers > keys.max_keys || keys.gates > keys.max_keys {
        std::process::exit(1);
    }
}
