//! Pools: targets that share traffic by what each one's provider says is
//! left of its limits, instead of the first taking it all.

use std::convert::Infallible;

use http::{Request, Response};
use tower::{Service, ServiceExt};
use tower_levee::failover::{Failover, ServedBy, Target};

/// An account whose answers say `left` of 1,000 requests are left.
fn account(
    left: u32,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(move |_req: Request<String>| async move {
        Ok::<_, Infallible>(
            Response::builder()
                .header("x-ratelimit-limit-requests", "1000")
                .header("x-ratelimit-remaining-requests", left.to_string())
                .header("x-ratelimit-reset-requests", "1s")
                .body("{}".to_owned())
                .unwrap(),
        )
    })
}

fn req() -> Request<String> {
    Request::post("https://api.openai.com/v1/chat/completions")
        .body(String::new())
        .unwrap()
}

/// Sends `n` calls 100 ms apart (within every account's rate, 1,000 a
/// minute: no call is spread to a later target) and counts who served.
async fn served_counts<S>(svc: &mut S, n: usize) -> [usize; 3]
where
    S: Service<
            Request<String>,
            Response = Response<tower_levee::body::ResponseBody<String>>,
            Error = tower::BoxError,
        >,
{
    let mut counts = [0; 3];
    for _ in 0..n {
        let res = svc.ready().await.unwrap().call(req()).await.unwrap();
        counts[ServedBy::of(&res).unwrap().index] += 1;
        tokio::time::advance(std::time::Duration::from_millis(100)).await;
    }
    counts
}

#[tokio::test(start_paused = true)]
async fn a_pool_shares_traffic_by_what_each_member_has_left() {
    let mut svc = Failover::builder()
        .target(Target::new("a", account(750)).pool("openai"))
        .target(Target::new("b", account(250)).pool("openai"))
        .target(Target::new("fallback", account(1000)))
        .build()
        .unwrap();
    // Until a member has answered, members weigh the same; then by what
    // each has left: 751 to 251.
    served_counts(&mut svc, 20).await;
    let [a, b, fallback] = served_counts(&mut svc, 1000).await;
    assert_eq!(fallback, 0, "the pool takes the traffic first");
    let share = a as f64 / 1000.0;
    assert!((0.70..=0.80).contains(&share), "a served {a}, b {b}");
}

#[tokio::test(start_paused = true)]
async fn without_a_pool_the_first_target_takes_it_all() {
    let mut svc = Failover::builder()
        .target(Target::new("a", account(750)))
        .target(Target::new("b", account(250)))
        .target(Target::new("fallback", account(1000)))
        .build()
        .unwrap();
    assert_eq!(served_counts(&mut svc, 200).await, [200, 0, 0]);
}
