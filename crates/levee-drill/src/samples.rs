//! Real provider responses, one per condition Levee tells apart, classified
//! in a table by `levee-drill` with no argument.

use std::fmt::Write as _;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use levee_core::classify::{Classification, Classify, ProviderClassifier, TransportFailure};

use crate::classify_cmd::Case;

/// One sample response.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// The provider that sent it.
    pub provider: &'static str,
    /// What it is.
    pub what: &'static str,
    /// The status; `None` for a transport failure.
    pub status: Option<u16>,
    /// Headers.
    pub headers: &'static [(&'static str, &'static str)],
    /// The body.
    pub body: &'static str,
    /// Whether the body is a stream.
    pub stream: bool,
}

const JSON: (&str, &str) = ("content-type", "application/json");
const SSE: (&str, &str) = ("content-type", "text/event-stream");

/// The built-in samples.
pub const SAMPLES: &[Sample] = &[
    Sample {
        provider: "openai",
        what: "rate limit, wait in the message",
        status: Some(429),
        headers: &[JSON],
        body: r#"{"error":{"message":"Rate limit reached for gpt-4 on tokens per min (TPM): Limit 10000, Used 8554, Requested 3082. Please try again in 9.816s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
        stream: false,
    },
    Sample {
        provider: "openai",
        what: "rate limit, exhausted requests window",
        status: Some(429),
        headers: &[
            JSON,
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "9000"),
            ("x-ratelimit-reset-tokens", "20ms"),
        ],
        body: r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        stream: false,
    },
    Sample {
        provider: "openai",
        what: "out of quota, same status",
        status: Some(429),
        headers: &[JSON],
        body: r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        stream: false,
    },
    Sample {
        provider: "openai",
        what: "request larger than the window",
        status: Some(429),
        headers: &[JSON],
        body: r#"{"error":{"message":"Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 31538. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
        stream: false,
    },
    Sample {
        provider: "azure",
        what: "deployment with no quota left",
        status: Some(429),
        headers: &[JSON],
        body: r#"{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds."}}"#,
        stream: false,
    },
    Sample {
        provider: "anthropic",
        what: "overloaded",
        status: Some(529),
        headers: &[JSON],
        body: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        stream: false,
    },
    Sample {
        provider: "anthropic",
        what: "tier spend cap",
        status: Some(429),
        headers: &[JSON, ("date", "Sun, 23 Aug 2026 12:00:00 GMT")],
        body: r#"{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits. You will regain access on 2026-09-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}}}"#,
        stream: false,
    },
    Sample {
        provider: "anthropic",
        what: "error after a 200",
        status: Some(200),
        headers: &[SSE],
        body: "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
        stream: true,
    },
    Sample {
        provider: "gemini",
        what: "per-minute quota with RetryInfo",
        status: Some(429),
        headers: &[JSON],
        body: r#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"56s"}]}}"#,
        stream: false,
    },
    Sample {
        provider: "gemini",
        what: "rejected key as a 400",
        status: Some(400),
        headers: &[JSON],
        body: r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}"#,
        stream: false,
    },
    Sample {
        provider: "bedrock",
        what: "model not ready, as a 429",
        status: Some(429),
        headers: &[
            JSON,
            (
                "x-amzn-errortype",
                "ModelNotReadyException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
        ],
        body: r#"{"message":"Model is not ready to serve inference requests."}"#,
        stream: false,
    },
    Sample {
        provider: "openai",
        what: "stream cut before [DONE]",
        status: Some(200),
        headers: &[SSE],
        body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The\"},\"finish_reason\":null}]}\n\n",
        stream: true,
    },
    Sample {
        provider: "any",
        what: "timeout",
        status: None,
        headers: &[],
        body: "",
        stream: false,
    },
];

impl Sample {
    /// How the default classifier reads this sample.
    pub fn classify(&self, classifier: &ProviderClassifier) -> Classification {
        let Some(status) = self.status.and_then(|s| StatusCode::from_u16(s).ok()) else {
            return classifier.classify_transport(TransportFailure::Timeout);
        };
        let mut headers = HeaderMap::new();
        for &(k, v) in self.headers {
            headers.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        Case {
            status: Some(status),
            transport: TransportFailure::Other,
            headers,
            body: self.body.as_bytes().to_vec(),
            stream: self.stream,
            dialect: None,
        }
        .classify(classifier)
    }
}

fn wait(w: Option<Duration>) -> String {
    match w {
        None => "-".into(),
        Some(w) if w.as_secs() >= 86_400 => format!("{:.1}d", w.as_secs_f64() / 86_400.0),
        Some(w) if w.as_secs() >= 60 => format!("{:.1}m", w.as_secs_f64() / 60.0),
        Some(w) if w.as_millis() % 1000 == 0 => format!("{}s", w.as_secs()),
        Some(w) if w.as_secs() >= 1 => format!("{:.3}s", w.as_secs_f64()),
        Some(w) => format!("{}ms", w.as_millis()),
    }
}

/// The table `levee-drill` prints: each sample, its verdict, wait and reason.
pub fn table() -> String {
    let classifier = ProviderClassifier::default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:<38} {:>6}  {:<12} {:>8}  reason",
        "provider", "response", "status", "verdict", "wait"
    );
    for s in SAMPLES {
        let c = s.classify(&classifier);
        let status = s.status.map_or("-".into(), |s| s.to_string());
        let _ = writeln!(
            out,
            "{:<10} {:<38} {:>6}  {:<12} {:>8}  {}",
            s.provider,
            s.what,
            status,
            c.verdict.as_str(),
            wait(c.wait),
            c.reason
        );
    }
    out
}
