//! The official OpenAI and Anthropic Python SDKs, from PyPI, against the
//! gateway over fake providers: a completion, a stream read chunk by chunk,
//! a refusal surfaced as the SDK's `RateLimitError` whose wait the SDK's own
//! retry honours, and a failover the client never sees
//! (`tests/sdk/check_sdks.py`).
//!
//! The SDKs live in a virtualenv under `target/sdk-venv`, made by
//! `tests/sdk/setup.sh` (CI runs it). Without it the test says so and
//! passes, unless `CI` is set: then it fails.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use support::{Gateway, Provider, Reply, Seen};

const KEY: &str = "sk-client-sdk";

fn venv_python() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/sdk-venv/bin/python");
    python.exists().then_some(python)
}

fn wants_stream(seen: &Seen) -> bool {
    serde_json::from_slice::<serde_json::Value>(&seen.body)
        .map(|v| v["stream"] == true)
        .unwrap_or(false)
}

/// An OpenAI-compatible provider whose answers say `Hello from {name}`.
fn openai_answer(name: &str, seen: &Seen) -> Reply {
    let words = ["Hel", "lo ", "from ", name];
    if wants_stream(seen) {
        let mut events: Vec<String> = words
            .iter()
            .map(|w| {
                format!(
                    "data: {}\n\n",
                    serde_json::json!({
                        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": name,
                        "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]
                    })
                )
            })
            .collect();
        events.push("data: [DONE]\n\n".into());
        let refs: Vec<&str> = events.iter().map(String::as_str).collect();
        return Reply::sse(&refs, Duration::from_millis(5));
    }
    Reply::json(
        200,
        &serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": words.concat()}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
        })
        .to_string(),
    )
}

/// An Anthropic provider whose answers say `Hello from {name}`.
fn anthropic_answer(name: &str, seen: &Seen) -> Reply {
    let words = ["Hel", "lo ", "from ", name];
    if wants_stream(seen) {
        let event =
            |kind: &str, data: serde_json::Value| format!("event: {kind}\ndata: {data}\n\n");
        let mut events = vec![
            event(
                "message_start",
                serde_json::json!({"type": "message_start", "message": {
                    "id": "msg_1", "type": "message", "role": "assistant", "model": name, "content": [],
                    "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
            ),
            event(
                "content_block_start",
                serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
        ];
        for w in words {
            events.push(event(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}),
            ));
        }
        events.push(event(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ));
        events.push(event(
            "message_delta",
            serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 4}}),
        ));
        events.push(event(
            "message_stop",
            serde_json::json!({"type": "message_stop"}),
        ));
        let refs: Vec<&str> = events.iter().map(String::as_str).collect();
        return Reply::sse(&refs, Duration::from_millis(5));
    }
    Reply::json(
        200,
        &serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": name,
            "content": [{"type": "text", "text": words.concat()}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 5, "output_tokens": 4}
        })
        .to_string(),
    )
}

fn throttled(anthropic: bool) -> Reply {
    let body = if anthropic {
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}"#
    } else {
        r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#
    };
    Reply::json(429, body).with_header("retry-after", "1")
}

fn unavailable(anthropic: bool) -> Reply {
    let body = if anthropic {
        r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#
    } else {
        r#"{"error":{"message":"The server had an error","type":"server_error"}}"#
    };
    Reply::json(503, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_sdks_are_served_refused_and_failed_over_as_documented() {
    let Some(python) = venv_python() else {
        let how = "run crates/levee-gateway/tests/sdk/setup.sh to make target/sdk-venv";
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs the SDK virtualenv: {how}"
        );
        eprintln!("skipped: no SDK virtualenv ({how})");
        return;
    };
    let mut providers = Vec::new();
    let mut config = String::new();
    for anthropic in [false, true] {
        let prefix = if anthropic { "claude-" } else { "" };
        let dialect = if anthropic {
            "dialect = \"anthropic\"\n"
        } else {
            ""
        };
        let answer = if anthropic {
            anthropic_answer
        } else {
            openai_answer
        };
        let targets: [(&str, Provider); 4] = [
            (
                "ok-target",
                Provider::start(move |s, _| answer(&format!("{prefix}ok"), s)).await,
            ),
            (
                "throttle-target",
                Provider::start(move |s, n| {
                    if n == 0 {
                        throttled(anthropic)
                    } else {
                        answer(&format!("{prefix}throttle"), s)
                    }
                })
                .await,
            ),
            (
                "failover-primary",
                Provider::always(unavailable(anthropic)).await,
            ),
            (
                "failover-backup",
                Provider::start(move |s, _| answer(&format!("{prefix}failover-backup"), s)).await,
            ),
        ];
        for (name, provider) in &targets {
            let name = if anthropic {
                format!("claude-{name}")
            } else {
                (*name).to_owned()
            };
            config += &format!(
                "[[target]]\nname = \"{name}\"\nbase_url = \"{}\"\napi_key_env = \"P_KEY\"\n{dialect}\n",
                provider.url()
            );
        }
        let t = |n: &str| {
            if anthropic {
                format!("\"claude-{n}\"")
            } else {
                format!("\"{n}\"")
            }
        };
        config += &format!(
            "[[route]]\nmodel = \"{prefix}ok\"\ntargets = [{}]\n\n\
             [[route]]\nmodel = \"{prefix}throttle\"\ntargets = [{}]\n[route.levee.retry]\nmax_attempts = 1\n\n\
             [[route]]\nmodel = \"{prefix}failover\"\ntargets = [{}, {}]\n\n",
            t("ok-target"),
            t("throttle-target"),
            t("failover-primary"),
            t("failover-backup"),
        );
        providers.push(targets);
    }
    config += "[[client]]\nname = \"sdk\"\nkey_env = \"CLIENT_KEY\"\n";
    let gw = Gateway::start(&config, &[("CLIENT_KEY", KEY), ("P_KEY", "sk-provider")]);

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/check_sdks.py");
    let mut sdks = Command::new(python);
    sdks.arg(script).env("LEVEE_KEY", KEY);
    let stdout = gw.run_client(sdks).await;
    assert!(stdout.contains("all SDK checks passed"));
    for targets in &providers {
        // The provider's 429, then one call that served: the refusal in
        // between was never sent, and the SDK's retry came after the wait.
        assert_eq!(targets[1].1.calls(), 2, "throttle target calls");
        assert!(targets[2].1.calls() >= 1, "the primary was tried");
    }
}
