//! Bulkheads: a hung dependency fills its own compartment and no other, and
//! every permit comes back however its call ends.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, assert_ready_err, assert_ready_ok, task};
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_levee::bulkhead::{BulkheadFull, BulkheadLayer, Bulkheads};

/// A dependency that never answers.
fn hung() -> impl Service<
    (),
    Response = (),
    Error = Infallible,
    Future = impl Future<Output = Result<(), Infallible>>,
> + Clone {
    tower::service_fn(|_: ()| std::future::pending::<Result<(), Infallible>>())
}

/// A dependency that answers when the request's sender says so (or fails if
/// it is dropped).
fn controlled() -> impl Service<
    oneshot::Receiver<bool>,
    Response = (),
    Error = &'static str,
    Future = impl Future<Output = Result<(), &'static str>>,
> + Clone {
    tower::service_fn(|rx: oneshot::Receiver<bool>| async move {
        match rx.await {
            Ok(true) => Ok(()),
            _ => Err("dependency failed"),
        }
    })
}

#[tokio::test(start_paused = true)]
async fn eight_permits_and_100_callers_of_a_hung_dependency_92_fail_fast_and_another_compartment_serves()
 {
    let bulkheads = Bulkheads::new();
    let mut llm = bulkheads.compartment("llm", 8).layer(hung());
    let mut crm = bulkheads
        .compartment("crm", 4)
        .layer(tower::service_fn(|_: ()| async {
            Ok::<_, Infallible>("crm ok")
        }));

    let start = Instant::now();
    let mut stuck = Vec::new();
    let mut full = 0;
    for _ in 0..100 {
        let mut call = task::spawn(llm.ready().await.unwrap().call(()));
        match call.poll() {
            std::task::Poll::Pending => stuck.push(call),
            std::task::Poll::Ready(Err(e)) => {
                let e = e.downcast::<BulkheadFull>().expect("a BulkheadFull");
                assert_eq!((e.name(), e.limit()), ("llm", 8));
                full += 1;
            }
            std::task::Poll::Ready(Ok(())) => unreachable!("the dependency is hung"),
        }
    }
    assert_eq!(Instant::now(), start, "rejections took no time");
    assert_eq!((stuck.len(), full), (8, 92));

    // The other dependency keeps serving.
    assert_eq!(crm.ready().await.unwrap().call(()).await.unwrap(), "crm ok");

    let llm_gauges = &bulkheads.snapshot()[1];
    assert_eq!(&*llm_gauges.name, "llm");
    assert_eq!(
        (
            llm_gauges.in_flight,
            llm_gauges.available,
            llm_gauges.rejected
        ),
        (8, 0, 92)
    );
    let crm_gauges = &bulkheads.snapshot()[0];
    assert_eq!(
        (
            crm_gauges.in_flight,
            crm_gauges.available,
            crm_gauges.rejected
        ),
        (0, 4, 0)
    );

    // Every caller gives up: all 8 permits come back.
    drop(stuck);
    let llm_gauges = &bulkheads.snapshot()[1];
    assert_eq!((llm_gauges.in_flight, llm_gauges.available), (0, 8));
}

#[tokio::test]
async fn an_idle_clone_polled_ready_holds_no_permit() {
    let layer = BulkheadLayer::named("llm", 1);
    let mut idle = layer.layer(hung());
    let mut busy = idle.clone();
    // Ready, but never called.
    idle.ready().await.unwrap();
    assert_eq!(layer.snapshot().available, 1);
    let mut call = task::spawn(busy.ready().await.unwrap().call(()));
    assert_pending!(call.poll(), "the busy clone got the permit");
    assert_eq!(layer.snapshot().in_flight, 1);
}

#[tokio::test]
async fn a_permit_is_released_on_success_on_error_and_on_cancellation() {
    let layer = BulkheadLayer::named("llm", 1);
    let mut svc = layer.layer(controlled());

    for outcome in [Some(true), Some(false), None] {
        let (tx, rx) = oneshot::channel();
        let mut call = task::spawn(svc.ready().await.unwrap().call(rx));
        assert_pending!(call.poll());
        assert_eq!(layer.snapshot().available, 0);
        match outcome {
            Some(true) => {
                tx.send(true).unwrap();
                assert_ready_ok!(call.poll());
            }
            Some(false) => {
                tx.send(false).unwrap();
                assert_ready_err!(call.poll());
            }
            None => drop(call),
        }
        assert_eq!(layer.snapshot().available, 1, "after {outcome:?}");
    }
}

#[tokio::test]
async fn a_call_outliving_its_bulkhead_ends_normally_and_later_compartments_start_empty_and_apart()
{
    let layer = BulkheadLayer::named("short-lived", 1);
    let mut svc = layer.layer(controlled());
    let (tx, rx) = oneshot::channel();
    let mut call = task::spawn(svc.ready().await.unwrap().call(rx));
    assert_pending!(call.poll());
    drop((layer, svc));

    let during = BulkheadLayer::named("during", 1);
    assert_eq!(during.snapshot().in_flight, 0, "the permit out is not its");
    tx.send(true).unwrap();
    assert_ready_ok!(call.poll());
    drop(call);

    // Each compartment has counters of its own, whichever were reused.
    let layers: Vec<_> = (0..4)
        .map(|i| BulkheadLayer::named(format!("after-{i}"), 1))
        .chain([during])
        .collect();
    let mut calls = Vec::new();
    for layer in &layers {
        let mut svc = layer.layer(hung());
        let mut call = task::spawn(svc.ready().await.unwrap().call(()));
        assert_pending!(call.poll());
        calls.push(call);
    }
    for layer in &layers {
        assert_eq!(layer.snapshot().in_flight, 1, "{}", layer.name());
    }
}

#[tokio::test]
async fn services_asking_for_the_same_name_share_a_compartment_and_different_names_never_do() {
    let bulkheads = Bulkheads::new();
    let mut chat = bulkheads.compartment("llm", 1).layer(hung());
    let mut embeddings = bulkheads.compartment("llm", 1).layer(hung());
    let mut crm = bulkheads.compartment("crm", 1).layer(hung());

    let mut holding = task::spawn(chat.ready().await.unwrap().call(()));
    assert_pending!(holding.poll());
    let mut refused = task::spawn(embeddings.ready().await.unwrap().call(()));
    let err = assert_ready!(refused.poll()).unwrap_err();
    assert!(err.is::<BulkheadFull>());
    let mut other = task::spawn(crm.ready().await.unwrap().call(()));
    assert_pending!(other.poll(), "crm has its own permit");
    assert!(bulkheads.get("llm").is_some() && bulkheads.get("db").is_none());
}

#[tokio::test(start_paused = true)]
async fn bulkhead_full_is_a_levee_rejection_with_a_short_retry_after() {
    let e = BulkheadFull::new("llm", 8);
    assert!(tower_levee::error::is_rejection(&e));
    assert!(e.retry_after() <= Duration::from_secs(1));
    assert_eq!(
        e.to_string(),
        "bulkhead `llm` full (8 calls in flight); retry after 100ms"
    );
}
