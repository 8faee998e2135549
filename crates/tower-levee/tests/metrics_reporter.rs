//! The metrics reporter: every mechanism's state and counters reach the
//! `metrics` recorder when `record()` is called, with bounded labels and no
//! secret anywhere in a name or label.

use std::collections::{BTreeMap, BTreeSet};
use std::future::{Ready, ready};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString,
    Unit,
};
use http::{Request, Response};
use tower::util::ServiceFn;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt, service_fn};
use tower_levee::breaker::BreakerLayer;
use tower_levee::bulkhead::Bulkheads;
use tower_levee::failover::{Failover, Target};
use tower_levee::metrics::{MetricsReporter, transition_counter};
use tower_levee::retry::RetryBudget;

const BEARER: &str = "sk-SECRET-proj-0123456789abcdef";
const ANTHROPIC: &str = "sk-ant-SECRET-api03-fedcba9876543210";
const USERINFO: &str = "sk-SECRET-userinfo-42";
/// The substring no metric name or label may contain.
const NEEDLE: &str = "SECRET";

// === a recorder that keeps every value by name and labels ===

type Series = BTreeMap<(String, Vec<(String, String)>), f64>;

#[derive(Clone, Default)]
struct TestRecorder {
    series: Arc<Mutex<Series>>,
    described: Arc<Mutex<Vec<String>>>,
}

struct Slot {
    key: (String, Vec<(String, String)>),
    series: Arc<Mutex<Series>>,
}

impl Slot {
    fn update(&self, f: impl FnOnce(&mut f64)) {
        let mut series = self.series.lock().unwrap();
        f(series.entry(self.key.clone()).or_default());
    }
}

impl CounterFn for Slot {
    fn increment(&self, value: u64) {
        self.update(|v| *v += value as f64);
    }

    fn absolute(&self, value: u64) {
        self.update(|v| *v = value as f64);
    }
}

impl GaugeFn for Slot {
    fn increment(&self, value: f64) {
        self.update(|v| *v += value);
    }

    fn decrement(&self, value: f64) {
        self.update(|v| *v -= value);
    }

    fn set(&self, value: f64) {
        self.update(|v| *v = value);
    }
}

impl TestRecorder {
    fn slot(&self, key: &Key) -> Arc<Slot> {
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        Arc::new(Slot {
            key: (key.name().to_owned(), labels),
            series: self.series.clone(),
        })
    }

    /// The value of the one series named `name` whose labels include `labels`.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let series = self.series.lock().unwrap();
        let found: Vec<f64> = series
            .iter()
            .filter(|((n, ls), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, v)| *v)
            .collect();
        assert!(found.len() <= 1, "{name} {labels:?} matches {found:?}");
        found.first().copied()
    }

    /// Every name, label key and label value recorded or described.
    fn text(&self) -> String {
        let mut out = self.described.lock().unwrap().join("\n");
        for (name, labels) in self.series.lock().unwrap().keys() {
            out.push_str(&format!("\n{name}"));
            for (k, v) in labels {
                out.push_str(&format!(" {k}={v}"));
            }
        }
        out
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.described
            .lock()
            .unwrap()
            .push(format!("{} {description}", key.as_str()));
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe_counter(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe_counter(key, unit, description);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.slot(key))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.slot(key))
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

// === a provider that answers by host, and echoes keys where providers do ===

fn reply(req: &Request<String>) -> Result<Response<String>, BoxError> {
    let host = req.uri().host().unwrap_or_default();
    let (status, retry_after, body): (u16, Option<&str>, String) = match host {
        "rejected.example" => (
            401,
            None,
            format!(r#"{{"error":{{"message":"Incorrect API key provided: {BEARER}","code":"invalid_api_key"}}}}"#),
        ),
        "throttled.example" => (
            429,
            Some("7"),
            r#"{"error":{"code":"rate_limit_exceeded"}}"#.into(),
        ),
        "quota.example" => (
            429,
            None,
            r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#
                .into(),
        ),
        "down.example" => (503, None, format!("upstream error, key {ANTHROPIC}")),
        _ => (200, None, r#"{"choices":[]}"#.into()),
    };
    let mut res = Response::builder().status(status);
    if let Some(r) = retry_after {
        res = res.header("retry-after", r);
    }
    if host == "limited.example" {
        // 90 of 100 used: the allowance is recorded, and published.
        res = res
            .header("x-ratelimit-limit-requests", "100")
            .header("x-ratelimit-remaining-requests", "10")
            .header("x-ratelimit-reset-requests", "30s");
    }
    Ok(res.body(body)?)
}

/// The provider: every request answered at once, by [`reply`].
type Provider = ServiceFn<fn(Request<String>) -> Ready<Result<Response<String>, BoxError>>>;

fn provider() -> Provider {
    service_fn(|req: Request<String>| ready(reply(&req)))
}

/// A request to `host` carrying a key in every place a key can hide.
fn request(host: &str) -> Request<String> {
    Request::post(format!("https://org:{USERINFO}@{host}/v1/chat/completions"))
        .header("authorization", format!("Bearer {BEARER}"))
        .header("x-api-key", ANTHROPIC)
        .body(r#"{"model":"gpt-4o","messages":[]}"#.to_owned())
        .unwrap()
}

async fn send<S>(svc: &mut S, host: &str) -> Result<S::Response, BoxError>
where
    S: Service<Request<String>, Error = BoxError>,
{
    svc.ready().await?.call(request(host)).await
}

// === tests ===

#[tokio::test(start_paused = true)]
async fn every_mechanism_is_published_and_no_secret_reaches_a_label() {
    let recorder = TestRecorder::default();
    let _guard = ::metrics::set_default_local_recorder(&recorder);

    // A breaker layer over a provider that fails in every way, by host.
    let layer = BreakerLayer::builder()
        .on_event(transition_counter("openai"))
        .build()
        .unwrap();
    let handle = layer.handle();
    let mut client = ServiceBuilder::new()
        .map_err(BoxError::from)
        .layer(layer)
        .service(provider());
    for _ in 0..5 {
        let _ = send(&mut client, "down.example").await; // trips the breaker
    }
    let _ = send(&mut client, "down.example").await; // refused: open
    let _ = send(&mut client, "throttled.example").await; // gates
    let _ = send(&mut client, "throttled.example").await; // refused: gated
    let _ = send(&mut client, "quota.example").await; // parks
    let _ = send(&mut client, "quota.example").await; // refused: parked
    let _ = send(&mut client, "rejected.example").await; // a credential failure
    let _ = send(&mut client, "ok.example").await;
    let _ = send(&mut client, "limited.example").await; // reports its allowance

    // A bulkhead with its one permit taken, and one call refused.
    let bulkheads = Bulkheads::new();
    let mut llm = ServiceBuilder::new()
        .layer(bulkheads.compartment("llm", 1))
        .service(provider());
    let held = llm.ready().await.unwrap().call(request("ok.example"));
    let refused = llm.ready().await.unwrap().call(request("ok.example")).await;
    assert!(refused.is_err());

    // A budget with three requests, one retry granted.
    let budget = Arc::new(RetryBudget::new(Duration::from_secs(10), 0, 0.5));
    (0..3).for_each(|_| budget.deposit());
    assert!(budget.withdraw());

    // A failover whose primary is down: the backup serves.
    let mut failover = Failover::builder()
        .target(
            Target::new("primary", provider())
                .breaker(
                    BreakerLayer::builder()
                        .on_event(transition_counter("primary"))
                        .build()
                        .unwrap(),
                )
                .rewrite(|req: &mut Request<String>| {
                    *req.uri_mut() = format!("https://org:{USERINFO}@down.example/v1/chat")
                        .parse()
                        .unwrap();
                }),
        )
        .target(Target::new("backup", provider()).max_concurrent(4))
        .hedging(tower_levee::failover::Hedging::new())
        .build()
        .unwrap();
    for _ in 0..6 {
        let res = send(&mut failover, "ok.example").await.unwrap();
        assert_eq!(res.status(), 200);
    }

    tokio::time::sleep(Duration::from_secs(10)).await;
    let reporter = MetricsReporter::new()
        .breaker("openai", handle)
        .bulkheads(bulkheads.clone())
        .budget("llm", budget)
        .failover("chat", failover.handle());
    reporter.record();
    drop(held);

    let r = &recorder;
    let scope = |mechanism, scope| {
        vec![
            ("target", "openai"),
            ("mechanism", mechanism),
            ("scope", scope),
        ]
    };
    // State per scope, per mechanism.
    assert_eq!(
        r.get("levee_scope_state", &scope("breaker", "down.example")),
        Some(1.0)
    );
    assert_eq!(
        r.get("levee_scope_state", &scope("breaker", "ok.example")),
        Some(0.0)
    );
    let gate = scope("gate", "throttled.example");
    let park = scope("park", "quota.example");
    assert_eq!(
        r.get("levee_scope_state", &gate),
        Some(0.0),
        "clear again after 7 s"
    );
    assert_eq!(r.get("levee_scope_retry_after_seconds", &gate), Some(0.0));
    assert_eq!(r.get("levee_scope_state", &park), Some(1.0));
    assert!(r.get("levee_scope_retry_after_seconds", &park).unwrap() > 0.0);
    // Time open and time gated.
    let open = [("target", "openai"), ("scope", "down.example")];
    assert_eq!(
        r.get("levee_breaker_open_milliseconds_total", &open),
        Some(10_000.0)
    );
    let gated = [("target", "openai"), ("scope", "throttled.example")];
    assert_eq!(
        r.get("levee_gate_gated_milliseconds_total", &gated),
        Some(7_000.0)
    );
    assert_eq!(
        r.get("levee_gate_gated_last_hour_seconds", &gated),
        Some(7.0)
    );
    // Rejections by mechanism, upstream failures by verdict.
    for mechanism in ["breaker", "gate", "park"] {
        let labels = [("target", "openai"), ("mechanism", mechanism)];
        assert_eq!(
            r.get("levee_rejections_total", &labels),
            Some(1.0),
            "{mechanism}"
        );
    }
    let verdict = |v| [("target", "openai"), ("verdict", v)];
    assert_eq!(
        r.get("levee_upstream_failures_total", &verdict("availability")),
        Some(5.0)
    );
    assert_eq!(
        r.get("levee_upstream_failures_total", &verdict("throttled")),
        Some(1.0)
    );
    assert_eq!(
        r.get("levee_upstream_failures_total", &verdict("quota")),
        Some(1.0)
    );
    assert_eq!(
        r.get("levee_upstream_failures_total", &verdict("credential")),
        Some(1.0)
    );
    assert_eq!(
        r.get("levee_upstream_failures_total", &verdict("request")),
        Some(0.0)
    );
    // Transitions, from the event callback.
    let opened = [
        ("target", "openai"),
        ("mechanism", "breaker"),
        ("scope", "down.example"),
        ("from", "closed"),
        ("to", "open"),
    ];
    assert_eq!(r.get("levee_transitions_total", &opened), Some(1.0));
    let parked = [
        ("target", "openai"),
        ("mechanism", "park"),
        ("to", "parked"),
    ];
    assert_eq!(r.get("levee_transitions_total", &parked), Some(1.0));
    // Bulkheads: the registry's compartment and the failover target's.
    let llm_labels = [("compartment", "llm")];
    assert_eq!(r.get("levee_bulkhead_in_flight", &llm_labels), Some(1.0));
    assert_eq!(r.get("levee_bulkhead_limit", &llm_labels), Some(1.0));
    assert_eq!(r.get("levee_bulkhead_waiting", &llm_labels), Some(0.0));
    assert_eq!(
        r.get("levee_bulkhead_rejected_total", &llm_labels),
        Some(1.0)
    );
    assert_eq!(
        r.get("levee_bulkhead_limit", &[("compartment", "backup")]),
        Some(4.0)
    );
    // The budget.
    let b = [("budget", "llm")];
    assert_eq!(r.get("levee_retry_budget_requests_total", &b), Some(3.0));
    assert_eq!(r.get("levee_retry_budget_retries_total", &b), Some(1.0));
    assert_eq!(r.get("levee_retry_budget_exhausted_total", &b), Some(0.0));
    assert_eq!(r.get("levee_retry_budget_tokens", &b), Some(0.0));
    // The failover: served by target, fallback share, the primary's breaker.
    let f = |t| [("failover", "chat"), ("target", t)];
    assert_eq!(
        r.get("levee_failover_served_total", &f("backup")),
        Some(6.0)
    );
    assert_eq!(
        r.get("levee_failover_served_total", &f("primary")),
        Some(0.0)
    );
    assert_eq!(
        r.get("levee_failover_failed_over_total", &f("primary")),
        Some(5.0)
    );
    let chat = [("failover", "chat")];
    assert_eq!(r.get("levee_failover_fallback_share", &chat), Some(1.0));
    assert_eq!(r.get("levee_failover_no_target_total", &chat), Some(0.0));
    assert_eq!(r.get("levee_failover_hedges_total", &chat), Some(0.0));
    assert_eq!(r.get("levee_failover_demoted", &f("primary")), Some(0.0));
    let primary_open = [
        ("target", "primary"),
        ("mechanism", "breaker"),
        ("scope", "down.example"),
    ];
    assert_eq!(r.get("levee_scope_state", &primary_open), Some(1.0));
    assert_eq!(
        r.get(
            "levee_transitions_total",
            &[("target", "primary"), ("to", "open")]
        ),
        Some(1.0)
    );

    // The Grafana dashboard in examples/ queries only metrics published here.
    let published: BTreeSet<String> = recorder
        .series
        .lock()
        .unwrap()
        .keys()
        .map(|(name, _)| name.clone())
        .collect();
    for name in dashboard_metrics() {
        assert!(published.contains(&name), "the dashboard queries {name}");
    }

    // No key, in any form, in any metric name, label key or label value.
    let text = recorder.text();
    assert!(text.contains("levee_scope_state"));
    assert!(text.contains("down.example"));
    assert!(!text.contains(NEEDLE), "a secret reached a metric:\n{text}");
    assert!(!text.contains("0123456789abcdef"));
    assert!(
        !text.contains("org:"),
        "a userinfo reached a metric:\n{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_spawned_reporter_publishes_on_its_interval() {
    let recorder = TestRecorder::default();
    let _guard = ::metrics::set_default_local_recorder(&recorder);
    let budget = Arc::new(RetryBudget::default());
    let task = MetricsReporter::new()
        .budget("llm", budget.clone())
        .spawn(Duration::from_secs(15));
    let requests = [("budget", "llm")];

    tokio::task::yield_now().await; // the first tick is at once
    assert_eq!(
        recorder.get("levee_retry_budget_requests_total", &requests),
        Some(0.0)
    );
    (0..4).for_each(|_| budget.deposit());
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert_eq!(
        recorder.get("levee_retry_budget_requests_total", &requests),
        Some(0.0)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        recorder.get("levee_retry_budget_requests_total", &requests),
        Some(4.0)
    );
    task.abort();
}

#[test]
fn without_a_recorder_record_is_harmless() {
    let bulkheads = Bulkheads::new();
    let _llm = bulkheads.compartment("llm", 2);
    MetricsReporter::new()
        .bulkheads(bulkheads)
        .breaker("openai", BreakerLayer::new().handle())
        .record();
}

/// A breaker layer with room for one failure domain (the next one evicts
/// the idle first), and its reporter.
fn evicting() -> (
    MetricsReporter,
    impl Service<Request<String>, Error = BoxError>,
) {
    let layer = BreakerLayer::builder().max_keys(1).build().unwrap();
    let reporter = MetricsReporter::new().breaker("openai", layer.handle());
    let client = ServiceBuilder::new()
        .map_err(BoxError::from)
        .layer(layer)
        .service(provider());
    (reporter, client)
}

#[tokio::test(start_paused = true)]
async fn an_evicted_scope_is_no_longer_published() {
    let recorder = TestRecorder::default();
    let _guard = ::metrics::set_default_local_recorder(&recorder);
    let (reporter, mut client) = evicting();
    send(&mut client, "first.example").await.unwrap();
    reporter.record();
    let first = [("target", "openai"), ("scope", "first.example")];
    assert_eq!(recorder.get("levee_scope_state", &first), Some(0.0));

    send(&mut client, "second.example").await.unwrap();
    recorder.series.lock().unwrap().clear();
    reporter.record();
    // The exporter keeps what it was last given (the facade cannot delete
    // a series); the reporter gives nothing more for an evicted scope, so
    // an exporter's idle timeout drops it.
    assert_eq!(recorder.get("levee_scope_state", &first), None);
    let second = [("target", "openai"), ("scope", "second.example")];
    assert_eq!(recorder.get("levee_scope_state", &second), Some(0.0));
}

/// With metrics-exporter-prometheus's idle timeout, an evicted scope leaves
/// the scrape output once the reporter stops touching it. The timeout is
/// the exporter's, on its own clock: this one test waits in real time.
#[tokio::test]
async fn prometheus_drops_an_evicted_scope_after_its_idle_timeout() {
    use metrics_exporter_prometheus::PrometheusBuilder;
    use metrics_util::MetricKindMask;

    let recorder = PrometheusBuilder::new()
        .idle_timeout(MetricKindMask::ALL, Some(Duration::from_millis(200)))
        .build_recorder();
    let prometheus = recorder.handle();
    let _guard = ::metrics::set_default_local_recorder(&recorder);
    let (reporter, mut client) = evicting();
    send(&mut client, "first.example").await.unwrap();
    reporter.record();
    assert!(prometheus.render().contains(r#"scope="first.example""#));

    send(&mut client, "second.example").await.unwrap(); // evicts the first
    tokio::time::sleep(Duration::from_millis(300)).await;
    reporter.record();
    let scrape = prometheus.render();
    assert!(!scrape.contains(r#"scope="first.example""#), "{scrape}");
    assert!(scrape.contains(r#"scope="second.example""#), "{scrape}");
}

/// Every metric name the example Grafana dashboard's queries use.
fn dashboard_metrics() -> BTreeSet<String> {
    let dashboard: serde_json::Value = serde_json::from_str(include_str!(
        "../../../examples/grafana/levee-dashboard.json"
    ))
    .unwrap();
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("levee_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn the_dashboard_queries_the_metrics_the_issue_asks_for_and_the_docs_list() {
    let names = dashboard_metrics();
    for wanted in [
        "levee_scope_state",
        "levee_gate_gated_last_hour_seconds",
        "levee_rejections_total",
        "levee_failover_fallback_share",
        "levee_retry_budget_tokens",
    ] {
        assert!(names.contains(wanted), "a panel for {wanted}");
    }
    // Each is in the README's table of metrics.
    let readme = include_str!("../../../README.md");
    for name in &names {
        assert!(
            readme.contains(&format!("| `{name}` |")),
            "{name} in the README"
        );
    }
}
