//! Bulkheads with a `max_wait`: a full compartment queues callers for that
//! long, then refuses them; a queued caller holds no permit and leaves none
//! behind when it gives up.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, assert_ready_ok, task};
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::bulkhead::{BulkheadFull, BulkheadLayer};

/// A dependency that answers when the request's sender fires.
fn controlled() -> impl Service<
    oneshot::Receiver<()>,
    Response = (),
    Error = Infallible,
    Future = impl Future<Output = Result<(), Infallible>>,
> + Clone {
    tower::service_fn(|rx: oneshot::Receiver<()>| async move {
        let _ = rx.await;
        Ok(())
    })
}

#[tokio::test(start_paused = true)]
async fn a_queued_caller_fails_with_bulkhead_full_after_max_wait_never_sooner() {
    let layer = BulkheadLayer::named("llm", 1).max_wait(Duration::from_secs(5));
    let mut svc = layer.layer(controlled());
    let (_hold, rx) = oneshot::channel();
    let mut holder = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(holder.poll());

    let start = Instant::now();
    let (_tx, rx) = oneshot::channel();
    let mut queued = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(queued.poll());
    assert_eq!(layer.snapshot().waiting, 1);
    tokio::time::advance(Duration::from_millis(4999)).await;
    assert_pending!(queued.poll());

    tokio::time::advance(Duration::from_millis(1)).await;
    let err = assert_ready!(queued.poll()).unwrap_err();
    assert!(err.is::<BulkheadFull>());
    assert!(Instant::now() - start >= Duration::from_secs(5));
    drop(queued);
    let gauges = layer.snapshot();
    assert_eq!(
        (gauges.waiting, gauges.in_flight, gauges.rejected),
        (0, 1, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_queued_caller_gets_the_permit_when_one_frees_within_max_wait() {
    let layer = BulkheadLayer::named("llm", 1).max_wait(Duration::from_secs(5));
    let mut svc = layer.layer(controlled());
    let (release, rx) = oneshot::channel();
    let mut holder = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(holder.poll());

    let (answer, rx) = oneshot::channel();
    let mut queued = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(queued.poll());

    tokio::time::advance(Duration::from_secs(1)).await;
    release.send(()).unwrap();
    assert_ready_ok!(holder.poll());
    drop(holder);
    assert!(queued.is_woken(), "the release woke the queued caller");
    assert_pending!(
        queued.poll(),
        "it now holds the permit and waits on the dependency"
    );
    assert_eq!(
        (layer.snapshot().in_flight, layer.snapshot().waiting),
        (1, 0)
    );

    answer.send(()).unwrap();
    assert_ready_ok!(queued.poll());
    drop(queued);
    assert_eq!(layer.snapshot().available, 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_queued_waiter_leaves_no_permit_behind() {
    let layer = BulkheadLayer::named("llm", 1).max_wait(Duration::from_secs(5));
    let mut svc = layer.layer(controlled());
    let (release, rx) = oneshot::channel();
    let mut holder = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(holder.poll());

    let (_a, rx) = oneshot::channel();
    let mut first = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(first.poll());
    let (second_answer, rx) = oneshot::channel();
    let mut second = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(second.poll());
    assert_eq!(layer.snapshot().waiting, 2);

    // The holder finishes; the wake-up goes to `first`, which is cancelled
    // before it runs: the wake-up passes to `second`.
    release.send(()).unwrap();
    assert_ready_ok!(holder.poll());
    drop(holder);
    drop(first);
    assert_eq!(layer.snapshot().waiting, 1);
    assert!(
        second.is_woken(),
        "the cancelled waiter handed its wake-up on"
    );
    assert_pending!(second.poll());
    assert_eq!(layer.snapshot().in_flight, 1, "second holds the permit");

    second_answer.send(()).unwrap();
    assert_ready_ok!(second.poll());
    drop(second);
    let gauges = layer.snapshot();
    assert_eq!(
        (gauges.available, gauges.in_flight, gauges.waiting),
        (1, 0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_every_queued_caller_of_a_hung_dependency_restores_every_permit() {
    let layer = BulkheadLayer::named("llm", 8).max_wait(Duration::from_secs(30));
    let mut svc = layer.layer(tower::service_fn(|_: ()| {
        std::future::pending::<Result<(), Infallible>>()
    }));
    let mut calls = Vec::new();
    for _ in 0..100 {
        let mut call = task::spawn(svc.ready().await.unwrap().call(()));
        assert_pending!(call.poll());
        calls.push(call);
    }
    let gauges = layer.snapshot();
    assert_eq!((gauges.in_flight, gauges.waiting), (8, 92));
    drop(calls);
    let gauges = layer.snapshot();
    assert_eq!(
        (gauges.available, gauges.waiting, gauges.rejected),
        (8, 0, 0)
    );
}
