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

/// Sends `calls` calls through `svc` on a thread of its own, from `tasks`
/// tasks at once, each one call at a time; returns how many the bulkhead
/// refused.
fn calls_on_a_thread<S>(svc: S, tasks: usize, calls: usize) -> std::thread::JoinHandle<usize>
where
    S: Service<(), Error = tower_levee::BoxError> + Clone + Send + 'static,
    S::Future: Send,
{
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut all = tokio::task::JoinSet::new();
            for _ in 0..tasks {
                let mut svc = svc.clone();
                all.spawn(async move {
                    let mut refused = 0;
                    for _ in 0..calls {
                        match svc.ready().await.unwrap().call(()).await {
                            Ok(_) => {}
                            Err(e) if e.is::<BulkheadFull>() => refused += 1,
                            Err(e) => panic!("unexpected error: {e}"),
                        }
                    }
                    refused
                });
            }
            let mut refused = 0;
            while let Some(task) = all.join_next().await {
                refused += task.unwrap();
            }
            refused
        })
    })
}

#[tokio::test]
async fn a_permit_given_back_on_one_thread_serves_a_call_on_another() {
    let layer = BulkheadLayer::named("llm", 1);
    let answers = tower::service_fn(|_: ()| async { Ok::<_, Infallible>(()) });
    // Given back here, the permit is kept on this thread's side...
    let mut here = layer.layer(answers);
    here.ready().await.unwrap().call(()).await.unwrap();
    // ...and found from another thread, which keeps it on its side.
    let refused = calls_on_a_thread(layer.layer(answers), 1, 3)
        .join()
        .unwrap();
    assert_eq!(refused, 0);
    assert_eq!(layer.snapshot().available, 1);
    // A call from here finds it there, that thread gone.
    let mut here = layer.layer(hung());
    let mut holding = task::spawn(here.ready().await.unwrap().call(()));
    assert_pending!(holding.poll(), "admitted");
    assert_eq!(layer.snapshot().in_flight, 1);
    let mut refused = task::spawn(here.ready().await.unwrap().call(()));
    assert!(
        assert_ready!(refused.poll())
            .unwrap_err()
            .is::<BulkheadFull>()
    );
}

#[tokio::test]
async fn calls_on_many_threads_never_hold_more_permits_than_the_limit_and_give_every_one_back() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const LIMIT: usize = 3;
    let layer = BulkheadLayer::named("llm", LIMIT);
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    // Each call yields once inside, so that the calls of one thread's four
    // tasks overlap (one more than the limit), and those of four threads.
    let dependency = {
        let (inside, most) = (inside.clone(), most.clone());
        tower::service_fn(move |_: ()| {
            let (inside, most) = (inside.clone(), most.clone());
            async move {
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, Infallible>(())
            }
        })
    };
    // A call here first: the permits the threads keep on their side are not
    // this thread's.
    let mut here = layer.layer(dependency.clone());
    here.ready().await.unwrap().call(()).await.unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| calls_on_a_thread(layer.layer(dependency.clone()), 4, 2_000))
        .collect();
    let refused: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(most.load(Ordering::SeqCst) <= LIMIT, "never over the limit");
    assert!(refused > 0, "four callers on a thread for three permits");
    assert_eq!(
        layer.snapshot().rejected,
        refused as u64,
        "every refusal counted"
    );
    // Every permit is back, wherever its thread left it: all of them serve
    // calls held here at once.
    assert_eq!(layer.snapshot().in_flight, 0);
    let mut here = layer.layer(hung());
    let mut held = Vec::new();
    for _ in 0..LIMIT {
        let mut call = task::spawn(here.ready().await.unwrap().call(()));
        assert_pending!(call.poll(), "admitted");
        held.push(call);
    }
    let mut refused = task::spawn(here.ready().await.unwrap().call(()));
    assert!(
        assert_ready!(refused.poll())
            .unwrap_err()
            .is::<BulkheadFull>()
    );
}
