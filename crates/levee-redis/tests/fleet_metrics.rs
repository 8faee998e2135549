//! `levee_fleet_connected` (feature `metrics`): 1 while the store is
//! reachable, 0 while it is away, 1 again when it is back.

mod support;

use std::sync::{Arc, Mutex};

use levee_redis::{BreakerPolicy, MemoryStore};
use metrics::{
    Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use support::{Replica, settle};

/// Records the last value of `levee_fleet_connected`.
#[derive(Clone, Default)]
struct Connected(Arc<Mutex<Option<f64>>>);

impl GaugeFn for Connected {
    fn increment(&self, value: f64) {
        *self.0.lock().unwrap().get_or_insert(0.0) += value;
    }
    fn decrement(&self, value: f64) {
        *self.0.lock().unwrap().get_or_insert(0.0) -= value;
    }
    fn set(&self, value: f64) {
        *self.0.lock().unwrap() = Some(value);
    }
}

impl Recorder for Connected {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        if key.name() == "levee_fleet_connected" {
            Gauge::from_arc(Arc::new(self.clone()))
        } else {
            Gauge::noop()
        }
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[tokio::test(start_paused = true)]
async fn the_connected_gauge_follows_the_store() {
    let recorder = Connected::default();
    // The fleet's task runs on this thread (a current-thread runtime).
    let _guard = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::new();
    let replica = Replica::new(store.clone(), "web-0", BreakerPolicy::default());
    settle(10).await;
    assert_eq!(*recorder.0.lock().unwrap(), Some(1.0));
    store.set_available(false);
    settle(10).await;
    assert_eq!(*recorder.0.lock().unwrap(), Some(0.0));
    store.set_available(true);
    settle(6_000).await;
    assert_eq!(*recorder.0.lock().unwrap(), Some(1.0));
    assert!(replica.fleet.status().connected);
}
