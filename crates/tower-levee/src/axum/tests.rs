//! Each Levee error as a response, and the health handler.

use std::error::Error;
use std::fmt;
use std::io;
use std::time::Duration;

use ::axum::Router;
use ::axum::body::Body;
use ::axum::response::{IntoResponse, Response};
use ::axum::routing::get;
use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::{HealthGroup, LeveeError, health_handler};
use crate::failover::{Failover, NoTargetAvailable, RefusalKind, Target};
use crate::{BoxError, BreakerLayer, BulkheadFull, CircuitOpen, Parked, Throttled};

/// Status, `Retry-After` (if any) and the JSON body of a response.
async fn read(res: Response) -> (StatusCode, Option<String>, Value) {
    let status = res.status();
    assert_eq!(res.headers()[CONTENT_TYPE], "application/json");
    let retry_after = res
        .headers()
        .get(RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, retry_after, serde_json::from_slice(&bytes).unwrap())
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap()
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap()
}

fn no_target(kinds: &[(RefusalKind, u64)]) -> NoTargetAvailable {
    let boxed: Vec<BoxError> = kinds
        .iter()
        .map(|&(kind, secs)| -> BoxError {
            let wait = Duration::from_millis(secs);
            match kind {
                RefusalKind::Throttled => Box::new(Throttled::new("org-a/gpt-4o", wait)),
                RefusalKind::Parked => Box::new(Parked::new("org-a", wait)),
                RefusalKind::CircuitOpen => Box::new(CircuitOpen::new("api.openai.com", wait)),
                _ => Box::new(BulkheadFull::new("llm", 8)),
            }
        })
        .collect();
    let refusals = boxed
        .iter()
        .map(|e| crate::failover::future::refusal("t", &**e).unwrap())
        .collect();
    NoTargetAvailable::new(refusals, Duration::from_secs(300))
}

#[tokio::test]
async fn each_rejection_is_a_json_answer_with_its_status_code_and_retry_after() {
    let wait = Duration::from_millis(2_300);
    let cases: Vec<(Response, StatusCode, &str, &str)> = vec![
        (
            CircuitOpen::new("api.openai.com", wait).into_response(),
            StatusCode::SERVICE_UNAVAILABLE,
            "circuit_open",
            "3",
        ),
        (
            Throttled::new("org-a/gpt-4o", wait).into_response(),
            StatusCode::TOO_MANY_REQUESTS,
            "provider_rate_limited",
            "3",
        ),
        (
            Parked::new("org-a", Duration::from_secs(3600)).into_response(),
            StatusCode::SERVICE_UNAVAILABLE,
            "parked",
            "3600",
        ),
        (
            BulkheadFull::new("llm", 8).into_response(),
            StatusCode::SERVICE_UNAVAILABLE,
            "bulkhead_full",
            "1",
        ),
        (
            no_target(&[
                (RefusalKind::Throttled, 4_200),
                (RefusalKind::Throttled, 1_500),
            ])
            .into_response(),
            StatusCode::TOO_MANY_REQUESTS,
            "provider_rate_limited",
            "2",
        ),
        (
            no_target(&[
                (RefusalKind::Throttled, 4_200),
                (RefusalKind::CircuitOpen, 9_000),
            ])
            .into_response(),
            StatusCode::SERVICE_UNAVAILABLE,
            "circuit_open",
            "5",
        ),
    ];
    for (res, status, expected, retry_after) in cases {
        let (got, got_retry_after, body) = read(res).await;
        assert_eq!(got, status, "{expected}");
        assert_eq!(code(&body), expected);
        assert_eq!(got_retry_after.as_deref(), Some(retry_after), "{expected}");
        assert!(!message(&body).is_empty(), "{expected}");
    }
}

#[tokio::test]
async fn the_message_is_the_rejections_own_text() {
    let e = CircuitOpen::new("api.openai.com", Duration::from_secs(12));
    let text = e.to_string();
    let (_, _, body) = read(e.into_response()).await;
    assert_eq!(message(&body), text);
}

/// An error from a client that wraps another (as hyper's and reqwest's
/// errors do), whose own text holds a secret.
#[derive(Debug)]
struct Wrapped(BoxError);

impl fmt::Display for Wrapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("error sending request for url (https://generativelanguage.googleapis.com/v1?key=AIzaSECRET): Bearer sk-SECRET")
    }
}

impl Error for Wrapped {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

#[tokio::test]
async fn levee_error_finds_the_rejection_in_a_box_or_its_source_chain() {
    let wait = Duration::from_millis(700);
    let cases: Vec<(BoxError, StatusCode, &str)> = vec![
        (
            Box::new(CircuitOpen::new("a", wait)),
            StatusCode::SERVICE_UNAVAILABLE,
            "circuit_open",
        ),
        (
            Box::new(Throttled::new("a", wait)),
            StatusCode::TOO_MANY_REQUESTS,
            "provider_rate_limited",
        ),
        (
            Box::new(Parked::new("a", wait)),
            StatusCode::SERVICE_UNAVAILABLE,
            "parked",
        ),
        (
            Box::new(BulkheadFull::new("a", 1)),
            StatusCode::SERVICE_UNAVAILABLE,
            "bulkhead_full",
        ),
        (
            Box::new(no_target(&[(RefusalKind::Parked, 700)])),
            StatusCode::SERVICE_UNAVAILABLE,
            "parked",
        ),
        (
            Box::new(Wrapped(Box::new(Throttled::new("a", wait)))),
            StatusCode::TOO_MANY_REQUESTS,
            "provider_rate_limited",
        ),
    ];
    for (err, status, expected) in cases {
        let err = LeveeError::from(err);
        assert!(err.is_rejection(), "{expected}");
        assert_eq!(err.status_code(), status, "{expected}");
        assert_eq!(err.code(), expected);
        let (got, retry_after, body) = read(err.into_response()).await;
        assert_eq!(got, status, "{expected}");
        assert_eq!(code(&body), expected);
        assert_eq!(retry_after.as_deref(), Some("1"), "{expected}");
    }
}

#[tokio::test]
async fn a_timeout_is_a_504_and_any_other_error_a_502_without_its_text() {
    let cases: Vec<(BoxError, StatusCode, &str)> = vec![
        (
            Box::new(tower::timeout::error::Elapsed::new()),
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
        ),
        (
            Box::new(Wrapped(Box::new(io::Error::from(io::ErrorKind::TimedOut)))),
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
        ),
        (
            Box::new(Wrapped(Box::new(io::Error::from(
                io::ErrorKind::ConnectionRefused,
            )))),
            StatusCode::BAD_GATEWAY,
            "upstream_error",
        ),
        (
            "Authorization: Bearer sk-SECRET".into(),
            StatusCode::BAD_GATEWAY,
            "upstream_error",
        ),
    ];
    for (err, status, expected) in cases {
        let err = LeveeError::new(err);
        assert!(!err.is_rejection());
        assert_eq!((err.status_code(), err.code()), (status, expected));
        let res = err.into_response();
        let text = format!("{:?}", res.headers());
        let (got, retry_after, body) = read(res).await;
        assert_eq!(got, status, "{expected}");
        assert_eq!(code(&body), expected);
        assert_eq!(retry_after, None);
        let body = body.to_string();
        assert!(
            !body.contains("SECRET") && !text.contains("SECRET"),
            "{body}"
        );
    }
}

#[test]
fn question_mark_converts_any_error() {
    fn handler(fail: bool) -> Result<(), LeveeError> {
        if fail {
            let err: Result<(), BoxError> = Err(Box::new(BulkheadFull::new("llm", 1)));
            err?;
        }
        let _: http::Uri = "http://ok.example".parse()?;
        Ok(())
    }
    assert!(handler(false).is_ok());
    let err = handler(true).unwrap_err();
    assert_eq!(err.code(), "bulkhead_full");
    assert!(err.into_inner().is::<BulkheadFull>());
}

async fn get_health(app: Router) -> Value {
    let req = http::Request::get("/health").body(Body::empty()).unwrap();
    let res = app.oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[CACHE_CONTROL], "no-store");
    assert_eq!(res.headers()[CONTENT_TYPE], "application/json");
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn the_health_handler_serves_a_failovers_snapshot() {
    let ok = tower::service_fn(|_req: http::Request<String>| async {
        Ok::<_, BoxError>(http::Response::new(String::new()))
    });
    let failover = Failover::builder()
        .target(Target::new("primary", ok).provider("openai"))
        .target(Target::new("backup", ok).provider("anthropic"))
        .build()
        .unwrap();
    let handle = failover.handle();
    handle.breaker("primary").unwrap().open("api.openai.com");
    let json = get_health(Router::new().route("/health", get(health_handler(handle)))).await;
    let targets = json["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    assert_eq!(targets[0]["name"], "primary");
    assert_eq!(targets[0]["state"], "open");
    assert!(targets[0]["retry_after_ms"].as_u64().is_some());
    assert_eq!(targets[1]["state"], "available");
    assert_eq!(json["fallback_share"], 0.0);
}

#[tokio::test]
async fn the_health_handler_serves_a_breaker_or_a_group() {
    let llm = BreakerLayer::new();
    llm.handle().open("api.openai.com");
    let crm = BreakerLayer::new();
    let group = HealthGroup::new()
        .with("llm", llm.handle())
        .with("crm", crm.handle());
    let app = Router::new().route("/health", get(health_handler(group)));
    let json = get_health(app).await;
    let scopes = json["llm"]["scopes"].as_array().unwrap();
    let open = scopes.iter().find(|s| s["mechanism"] == "breaker").unwrap();
    assert_eq!(open["scope"], "api.openai.com");
    assert_eq!(open["state"], "open");
    assert_eq!(json["llm"]["rejections"]["breaker"], 0);
    assert_eq!(json["crm"]["scopes"].as_array().map(Vec::len), Some(0));
}
