//! An API key in an `Authorization` or `x-api-key` header (or in the URI's
//! userinfo) never appears in any event, `tracing` record, error, or `Debug`
//! output of Levee's layers, services, handles and response extensions.

use std::fmt::Write as _;
use std::future::{Ready, ready};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use levee_core::breaker::BreakerConfig;
use levee_core::classify::{Classification, Verdict};
use tower::util::ServiceFn;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt, service_fn};
use tower_levee::breaker::BreakerLayer;
use tower_levee::bulkhead::BulkheadLayer;
use tower_levee::retry::{RetryBudgetLayer, RetryOutcome};

const BEARER: &str = "sk-SECRET-proj-0123456789abcdef";
const ANTHROPIC: &str = "sk-ant-SECRET-api03-fedcba9876543210";
const USERINFO: &str = "sk-SECRET-userinfo-42";
/// The substring no output may contain.
const NEEDLE: &str = "SECRET";

// === a tracing subscriber that keeps every field, formatted ===

#[derive(Clone, Default)]
struct Capture {
    text: Arc<Mutex<String>>,
    ids: Arc<AtomicU64>,
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = writeln!(self.0, "{} = {value:?}", field.name());
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        attrs.record(&mut Fields(&mut self.text.lock().unwrap()));
        tracing::span::Id::from_u64(self.ids.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut Fields(&mut self.text.lock().unwrap()));
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = self.text.lock().unwrap();
        let _ = writeln!(
            text,
            "[{}] {}",
            event.metadata().level(),
            event.metadata().target()
        );
        event.record(&mut Fields(&mut text));
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

// === a provider that fails in every way, by host ===

fn reply(req: &Request<String>) -> Result<Response<String>, BoxError> {
    let host = req.uri().host().unwrap_or_default();
    let (status, headers, body): (u16, &[(&str, &str)], String) = match host {
        // OpenAI echoes (part of) the key in the message of a 401.
        "rejected.example" => (
            401,
            &[],
            format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {BEARER}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
            ),
        ),
        "throttled.example" => (
            429,
            &[("retry-after", "1")],
            r#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached"}}"#.into(),
        ),
        "quota.example" => (
            429,
            &[],
            r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#
                .into(),
        ),
        "down.example" => (503, &[], format!("upstream error, key {ANTHROPIC}")),
        "broken.example" => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "connection reset by peer",
            )
            .into());
        }
        _ => (200, &[], r#"{"choices":[]}"#.into()),
    };
    let mut res = Response::builder().status(status);
    for (k, v) in headers {
        res = res.header(*k, *v);
    }
    Ok(res.body(body)?)
}

/// The provider: every request answered at once, by [`reply`].
type Provider = ServiceFn<fn(Request<String>) -> Ready<Result<Response<String>, BoxError>>>;

fn provider() -> Provider {
    service_fn(|req: Request<String>| ready(reply(&req)))
}

fn request(host: &str, userinfo: bool) -> Request<String> {
    let uri = if userinfo {
        format!("https://org:{USERINFO}@{host}/v1/chat/completions")
    } else {
        format!("https://{host}/v1/chat/completions")
    };
    Request::post(uri)
        .header("authorization", format!("Bearer {BEARER}"))
        .header("x-api-key", ANTHROPIC)
        .header("api-key", BEARER)
        .body(r#"{"model":"gpt-4o"}"#.to_owned())
        .unwrap()
}

fn error_text(out: &mut String, err: &(dyn std::error::Error + 'static)) {
    let _ = writeln!(out, "{err} / {err:?}");
    let mut source = err.source();
    while let Some(e) = source {
        let _ = writeln!(out, "{e} / {e:?}");
        source = e.source();
    }
}

#[tokio::test(start_paused = true)]
async fn api_keys_never_appear_in_events_errors_traces_or_debug() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());

    let events = Arc::new(Mutex::new(String::new()));
    let sink = events.clone();
    let breaker = BreakerLayer::builder()
        .breaker(BreakerConfig::builder().threshold(2).build().unwrap())
        .on_event(move |e| {
            let _ = writeln!(
                sink.lock().unwrap(),
                "{e:?} {} {} {} {} {:?}",
                e.scope(),
                e.from(),
                e.to(),
                e.reason(),
                e.transition()
            );
        })
        .seed(7)
        .build()
        .unwrap();
    let handle = breaker.handle();
    let bulkhead = BulkheadLayer::named("llm", 4);
    let retry = RetryBudgetLayer::builder(Default::default())
        .seed(7)
        .build()
        .unwrap();
    let mut out = String::new();
    let _ = writeln!(out, "{breaker:?}\n{bulkhead:?}\n{retry:?}");

    let mut client = ServiceBuilder::new()
        .layer(retry.clone())
        .layer(bulkhead.clone())
        .layer(breaker.clone())
        .service(provider());

    let hosts = [
        "rejected.example",
        "throttled.example",
        "quota.example",
        "down.example",
        "broken.example",
        "ok.example",
    ];
    let mut verdicts = Vec::new();
    for round in 0..4 {
        for host in hosts {
            let req = request(host, round % 2 == 1);
            let result = client.ready().await.unwrap().call(req).await;
            match result {
                Ok(res) => {
                    if let Some(c) = res.extensions().get::<Classification>() {
                        verdicts.push(c.verdict);
                        let _ = writeln!(out, "{c:?} {}", c.reason);
                    }
                    if let Some(o) = res.extensions().get::<RetryOutcome>() {
                        let _ = writeln!(out, "{o:?}");
                    }
                    let _ = writeln!(out, "{res:?}");
                }
                Err(err) => error_text(&mut out, &*err),
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    let _ = writeln!(out, "{client:?}");
    let _ = writeln!(
        out,
        "{handle:?}\n{:?}\n{:?}",
        handle.states(),
        handle.rejections()
    );
    for host in hosts {
        let _ = writeln!(
            out,
            "{:?} {:?}",
            handle.breaker_status(host),
            handle.failure_breakdown(host)
        );
    }
    let _ = writeln!(out, "{:?} {:?}", retry.budget(), retry.budget().snapshot());
    let _ = writeln!(out, "{:?}", bulkhead.snapshot());

    let events = events.lock().unwrap().clone();
    let traces = capture.text.lock().unwrap().clone();

    // The drive did exercise every path.
    // (503s and resets end as errors: the breaker opens under the retries.)
    for v in [Verdict::Credential, Verdict::Throttled, Verdict::Quota] {
        assert!(verdicts.contains(&v), "{v:?} never seen: {verdicts:?}");
    }
    for mechanism in ["breaker", "gate", "park"] {
        assert!(
            events.to_lowercase().contains(mechanism),
            "no {mechanism} event in:\n{events}"
        );
    }
    assert!(traces.contains("levee"), "no tracing output captured");
    assert!(
        out.contains("CircuitOpen") || out.contains("circuit"),
        "{out}"
    );
    assert!(
        events.contains("down.example") && events.contains("broken.example"),
        "{events}"
    );

    for (what, text) in [
        ("events", &events),
        ("traces", &traces),
        ("debug/errors", &out),
    ] {
        for secret in [NEEDLE, BEARER, ANTHROPIC, USERINFO] {
            assert!(
                !text.contains(secret),
                "{what} leak {secret:?}:\n{}",
                text.lines()
                    .filter(|l| l.contains(NEEDLE))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}
