//! Seed inputs for each target, from the repository's own samples.

use serde_json::Value;

use crate::{Case, STREAM_FORMATS};
use levee_core::classify::StreamFormat;

/// The real provider responses of the signal corpora.
const SIGNALS: [&str; 3] = [
    include_str!("../../crates/levee-core/tests/data/provider-signals.json"),
    include_str!("../../crates/levee-core/tests/data/researched-signals.json"),
    include_str!("../../crates/levee-core/tests/data/researched-classes.json"),
];

/// Waits as providers write them, in headers and messages.
const HINT_TEXTS: &[&str] = &[
    "7",
    "1.5",
    "60000",
    "6m0s",
    "1m26.4s",
    "12ms",
    "56s",
    "0.000001s",
    "Sun, 23 Aug 2026 12:00:30 GMT",
    "2026-08-23T12:00:30Z",
    "2026-08-23T12:00:30.123+02:00",
    "Please try again in 9.816s. Visit",
    "Please retry after 60 seconds.",
    "You will regain access on 2026-09-01 at 00:00 UTC.",
    "Your quota will reset after 8h44m7s.",
    "Quota will be replenished in 5.03:23:11.",
    "true",
    "-1",
];

/// A configuration using every table and most fields.
const FULL_CONFIG: &str = r#"
[breaker]
window = "30s"
min_calls = 5
failure_ratio = 0.5
credential_threshold = 2
cooldown = { base = "10s", multiplier = 2.0, max = "2m", jitter = "equal" }
credential_cooldown = { base = "5m", max = "1h" }
half_open_probes = 2
half_open_success_ratio = 0.5
probe_timeout = "30s"
slow_call = "20s"

[gate]
default_wait = "1s"
jitter = 0.1
max_wait = "never"

[park]
default_park = "2h"

[breaker_layer]
peek_limit = 4096
max_keys = 100
isolate_by_model = true
slow_stream = "5m"
slow_call_by_model = { "gpt-4o" = "30s", "o1" = "2m" }
latency_estimate = true

[retry]
max_attempts = 4
backoff_base = "250ms"
backoff_cap = "4s"
max_wait = "30s"
timeout = "2m"
budget = { ttl = "10s", min_per_sec = 5, retry_ratio = 0.2 }

[bulkhead]
name = "llm"
max_concurrent = 8
max_wait = "100ms"
"#;

/// The example configuration: one `LeveeConfig` per table.
const EXAMPLE_CONFIG: &str = include_str!("../../examples/config/levee.toml");

fn cases() -> impl Iterator<Item = Value> {
    SIGNALS.into_iter().flat_map(|text| {
        let cases: Vec<Value> = serde_json::from_str(text).expect("a signal corpus parses");
        cases
    })
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The seeds of `target` (`classify`, `hints`, `stream`, `config`).
pub fn of(target: &str) -> Vec<Vec<u8>> {
    match target {
        "classify" | "rules_match" => cases()
            .filter_map(|case| {
                let status = u16::try_from(case["status"].as_u64()?).ok()?;
                let headers: Vec<(&str, &str)> = case["headers"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str(), str_of(v)))
                    .collect();
                Some(Case::encode(
                    status,
                    &headers,
                    str_of(&case["body"]).as_bytes(),
                ))
            })
            .collect(),
        "hints" => HINT_TEXTS
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .chain(cases().filter_map(|case| {
                let body = str_of(&case["body"]);
                (!body.is_empty() && body.len() < 2048).then(|| body.as_bytes().to_vec())
            }))
            .collect(),
        "stream" => cases()
            .filter(|case| case["stream"].as_bool() == Some(true))
            .flat_map(|case| {
                let content_type = str_of(&case["headers"]["content-type"]).to_owned();
                let format =
                    StreamFormat::from_content_type(&content_type).unwrap_or(StreamFormat::Sse);
                let selector = STREAM_FORMATS
                    .iter()
                    .position(|f| *f == format)
                    .expect("a known format") as u8;
                let body = str_of(&case["body"]).as_bytes().to_vec();
                // The same stream with no dialect hint and with a few.
                [0u8, 3, 9].map(|d| {
                    let mut input = vec![selector + d, 7];
                    input.extend_from_slice(&body);
                    input
                })
            })
            .collect(),
        "config" => {
            let tables: toml::Table = toml::from_str(EXAMPLE_CONFIG).expect("the example parses");
            tables
                .values()
                .map(|t| toml::to_string(t).expect("a table serialises").into_bytes())
                .chain([FULL_CONFIG.as_bytes().to_vec(), b"{}".to_vec()])
                .collect()
        }
        "rules" => {
            // Each rule file alone, and with each of a few responses after it.
            let files = [
                crate::MATCH_RULES,
                include_str!("../../examples/rules.toml"),
                "[[rule]]\nname = \"x\"\nstatus = \"4x\"\nverdict = \"quota\"\n",
                "[[rule]]\nname = \"y\"\nverdict = \"quota\"\n",
            ];
            let responses = [
                Case::encode(503, &[("content-type", "application/json")], br#"{"error":{"message":"Account frozen","code":"acct_frozen"}}"#),
                Case::encode(200, &[], br#"{"base_resp":{"status_code":1002,"status_msg":"rate limit","retry_after":3}}"#),
                Case::encode(403, &[("x-acme-error", "Quota"), ("x-acme-account", "a")], "余额不足".as_bytes()),
            ];
            files
                .iter()
                .flat_map(|f| {
                    std::iter::once(f.as_bytes().to_vec()).chain(responses.iter().map(move |r| {
                        let mut input = f.as_bytes().to_vec();
                        input.extend_from_slice(b"\n---\n");
                        input.extend_from_slice(r);
                        input
                    }))
                })
                .collect()
        }
        "request" => REQUESTS
            .iter()
            .enumerate()
            .map(|(i, body)| {
                let mut input = vec![(i * 7) as u8];
                input.extend(Case::encode(
                    200,
                    &[
                        ("authorization", "Bearer sk-client"),
                        ("content-type", "application/json"),
                    ],
                    body.as_bytes(),
                ));
                input
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Every target's name.
pub const TARGETS: [&str; 7] = [
    "classify",
    "hints",
    "stream",
    "config",
    "request",
    "rules",
    "rules_match",
];

/// Requests as SDKs send them, and answers that report their usage.
const REQUESTS: &[&str] = &[
    r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#,
    r#"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#,
    r#"{ "messages" : [], "model" : "gpt\u002d4o" , "temperature": 0.70 }"#,
    r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"h\u00e9"}]}]}"#,
    r#"{"model":"text-embedding-3-small","input":["a","b"],"encoding_format":"float"}"#,
    r#"{"model":"a","model":"b"}"#,
    r#"[1,2,3]"#,
    r#"{"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0}}}"#,
    "data: {\"choices\":[],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\ndata: [DONE]\n\n",
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n",
];
