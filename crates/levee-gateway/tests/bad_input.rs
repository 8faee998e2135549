//! Bad input gets a clear answer in the caller's API's shape, and the
//! gateway keeps serving after every one.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::{Gateway, Provider, Reply, post, send};

const KEY: &str = "sk-client-bad-input";

fn start(provider: &Provider, server: &str) -> Gateway {
    let cfg = format!(
        r#"
[server]
{server}

[[target]]
name = "a"
base_url = "{}"
api_key_env = "P_KEY"

[[target]]
name = "claude"
base_url = "{}"
api_key_env = "P_KEY"
dialect = "anthropic"

[[route]]
model = "gpt-4o"
targets = ["a"]

[[route]]
model = "claude-sonnet-4-5"
targets = ["claude"]

[[client]]
name = "app"
key_env = "CLIENT_KEY"
"#,
        provider.url(),
        provider.url()
    );
    Gateway::start(&cfg, &[("CLIENT_KEY", KEY), ("P_KEY", "sk-provider")])
}

async fn still_serving(gw: &Gateway) {
    let ok = post(
        &gw.url("/v1/chat/completions"),
        KEY,
        r#"{"model":"gpt-4o","messages":[]}"#,
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_that_are_not_requests_are_400s_naming_why() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = start(&provider, "");
    let url = gw.url("/v1/chat/completions");
    let cases = [
        ("not json", "not valid JSON"),
        ("[1,2,3]", "not a JSON object"),
        (r#"{"messages":[]}"#, "no `model`"),
        (r#"{"model":7}"#, "must be a string"),
        (r#"{"model":"gpt-4o","model":"o3"}"#, "more than once"),
    ];
    for (body, says) in cases {
        let res = post(&url, KEY, body).await;
        assert_eq!(res.status, 400, "{body}");
        let json = res.json();
        assert_eq!(json["error"]["type"], "invalid_request_error");
        assert!(
            json["error"]["message"].as_str().unwrap().contains(says),
            "{body}: {json}"
        );
    }
    let res = post(&gw.url("/v1/messages"), KEY, "{").await;
    assert_eq!(res.status, 400);
    assert_eq!(
        res.json()["type"],
        "error",
        "Anthropic's shape on its route"
    );
    assert_eq!(provider.calls(), 0);
    still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_models_and_paths_are_404s_and_a_model_on_the_wrong_api_says_which() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = start(&provider, "");
    let res = post(
        &gw.url("/v1/chat/completions"),
        KEY,
        r#"{"model":"gpt-5-turbo-ultra"}"#,
    )
    .await;
    assert_eq!(res.status, 404);
    let message = res.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("gpt-5-turbo-ultra"), "{message}");
    assert!(message.contains("claude-sonnet-4-5, gpt-4o"), "{message}");
    assert_eq!(res.json()["error"]["code"], "model_not_found");

    let res = post(
        &gw.url("/v1/chat/completions"),
        KEY,
        r#"{"model":"claude-sonnet-4-5"}"#,
    )
    .await;
    assert_eq!(res.status, 404);
    assert!(res.text().contains("/v1/messages"), "{}", res.text());

    let res = send("GET", &gw.url("/v1/assistants"), &[], "").await;
    assert_eq!(res.status, 404);
    assert_eq!(res.json()["error"]["code"], "unknown_url");
    let res = send("POST", &gw.url("/v1/messages/batches"), &[], "{}").await;
    assert_eq!(res.status, 404);
    assert_eq!(res.json()["type"], "error");
    assert_eq!(provider.calls(), 0);
    still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_over_the_cap_is_a_413_without_reading_past_it() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = start(&provider, "max_body_bytes = 1024");
    let big = format!(r#"{{"model":"gpt-4o","pad":"{}"}}"#, "x".repeat(2000));
    let res = post(&gw.url("/v1/chat/completions"), KEY, &big).await;
    assert_eq!(res.status, 413);
    assert_eq!(res.json()["error"]["code"], "request_too_large");

    // Declared 10 MB, sent 100 bytes: refused on the header alone.
    let mut tcp = TcpStream::connect(gw.addr).unwrap();
    write!(
        tcp,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-length: 10000000\r\n\r\n{}",
        "y".repeat(100)
    )
    .unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    assert_eq!(provider.calls(), 0);
    still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_or_head_trickled_in_is_cut_by_the_read_timeouts() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = start(
        &provider,
        "body_read_timeout = \"300ms\"\nheader_read_timeout = \"300ms\"",
    );
    // A body that never finishes.
    let mut tcp = TcpStream::connect(gw.addr).unwrap();
    write!(
        tcp,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-length: 100\r\n\r\n{{\"model\""
    )
    .unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 408");

    // A head that never finishes: the connection is closed.
    let mut tcp = TcpStream::connect(gw.addr).unwrap();
    write!(tcp, "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n").unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let read = tcp.read_to_end(&mut rest);
    assert!(
        read.is_ok()
            || matches!(read, Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    assert!(
        rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(provider.calls(), 0);
    still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_or_wrong_client_key_is_a_401_in_the_callers_shape() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = start(&provider, "");
    let body = r#"{"model":"gpt-4o","messages":[]}"#;
    let none = send("POST", &gw.url("/v1/chat/completions"), &[], body).await;
    assert_eq!(none.status, 401);
    assert_eq!(none.json()["error"]["code"], "invalid_api_key");
    let wrong = post(&gw.url("/v1/chat/completions"), "sk-client-bad-inpuT", body).await;
    assert_eq!(wrong.status, 401);
    let anthropic = send(
        "POST",
        &gw.url("/v1/messages"),
        &[("x-api-key", "nope")],
        r#"{"model":"claude-sonnet-4-5"}"#,
    )
    .await;
    assert_eq!(anthropic.status, 401);
    assert_eq!(anthropic.json()["error"]["type"], "authentication_error");
    // x-api-key works on OpenAI's routes too.
    let ok = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        &[("x-api-key", KEY)],
        body,
    )
    .await;
    assert_eq!(ok.status, 200);
    assert_eq!(provider.calls(), 1);
    assert!(
        provider.seen()[0].headers.get("x-api-key").is_none(),
        "the client's key is never forwarded"
    );
}
