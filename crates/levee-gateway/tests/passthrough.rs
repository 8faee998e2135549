//! Every endpoint, plain and streamed: the request reaches the provider
//! byte for byte (but for a renamed model), and the provider's answer
//! reaches the client byte for byte, with the gateway's own headers added.

mod support;

use std::time::Duration;

use support::{Gateway, Provider, Reply, post, send};

const CLIENT_KEY: &str = "sk-client-passthrough";
const OPENAI_KEY: &str = "sk-provider-openai";
const ANTHROPIC_KEY: &str = "sk-provider-anthropic";

fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("CLIENT_KEY", CLIENT_KEY),
        ("OPENAI_KEY", OPENAI_KEY),
        ("ANTHROPIC_KEY", ANTHROPIC_KEY),
    ]
}

fn config(openai: &Provider, anthropic: &Provider) -> String {
    format!(
        r#"
[[target]]
name = "openai-a"
base_url = "{}"
api_key_env = "OPENAI_KEY"

[[target]]
name = "anthropic-a"
base_url = "{}"
api_key_env = "ANTHROPIC_KEY"
dialect = "anthropic"

[[route]]
model = "gpt-4o"
targets = ["openai-a"]

[[route]]
model = "claude-sonnet-4-5"
targets = ["anthropic-a"]

[[client]]
name = "app"
key_env = "CLIENT_KEY"
"#,
        openai.url(),
        anthropic.url()
    )
}

/// A body with what a re-serialiser would change: key order, spacing,
/// float forms, escapes, a non-ASCII character.
fn odd_body(model: &str, extra: &str) -> String {
    format!(
        "{{ \"temperature\" : 0.70, \"model\":\"{model}\",  \"messages\":[{{\"role\":\"user\",\"content\":\"h\\u00e9llo \\\"q\\\" ✓\"}}], \"n\":1e0{extra} }}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn every_openai_endpoint_passes_both_bodies_through_byte_for_byte() {
    let answer = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
    let openai = Provider::always(
        Reply::json(200, answer)
            .with_header("x-ratelimit-remaining-requests", "499")
            .with_header("openai-processing-ms", "12"),
    )
    .await;
    let anthropic = Provider::always(Reply::json(200, "{}")).await;
    let gw = Gateway::start(&config(&openai, &anthropic), &env());
    let paths = [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/embeddings",
        "/v1/completions",
    ];
    for (i, path) in paths.iter().enumerate() {
        let body = odd_body("gpt-4o", "");
        let res = send(
            "POST",
            &gw.url(path),
            &[
                ("authorization", &format!("Bearer {CLIENT_KEY}")),
                ("content-type", "application/json"),
                ("x-request-id", &format!("req-{i}")),
                ("x-stainless-lang", "python"),
                ("accept-encoding", "gzip"),
            ],
            &body,
        )
        .await;
        assert_eq!(res.status, 200, "{path}: {}", res.text());
        assert_eq!(res.body, answer, "{path}: the answer, byte for byte");
        assert_eq!(res.header("x-ratelimit-remaining-requests"), Some("499"));
        assert_eq!(res.header("x-levee-served-by"), Some("openai-a"));
        assert_eq!(
            res.header("x-request-id"),
            Some(format!("req-{i}").as_str())
        );
        let seen = &openai.seen()[i];
        assert_eq!(seen.path_and_query, *path);
        assert_eq!(
            seen.body,
            body.as_bytes(),
            "{path}: the request, byte for byte"
        );
        assert_eq!(
            seen.headers["authorization"],
            format!("Bearer {OPENAI_KEY}")
        );
        assert_eq!(seen.headers["x-request-id"], format!("req-{i}").as_str());
        assert_eq!(seen.headers["x-stainless-lang"], "python");
        assert!(
            seen.headers.get("accept-encoding").is_none(),
            "the provider answers uncompressed"
        );
    }
    // A request id is made when the client sends none.
    let res = post(
        &gw.url("/v1/chat/completions"),
        CLIENT_KEY,
        &odd_body("gpt-4o", ""),
    )
    .await;
    let made = res
        .header("x-request-id")
        .expect("an id is made")
        .to_owned();
    assert_eq!(made.len(), 32);
    assert_eq!(
        openai.seen().last().unwrap().headers["x-request-id"],
        made.as_str()
    );
    // The access line is written as the answer ends, which may be just
    // after the client has read it.
    assert!(
        gw.wait_for_log(&made, Duration::from_secs(10)).await,
        "the id is in the log line"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_endpoints_pass_through_with_their_own_key_header() {
    let answer = r#"{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"output_tokens":1}}"#;
    let openai = Provider::always(Reply::json(200, "{}")).await;
    let anthropic = Provider::always(Reply::json(200, answer)).await;
    let gw = Gateway::start(&config(&openai, &anthropic), &env());
    for path in ["/v1/messages", "/v1/messages/count_tokens"] {
        let body = odd_body("claude-sonnet-4-5", ", \"max_tokens\": 16");
        let res = send(
            "POST",
            &gw.url(path),
            &[
                ("x-api-key", CLIENT_KEY),
                ("anthropic-version", "2023-06-01"),
                ("anthropic-beta", "some-beta"),
                ("content-type", "application/json"),
            ],
            &body,
        )
        .await;
        assert_eq!(res.status, 200, "{path}: {}", res.text());
        assert_eq!(res.body, answer);
        let seen = anthropic.seen().pop().unwrap();
        assert_eq!(seen.path_and_query, path);
        assert_eq!(seen.body, body.as_bytes());
        assert_eq!(seen.headers["x-api-key"], ANTHROPIC_KEY);
        assert_eq!(seen.headers["anthropic-beta"], "some-beta");
        assert!(seen.headers.get("authorization").is_none());
    }
    assert_eq!(openai.calls(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn streams_pass_through_event_by_event_unchanged() {
    let events = [
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
        "data: [DONE]\n\n",
    ];
    let anthropic_events = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ];
    let openai = Provider::always(Reply::sse(&events, Duration::from_millis(20))).await;
    let anthropic =
        Provider::always(Reply::sse(&anthropic_events, Duration::from_millis(20))).await;
    let gw = Gateway::start(&config(&openai, &anthropic), &env());

    let res = post(
        &gw.url("/v1/chat/completions"),
        CLIENT_KEY,
        r#"{"model":"gpt-4o","stream":true,"messages":[]}"#,
    )
    .await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("text/event-stream"));
    assert_eq!(res.text(), events.concat());
    assert_eq!(res.header("x-levee-served-by"), Some("openai-a"));

    let res = post(
        &gw.url("/v1/messages"),
        CLIENT_KEY,
        r#"{"model":"claude-sonnet-4-5","stream":true,"max_tokens":5,"messages":[]}"#,
    )
    .await;
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), anthropic_events.concat());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_target_that_names_the_model_otherwise_gets_its_name_and_nothing_else_changes() {
    let openai = Provider::always(Reply::json(200, "{}")).await;
    let anthropic = Provider::always(Reply::json(200, "{}")).await;
    let mut cfg = config(&openai, &anthropic);
    cfg = cfg.replace(
        "api_key_env = \"OPENAI_KEY\"\n",
        "api_key_env = \"OPENAI_KEY\"\nmodel = \"gpt-4o-2024-08-06\"\n",
    );
    let gw = Gateway::start(&cfg, &env());
    let body = odd_body("gpt-4o", "");
    let res = post(&gw.url("/v1/chat/completions"), CLIENT_KEY, &body).await;
    assert_eq!(res.status, 200);
    let sent = String::from_utf8(openai.seen()[0].body.to_vec()).unwrap();
    assert_eq!(sent, body.replace("\"gpt-4o\"", "\"gpt-4o-2024-08-06\""));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_models_list_names_the_routes_in_either_shape() {
    let openai = Provider::always(Reply::json(200, "{}")).await;
    let anthropic = Provider::always(Reply::json(200, "{}")).await;
    let gw = Gateway::start(&config(&openai, &anthropic), &env());
    let auth = format!("Bearer {CLIENT_KEY}");
    let res = send(
        "GET",
        &gw.url("/v1/models"),
        &[("authorization", &auth)],
        "",
    )
    .await;
    let ids: Vec<String> = res.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["claude-sonnet-4-5", "gpt-4o"]);
    assert_eq!(res.json()["object"], "list");
    let res = send(
        "GET",
        &gw.url("/v1/models"),
        &[
            ("x-api-key", CLIENT_KEY),
            ("anthropic-version", "2023-06-01"),
        ],
        "",
    )
    .await;
    assert_eq!(res.json()["data"][0]["type"], "model");
    assert_eq!(res.json()["has_more"], false);
}
