use std::time::Duration;

use ::axum::Router;
use ::axum::body::Body;
use ::axum::response::Response;
use http::header::{AUTHORIZATION, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::{ServiceBuilder, ServiceExt};

use super::{Console, EventLog};
use crate::axum::HealthGroup;
use crate::breaker::BreakerHandle;
use crate::{BoxError, BreakerLayer};

const KEY: &str = "console-admin-key";

/// OpenAI's answer when the account's spend cap is reached.
const SPEND_CAP: &str = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;

/// A breaker layer that has seen one spend-cap answer (so one scope is
/// parked), its handle, and the log its events went to.
async fn parked() -> (BreakerHandle, EventLog) {
    let events = EventLog::new();
    let layer = BreakerLayer::builder()
        .on_event(events.listener("openai"))
        .build()
        .unwrap();
    let handle = layer.handle();
    let provider = tower::service_fn(|_req: Request<String>| async {
        let res = http::Response::builder()
            .status(429)
            .header(CONTENT_TYPE, "application/json")
            .body(String::from(SPEND_CAP))
            .unwrap();
        Ok::<_, BoxError>(res)
    });
    let svc = ServiceBuilder::new().layer(layer).service(provider);
    let req = Request::post("https://api.openai.com/v1/chat/completions")
        .body(String::from(r#"{"model":"gpt-4o"}"#))
        .unwrap();
    let _ = svc.oneshot(req).await;
    (handle, events)
}

fn console(handle: &BreakerHandle, events: EventLog) -> Router {
    Console::new(HealthGroup::new().with("openai", handle.clone()), events)
        .admin(KEY, [("openai", handle.clone())])
        .router()
}

async fn send(app: &Router, method: &str, uri: &str, key: Option<&str>) -> Response {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(key) = key {
        req = req.header(AUTHORIZATION, format!("Bearer {key}"));
    }
    app.clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

async fn json(res: Response) -> Value {
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// The next data frame of an event stream, as text (a bound only against a
/// hang: the frame is already there or comes from a call the test makes).
async fn next_frame(body: &mut Body) -> String {
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("a frame")
        .expect("the stream is open")
        .unwrap();
    String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap()
}

/// The first event a stream resuming after `last_event_id` sends (past its
/// opening comment).
async fn first_event_after(app: Router, last_event_id: &str) -> String {
    let req = Request::get("/levee/events")
        .header("last-event-id", last_event_id)
        .body(Body::empty())
        .unwrap();
    let mut body = app.oneshot(req).await.unwrap().into_body();
    assert!(next_frame(&mut body).await.starts_with(':'));
    next_frame(&mut body).await
}

fn park_scope(health: &Value) -> String {
    let scopes = health["openai"]["scopes"].as_array().unwrap();
    let park = scopes.iter().find(|s| s["mechanism"] == "park").unwrap();
    park["scope"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_event_stream_replays_what_was_kept_then_pushes_each_change() {
    let (handle, events) = parked().await;
    let app = console(&handle, events);
    let res = send(&app, "GET", "/levee/events", None).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[CONTENT_TYPE], "text/event-stream");
    let mut body = res.into_body();
    assert!(next_frame(&mut body).await.starts_with(':'));
    let kept = next_frame(&mut body).await;
    assert!(kept.starts_with("id: 1\ndata: {"), "{kept}");
    assert!(kept.ends_with("}\n\n"));
    let record: Value =
        serde_json::from_str(kept.trim_end().split_once("data: ").unwrap().1).unwrap();
    assert_eq!(record["target"], "openai");
    assert_eq!(record["mechanism"], "park");
    assert_eq!(record["to"], "parked");
    assert_eq!(record["origin"], "traffic");

    // A change made now reaches the open stream.
    handle.open("api.openai.com");
    let live = next_frame(&mut body).await;
    assert!(live.starts_with("id: 2\n"), "{live}");
    assert!(live.contains(r#""mechanism":"breaker""#) && live.contains(r#""to":"open""#));
}

#[tokio::test]
async fn last_event_id_resumes_after_the_event_it_names() {
    let (handle, events) = parked().await;
    handle.open("api.openai.com");
    let app = console(&handle, events);
    assert!(first_event_after(app, "1").await.starts_with("id: 2\n"));
}

#[tokio::test]
async fn a_stream_dropped_by_its_reader_is_forgotten_at_the_next_event() {
    let (handle, events) = parked().await;
    let stream = events.stream(None);
    assert_eq!(events.listeners(), 1);
    drop(stream);
    handle.open("api.openai.com");
    assert_eq!(events.listeners(), 0);
    assert_eq!(events.last(10).len(), 2);
    // Nor does a reader gone in a quiet time stay: the next reader clears it.
    drop(events.stream(None));
    let _next = events.stream(None);
    assert_eq!(events.listeners(), 1);
}

#[tokio::test]
async fn a_reader_too_far_behind_is_dropped_and_its_stream_ends() {
    let (handle, events) = parked().await;
    let mut stream = events.stream(None);
    // 300 changes while the reader reads nothing: more than it may hold.
    for i in 0..150 {
        let scope = format!("domain-{i}");
        handle.open(&scope);
        handle.close(&scope);
    }
    assert_eq!(events.listeners(), 0);
    let mut frames = 0;
    while let Some(frame) =
        std::future::poll_fn(|cx| http_body::Body::poll_frame(std::pin::Pin::new(&mut stream), cx))
            .await
    {
        frame.unwrap();
        frames += 1;
    }
    // The opening comment, what was kept when it connected, and the backlog.
    assert!(frames > 200, "{frames}");
}

#[tokio::test(start_paused = true)]
async fn an_idle_stream_sends_a_comment_every_15_seconds() {
    let log = EventLog::new();
    let mut body = Body::new(log.stream(None));
    let mut next = async || {
        let frame = body.frame().await.expect("open").unwrap();
        String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap()
    };
    assert_eq!(next().await, ": levee events\n\n");
    // Paused time: the runtime advances to the keep-alive's tick.
    let before = tokio::time::Instant::now();
    assert_eq!(next().await, ": keep-alive\n\n");
    assert_eq!(before.elapsed(), Duration::from_secs(15));
}

#[tokio::test]
async fn an_id_from_before_a_restart_resumes_from_what_is_kept() {
    let (handle, events) = parked().await;
    let app = console(&handle, events);
    assert!(first_event_after(app, "9000").await.starts_with("id: 1\n"));
}

#[tokio::test]
async fn closing_the_log_ends_every_open_stream() {
    let (handle, events) = parked().await;
    let mut body = Body::new(events.stream(None));
    events.close();
    assert!(next_frame(&mut body).await.starts_with(':'));
    assert!(next_frame(&mut body).await.starts_with("id: 1\n"));
    let end = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .unwrap();
    assert!(end.is_none(), "the stream ended");
    drop(handle);
}

#[tokio::test]
async fn the_admin_routes_refuse_without_the_key_and_unpark_with_it() {
    let (handle, events) = parked().await;
    let app = console(&handle, events);
    let health = json(send(&app, "GET", "/levee/health", None).await).await;
    let scope = park_scope(&health);
    let unpark = format!("/levee/admin/targets/openai/unpark?scope={scope}");

    for key in [None, Some("wrong-key"), Some("console-admin-ke"), Some(" ")] {
        assert_eq!(
            send(&app, "GET", "/levee/admin/targets", key)
                .await
                .status(),
            401
        );
        let res = send(&app, "POST", &unpark, key).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        let body = json(res).await;
        assert_eq!(body["error"]["code"], "invalid_api_key");
        assert!(!body.to_string().contains(KEY));
    }
    assert_eq!(
        handle
            .states()
            .iter()
            .find(|s| s.mechanism == "park")
            .unwrap()
            .state,
        "parked"
    );

    let res = send(&app, "POST", &unpark, Some(KEY)).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(json(res).await["was_parked"], true);
    assert_eq!(
        handle
            .states()
            .iter()
            .find(|s| s.mechanism == "park")
            .unwrap()
            .state,
        "active"
    );

    let unknown = send(
        &app,
        "POST",
        "/levee/admin/targets/nope/open?scope=x",
        Some(KEY),
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let no_scope = send(&app, "POST", "/levee/admin/targets/openai/open", Some(KEY)).await;
    assert_eq!(no_scope.status(), StatusCode::BAD_REQUEST);
    let bad_action = send(
        &app,
        "POST",
        "/levee/admin/targets/openai/reboot?scope=x",
        Some(KEY),
    )
    .await;
    assert_eq!(json(bad_action).await["error"]["code"], "unknown_action");
}

#[tokio::test]
async fn without_admin_there_are_no_admin_routes() {
    let (handle, events) = parked().await;
    let app: Router = Console::new(handle.clone(), events).router();
    assert_eq!(
        send(&app, "GET", "/levee/admin/targets", Some(KEY))
            .await
            .status(),
        404
    );
}

// Paused: the two snapshots read the park's time left at one instant.
#[tokio::test(start_paused = true)]
async fn the_page_reaches_only_its_origin_and_draws_the_health_handlers_snapshot() {
    let (handle, events) = parked().await;
    let app = console(&handle, events);
    let page = send(&app, "GET", "/levee/console", None).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
    let policy = page.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert_eq!(policy, super::page::POLICY);
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(directive), "{directive}");
    }
    let html = String::from_utf8(
        page.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    for asset in ["console/console.js", "console/console.css"] {
        assert!(html.contains(asset));
        let res = send(&app, "GET", &format!("/levee/{asset}"), None).await;
        assert_eq!(res.status(), StatusCode::OK, "{asset}");
    }
    // Nothing in the page names another origin.
    assert!(!html.contains("http://") && !html.contains("https://"));

    let console_health = json(send(&app, "GET", "/levee/health", None).await).await;
    let handler: Router = Router::new().route(
        "/health",
        ::axum::routing::get(crate::axum::health_handler(
            HealthGroup::new().with("openai", handle.clone()),
        )),
    );
    let handler_health = json(send(&handler, "GET", "/health", None).await).await;
    assert_eq!(
        console_health["openai"]["scopes"],
        handler_health["openai"]["scopes"]
    );
}

#[tokio::test]
async fn an_empty_admin_key_opens_no_admin_route() {
    let (handle, events) = parked().await;
    let app: Router = Console::new(handle.clone(), events)
        .admin("", [("openai", handle.clone())])
        .router();
    let req = Request::get("/levee/admin/targets")
        .header("x-api-key", "")
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.oneshot(req).await.unwrap().status(), 404);
}

#[test]
fn the_script_writes_text_never_markup_nor_styles_nor_other_origins() {
    let script = include_str!("assets/console.js");
    for banned in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        ".style",
        "eval(",
        "http://",
        "https://",
        "localStorage",
        "sessionStorage",
    ] {
        assert!(!script.contains(banned), "console.js uses {banned}");
    }
}

#[test]
fn the_admin_key_is_not_in_the_consoles_debug() {
    let layer = BreakerLayer::new();
    let console =
        Console::new(layer.handle(), EventLog::new()).admin(KEY, [("openai", layer.handle())]);
    assert!(!format!("{console:?}").contains(KEY));
}
