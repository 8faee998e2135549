//! What each provider answers: status codes, headers and bodies taken from
//! real captures (`signals/provider-signals.json`), per dialect.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};

pub use crate::body::SimBody;

fn respond(status: u16, headers: &[(&str, String)], body: String) -> Response<SimBody> {
    respond_bytes(status, headers, Bytes::from(body))
}

fn respond_bytes(status: u16, headers: &[(&str, String)], body: Bytes) -> Response<SimBody> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    for (k, v) in headers {
        b = b.header(*k, v.as_str());
    }
    b.body(SimBody::full(body))
        .expect("static header names and values are valid")
}

fn json() -> (&'static str, String) {
    ("content-type", "application/json".into())
}

fn amzn(kind: &str) -> (&'static str, String) {
    (
        "x-amzn-ErrorType",
        format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
    )
}

/// A successful answer, streamed as SSE (or an AWS event stream) when `stream`.
pub fn success(dialect: &str, model: &str, stream: bool) -> Response<SimBody> {
    if !stream {
        let body = match dialect {
            "anthropic" => format!(
                r#"{{"id":"msg_1","type":"message","role":"assistant","model":"{model}","content":[{{"type":"text","text":"Okay"}}],"stop_reason":"end_turn"}}"#
            ),
            "gemini" => format!(
                r#"{{"candidates":[{{"content":{{"parts":[{{"text":"Okay"}}],"role":"model"}},"finishReason":"STOP"}}],"modelVersion":"{model}"}}"#
            ),
            "bedrock" => r#"{"output":{"message":{"role":"assistant","content":[{"text":"Okay"}]}},"stopReason":"end_turn"}"#.into(),
            _ => format!(
                r#"{{"id":"chatcmpl-1","object":"chat.completion","model":"{model}","choices":[{{"index":0,"message":{{"role":"assistant","content":"Okay"}},"finish_reason":"stop"}}]}}"#
            ),
        };
        return respond(200, &[json()], body);
    }
    let (ct, head, output) = stream_parts(dialect, model);
    respond_bytes(
        200,
        &[("content-type", ct.into())],
        [head, output].concat().into(),
    )
}

/// A successful stream whose head and opening events arrive at once and
/// whose output (the first token on) comes `delay` later.
pub fn success_slow_first_token(dialect: &str, model: &str, delay: Duration) -> Response<SimBody> {
    let (ct, head, output) = stream_parts(dialect, model);
    let mut r = respond_bytes(200, &[("content-type", ct.into())], Bytes::new());
    *r.body_mut() = SimBody::paced([(Duration::ZERO, head), (delay, output)]);
    r
}

/// A successful stream in `dialect`: its content type, the events that
/// open it before any output (OpenAI's role chunk, Anthropic's
/// `message_start`, Bedrock's `messageStart`; Gemini has none), and the
/// output with the end.
fn stream_parts(dialect: &str, model: &str) -> (&'static str, Bytes, Bytes) {
    match dialect {
        "anthropic" => (
            "text/event-stream",
            Bytes::from(format!(
                "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"{model}\"}}}}\n\n"
            )),
            Bytes::from_static(
                b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay\"}}\n\n\
             event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n\
             event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            ),
        ),
        "gemini" => (
            "text/event-stream",
            Bytes::new(),
            Bytes::from(format!(
                "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"text\": \"Okay\"}}],\"role\": \"model\"}},\"finishReason\": \"STOP\"}}],\"modelVersion\": \"{model}\"}}\n\n"
            )),
        ),
        "bedrock" => {
            let (head, output) = converse_stream(None);
            ("application/vnd.amazon.eventstream", head, output)
        }
        _ => (
            "text/event-stream",
            Bytes::from(format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]}}\n\n"
            )),
            Bytes::from(format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"Okay\"}},\"finish_reason\":null}}]}}\n\n\
             data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
             data: [DONE]\n\n"
            )),
        ),
    }
}

/// A stream that starts well and then carries the provider's in-band error.
pub fn midstream_error(dialect: &str, model: &str) -> Response<SimBody> {
    let (ct, body): (&str, Bytes) = match dialect {
        "anthropic" => (
            "text/event-stream",
            Bytes::from(format!(
                "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"{model}\"}}}}\n\n\
             event: error\ndata: {{\"type\": \"error\", \"error\": {{\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}}}\n\n"
            )),
        ),
        "gemini" => (
            "text/event-stream",
            Bytes::from(format!(
                "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"text\": \"Okay\"}}],\"role\": \"model\"}}}}],\"modelVersion\": \"{model}\"}}\n\n\
             {{\n  \"error\": {{\n    \"code\": 503,\n    \"message\": \"The model is overloaded. Please try again later.\",\n    \"status\": \"UNAVAILABLE\"\n  }}\n}}\n"
            )),
        ),
        "bedrock" => (
            "application/vnd.amazon.eventstream",
            converse_body(Some(
                r#"{"message":"An error occurred while streaming the response. Retry your request.","originalStatusCode":500,"originalMessage":"upstream error"}"#,
            )),
        ),
        _ => (
            "text/event-stream",
            Bytes::from(format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"The\"}},\"finish_reason\":null}}]}}\n\n\
             data: {{\"error\": {{\"message\": \"The server had an error while processing your request. Sorry about that!\", \"type\": \"server_error\"}}}}\n\n"
            )),
        ),
    };
    respond_bytes(200, &[("content-type", ct.into())], body)
}

/// [`converse_stream`] in one piece.
fn converse_body(exception: Option<&str>) -> Bytes {
    let (head, output) = converse_stream(exception);
    [head, output].concat().into()
}

/// A Bedrock `ConverseStream` body in the binary event-stream framing, its
/// `messageStart` apart from the rest: the model's answer ending in
/// `messageStop` and `metadata`, or cut by the exception whose JSON is
/// `exception`.
fn converse_stream(exception: Option<&str>) -> (Bytes, Bytes) {
    let event = |kind: &str, payload: &str| {
        aws_frame(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload,
        )
    };
    let head = event("messageStart", r#"{"role":"assistant"}"#);
    let mut body = event(
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"text":"Okay"}}"#,
    );
    match exception {
        Some(payload) => body.extend(aws_frame(
            &[
                (":exception-type", "modelStreamErrorException"),
                (":content-type", "application/json"),
                (":message-type", "exception"),
            ],
            payload,
        )),
        None => {
            body.extend(event("contentBlockStop", r#"{"contentBlockIndex":0}"#));
            body.extend(event("messageStop", r#"{"stopReason":"end_turn"}"#));
            body.extend(event(
                "metadata",
                r#"{"usage":{"inputTokens":12,"outputTokens":1,"totalTokens":13},"metrics":{"latencyMs":400}}"#,
            ));
        }
    }
    (Bytes::from(head), Bytes::from(body))
}

/// One binary AWS event-stream message: prelude (total length, headers
/// length, CRC-32 of both), string headers, payload, CRC-32 of the whole.
fn aws_frame(headers: &[(&str, &str)], payload: &str) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        h.push(name.len() as u8);
        h.extend_from_slice(name.as_bytes());
        h.push(7); // string
        h.extend_from_slice(&(value.len() as u16).to_be_bytes());
        h.extend_from_slice(value.as_bytes());
    }
    let total = (12 + h.len() + payload.len() + 4) as u32;
    let mut frame = Vec::with_capacity(total as usize);
    frame.extend_from_slice(&total.to_be_bytes());
    frame.extend_from_slice(&(h.len() as u32).to_be_bytes());
    frame.extend_from_slice(&crc32fast::hash(&frame).to_be_bytes());
    frame.extend_from_slice(&h);
    frame.extend_from_slice(payload.as_bytes());
    frame.extend_from_slice(&crc32fast::hash(&frame).to_be_bytes());
    frame
}

fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.3}s", d.as_secs_f64())
    }
}

/// The simulated wall clock: noon, 23 August 2026, plus the run's time.
pub fn wall_clock(elapsed: Duration) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_secs(1_787_486_400) + elapsed
}

/// `YYYY-MM-DDTHH:MM:SSZ` of `t`, to the second (rounded up).
fn rfc3339(t: std::time::SystemTime) -> String {
    let since = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() + u64::from(since.subsec_nanos() > 0);
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// What a limit reports after a call: its size, what is left, and how
/// long until it is whole again.
#[derive(Clone, Copy, Debug)]
pub struct RequestLimit {
    /// The bucket's size.
    pub limit: u64,
    /// Whole requests (or tokens) left.
    pub remaining: u64,
    /// Until the bucket is full again.
    pub reset: Duration,
}

/// The limits an answer reports: requests, and tokens when simulated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// The request limit.
    pub requests: Option<RequestLimit>,
    /// The token limit.
    pub tokens: Option<RequestLimit>,
}

/// Adds the rate-limit headers `dialect` sends on every answer, as the real
/// providers do: OpenAI, Groq and Mistral-style `x-ratelimit-*` with Go
/// durations; Azure's with whole seconds; Anthropic's with RFC 3339 instants
/// (and a `Date` to measure them from); none for Gemini and Bedrock.
pub fn with_rate_limits(
    mut response: Response<SimBody>,
    dialect: &str,
    limits: Limits,
    now: std::time::SystemTime,
) -> Response<SimBody> {
    if matches!(dialect, "gemini" | "bedrock") {
        return response;
    }
    let mut headers: Vec<(String, String)> = Vec::new();
    if dialect == "anthropic" {
        headers.push(("date".into(), httpdate::fmt_http_date(now)));
    }
    if dialect == "azure" {
        // Every Azure OpenAI answer passes its API Management gateway.
        headers.push(("apim-request-id".into(), "0f8c2d4e-sim".into()));
        headers.push(("x-ms-region".into(), "East US".into()));
    }
    for (dim, limit) in [("requests", limits.requests), ("tokens", limits.tokens)] {
        let Some(RequestLimit {
            limit,
            remaining,
            reset,
        }) = limit
        else {
            continue;
        };
        match dialect {
            "anthropic" => {
                // Anthropic rounds the tokens left to the nearest thousand.
                let remaining = if dim == "tokens" {
                    (remaining + 500) / 1000 * 1000
                } else {
                    remaining
                };
                let p = format!("anthropic-ratelimit-{dim}");
                headers.push((format!("{p}-limit"), limit.to_string()));
                headers.push((format!("{p}-remaining"), remaining.to_string()));
                headers.push((format!("{p}-reset"), rfc3339(now + reset)));
            }
            _ => {
                let reset = if dialect == "azure" {
                    reset.as_millis().div_ceil(1000).to_string()
                } else {
                    go_duration(reset)
                };
                headers.push((format!("x-ratelimit-limit-{dim}"), limit.to_string()));
                headers.push((
                    format!("x-ratelimit-remaining-{dim}"),
                    remaining.to_string(),
                ));
                headers.push((format!("x-ratelimit-reset-{dim}"), reset));
            }
        }
    }
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(&v),
        ) {
            response.headers_mut().insert(k, v);
        }
    }
    response
}

/// The window a dialect's request-limit headers count: ten seconds for
/// Azure OpenAI (its `x-ratelimit-limit-requests` is a sixth of the RPM), a
/// minute for the others.
pub fn request_window(dialect: &str) -> Duration {
    Duration::from_secs(if dialect == "azure" { 10 } else { 60 })
}

/// A rate-limit answer with the dialect's wait hint (`wait` until a request
/// token is available again).
pub fn throttle(dialect: &str, model: &str, wait: Duration, rpm: u32) -> Response<SimBody> {
    throttle_on(dialect, model, wait, u64::from(rpm), "requests")
}

/// A rate-limit answer for a token limit of `tpm` tokens per minute.
pub fn throttle_tokens(dialect: &str, model: &str, wait: Duration, tpm: u64) -> Response<SimBody> {
    throttle_on(dialect, model, wait, tpm, "tokens")
}

fn throttle_on(
    dialect: &str,
    model: &str,
    wait: Duration,
    rpm: u64,
    dim: &str,
) -> Response<SimBody> {
    let ceil_secs = wait.as_millis().div_ceil(1000).max(1);
    let (per_min, abbrev) = if dim == "tokens" {
        ("tokens per min", "TPM")
    } else {
        ("requests per min", "RPM")
    };
    match dialect {
        "azure" => respond(
            429,
            &[
                json(),
                ("retry-after", ceil_secs.to_string()),
                ("retry-after-ms", wait.as_millis().max(1).to_string()),
                (&format!("x-ratelimit-remaining-{dim}"), "0".into()),
            ],
            format!(
                r#"{{"error":{{"code":"429","message":"Rate limit is exceeded. Try again in {ceil_secs} seconds."}}}}"#
            ),
        ),
        "anthropic" => respond(
            429,
            &[
                json(),
                ("retry-after", ceil_secs.to_string()),
                ("x-should-retry", "true".into()),
                (&format!("anthropic-ratelimit-{dim}-limit"), rpm.to_string()),
                (&format!("anthropic-ratelimit-{dim}-remaining"), "0".into()),
            ],
            format!(
                r#"{{"type":"error","error":{{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of {rpm} {dim} per minute (model: {model}). For details, refer to: https://docs.claude.com/en/api/rate-limits."}},"request_id":"req_011drill"}}"#
            ),
        ),
        "gemini" => respond(
            429,
            &[json()],
            format!(
                r#"{{"error":{{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{{"quotaMetric":"generativelanguage.googleapis.com/generate_content_paid_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel","quotaDimensions":{{"location":"global","model":"{model}"}},"quotaValue":"{rpm}"}}]}},{{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"{ceil_secs}s"}}]}}}}"#
            ),
        ),
        "bedrock" => respond(
            429,
            &[json(), amzn("ThrottlingException")],
            format!(r#"{{"message":"Too many {dim}, please wait before trying again."}}"#),
        ),
        _ => respond(
            429,
            &[
                json(),
                (&format!("x-ratelimit-limit-{dim}"), rpm.to_string()),
                (&format!("x-ratelimit-remaining-{dim}"), "0".into()),
                (&format!("x-ratelimit-reset-{dim}"), go_duration(wait)),
            ],
            format!(
                r#"{{"error":{{"message":"Rate limit reached for {model} in organization org-drill on {per_min} ({abbrev}): Limit {rpm}, Used {rpm}, Requested 1. Please try again in {}. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"{dim}","param":null,"code":"rate_limit_exceeded"}}}}"#,
                go_duration(wait)
            ),
        ),
    }
}

/// A server error (`outage`, default 500) or overload (`overload`, default
/// 529 for Anthropic, 503 elsewhere), with `status` overriding the code.
pub fn server_error(dialect: &str, overload: bool, status: Option<u16>) -> Response<SimBody> {
    let default = match (dialect, overload) {
        ("anthropic", true) => 529,
        (_, true) => 503,
        (_, false) => 500,
    };
    let status = status.unwrap_or(default);
    match dialect {
        "anthropic" if overload => respond(status, &[json()], r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into()),
        "anthropic" => respond(status, &[json()], r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_011drill"}"#.into()),
        "gemini" if overload => respond(status, &[json()], format!(r#"{{"error":{{"code":{status},"message":"This model is currently experiencing high demand. Spikes in demand are usually temporary. Please try again later.","status":"UNAVAILABLE"}}}}"#)),
        "gemini" => respond(status, &[json()], format!(r#"{{"error":{{"code":{status},"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}}}"#)),
        "bedrock" if overload => respond(status, &[json(), amzn("ServiceUnavailableException")], r#"{"message":"Too many connections, please wait before trying again."}"#.into()),
        "bedrock" => respond(status, &[json(), amzn("InternalServerException")], r#"{"message":"The server encountered an internal error while processing the request."}"#.into()),
        _ if overload => respond(status, &[json()], r#"{"error":{"type":"service_unavailable_error","code":"server_is_overloaded","message":"Our servers are currently overloaded."}}"#.into()),
        _ => respond(status, &[json()], r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#.into()),
    }
}

/// A scripted answer: `status` with `body` as JSON.
pub fn scripted(status: u16, body: &str) -> Response<SimBody> {
    respond(status, &[json()], body.to_owned())
}

/// A rejected credential (the key was revoked).
pub fn revoked(dialect: &str) -> Response<SimBody> {
    match dialect {
        "anthropic" => respond(401, &[json()], r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#.into()),
        "azure" => respond(401, &[json()], r#"{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}"#.into()),
        "gemini" => respond(400, &[json()], r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}"#.into()),
        "bedrock" => respond(403, &[json(), amzn("AccessDeniedException")], r#"{"message":"You don't have access to the model with the specified model ID."}"#.into()),
        _ => respond(401, &[json()], r#"{"error":{"message":"Incorrect API key provided: sk-proj-...sQoA. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#.into()),
    }
}

/// An exhausted spend cap or quota.
pub fn spend_cap(dialect: &str) -> Response<SimBody> {
    match dialect {
        "anthropic" => respond(402, &[json()], r#"{"type":"error","error":{"type":"billing_error","message":"There's an issue with your billing or payment information."},"request_id":"req_011drill"}"#.into()),
        "gemini" => respond(402, &[json()], r#"{"error":{"code":402,"message":"Your prepayment credits are depleted. Please go to AI Studio at    https://ai.studio/projects to manage your project and billing. Learn more at https://ai.google.dev/gemini-api/docs/billing#prepay.","status":"RESOURCE_EXHAUSTED"}}"#.into()),
        _ => respond(429, &[json()], r#"{"error":{"message":"Your project has reached its monthly spend limit.","type":"insufficient_quota","param":null,"code":"project_spend_limit_exceeded"}}"#.into()),
    }
}
