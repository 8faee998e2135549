//! The heap a tracked model costs through one breaker, and that eviction
//! bounds it (`cargo run --release -p integration-tests --bin keys` for
//! 100,000 models). A binary of its own: dhat counts every allocation of
//! the process.

use integration_tests::soak;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[tokio::test(flavor = "current_thread")]
async fn many_models_through_one_breaker_stay_bounded_by_eviction() {
    // Every tenth model's gate fills the gates' cap by a half of the run:
    // from there on, what is held stays flat.
    let keys = soak::keys(40_000, 1_000).await;
    assert_eq!((keys.breakers, keys.gates), (1_000, 1_000), "{keys:?}");
    assert!(keys.bytes_per_key() <= 512, "{keys:?}");
    assert!(
        keys.live_at_end <= keys.live_halfway + keys.live_halfway / 10,
        "{keys:?}"
    );
}
