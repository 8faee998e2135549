//! Two gateway replicas sharing a `[fleet]` through a real `redis-server`:
//! a throttle one replica meets gates the target for the other, which then
//! refuses unsent. Skipped (with a message) where no `redis-server` is
//! installed, unless `CI` is set.

mod support;

use std::time::Duration;

use support::{Gateway, Provider, Reply, post};

const KEY: &str = "sk-client-fleet";

#[tokio::test(flavor = "multi_thread")]
async fn a_throttle_one_replica_meets_gates_the_target_for_the_other() {
    let redis = match levee_redis::LocalRedis::start(None) {
        Ok(redis) => redis,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::env::var_os("CI").is_none() => {
            eprintln!("skipped: no redis-server on the PATH ({e})");
            return;
        }
        Err(e) => panic!("redis-server: {e}"),
    };
    let provider = Provider::always(
        Reply::json(
            429,
            r#"{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}"#,
        )
        .with_header("retry-after", "120"),
    )
    .await;
    let config = format!(
        r#"
[fleet]
url = "{}"
namespace = "gateway-test-{:x}"
sweep_every = "100ms"

[levee.retry]
max_attempts = 1

[[target]]
name = "a"
base_url = "{}"
api_key_env = "P_KEY"

[[route]]
model = "gpt-4o"
targets = ["a"]

[[client]]
name = "app"
key_env = "CLIENT_KEY"
"#,
        redis.url(),
        fastrand::u64(..),
        provider.url()
    );
    let env = [("CLIENT_KEY", KEY), ("P_KEY", "sk-provider")];
    let one = Gateway::start(&config, &env);
    let two = Gateway::start(&config, &env);
    let body = r#"{"model":"gpt-4o","messages":[]}"#;

    // Replica one meets the provider's throttle.
    let first = post(&one.url("/v1/chat/completions"), KEY, body).await;
    assert_eq!(first.status, 429);
    assert_eq!(provider.calls(), 1);

    // Replica two hears of it through the store, within a generous bound,
    // and refuses without calling the provider.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let res = post(&two.url("/v1/chat/completions"), KEY, body).await;
        if res.header("x-levee-refusal") == Some("throttled") {
            let wait: u64 = res.header("retry-after").unwrap().parse().unwrap();
            assert!(
                (100..=120).contains(&wait),
                "the provider's wait, shared: {wait}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "replica two never heard of the gate:\n{}",
            two.log()
        );
        // A call of its own before the notice arrived is a real answer.
        assert_eq!(res.status, 429);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(provider.calls() <= 3, "{} calls", provider.calls());
}
