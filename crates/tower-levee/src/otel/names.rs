//! The names OpenTelemetry's GenAI conventions (semantic conventions
//! v1.41) give what Levee records, and the rules that pick a value for
//! them: written here once, read by the spans, the metrics and the tests.

use std::error::Error;

use levee_core::classify::{Dialect, TransportFailure};

use crate::error::{Rejection, transport_failure};
use crate::failover::NoTargetAvailable;

/// Attribute keys.
pub mod attr {
    /// `chat`, `text_completion`, `embeddings`, `generate_content`.
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// `openai`, `anthropic`, `aws.bedrock`, … (see [`provider_of_host`](super::provider_of_host)).
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// The model the request named.
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// Whether the answer was a stream.
    pub const REQUEST_STREAM: &str = "gen_ai.request.stream";
    /// The model that answered.
    pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// The answer's id.
    pub const RESPONSE_ID: &str = "gen_ai.response.id";
    /// Why it stopped (an array of strings).
    pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// A stream's time to its first chunk, in seconds.
    pub const RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
    /// Input tokens, cached ones included.
    pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Output tokens.
    pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// Input tokens read from the provider's prompt cache.
    pub const USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
    /// Input tokens written to the provider's prompt cache.
    pub const USAGE_CACHE_CREATION_INPUT_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
    /// `input` or `output`, on `gen_ai.client.token.usage`.
    pub const TOKEN_TYPE: &str = "gen_ai.token.type";
    /// The provider's host.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// The provider's port.
    pub const SERVER_PORT: &str = "server.port";
    /// Why the operation failed (see [`error_type`](super::error_type)).
    pub const ERROR_TYPE: &str = "error.type";
    /// The HTTP status of an attempt's answer.
    pub const HTTP_STATUS: &str = "http.response.status_code";
    /// Levee's verdict on the answer (`success`, `throttled`, `quota`,
    /// `availability`, …; `rejected` for a refusal).
    pub const LEVEE_VERDICT: &str = "levee.verdict";
    /// The classifier's reason (`openai:insufficient_quota`).
    pub const LEVEE_REASON: &str = "levee.reason";
    /// The kind of refusal that ended the request.
    pub const LEVEE_REFUSAL: &str = "levee.refusal";
    /// How long the refusal said to wait, in seconds.
    pub const LEVEE_RETRY_AFTER: &str = "levee.retry_after";
    /// The failover target that answered.
    pub const LEVEE_SERVED_BY: &str = "levee.served_by";
    /// The calls the request made (shadow probes' copies not counted).
    pub const LEVEE_ATTEMPTS: &str = "levee.attempts";
    /// Whether a target other than the first in order answered.
    pub const LEVEE_FALLBACK: &str = "levee.fallback";
    /// An attempt's target.
    pub const LEVEE_TARGET: &str = "levee.target";
    /// An attempt's number, from 1.
    pub const LEVEE_ATTEMPT: &str = "levee.attempt";
    /// Whether an attempt was a shadow probe's copy (not counted).
    pub const LEVEE_SHADOW_PROBE: &str = "levee.shadow_probe";
}

/// `gen_ai.provider.name` where neither the host nor the layer names one.
pub const UNKNOWN_PROVIDER: &str = "_OTHER";

/// The name of an attempt's span.
pub const ATTEMPT_SPAN: &str = "levee.attempt";

/// Metric names.
pub mod metric {
    /// How long an operation took, to its answer's end (seconds).
    pub const OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
    /// The tokens an operation used, by `gen_ai.token.type`.
    pub const TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    /// A stream's time to its first chunk (seconds).
    pub const TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";
    /// A stream's time from one chunk to the next (seconds).
    pub const TIME_PER_OUTPUT_CHUNK: &str = "gen_ai.client.operation.time_per_output_chunk";
}

/// The buckets the conventions give the three time histograms (seconds).
pub const SECONDS_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// The buckets the conventions give `gen_ai.client.token.usage`.
pub const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// The operation a request's path names: `embeddings` for an embedding
/// endpoint (`/embeddings`, Gemini's `:embedContent`), `generate_content`
/// for Gemini's and Vertex's `:generateContent`, `text_completion` for
/// OpenAI's legacy `/completions`, and `chat` for the rest (chat
/// completions, Responses, Anthropic's messages, Bedrock's Converse).
pub fn operation_of(path: &str) -> &'static str {
    let bytes = path.as_bytes();
    let last = match bytes.iter().rposition(|&b| b == b'/') {
        Some(slash) => &bytes[slash + 1..],
        None => bytes,
    };
    if let Some(colon) = last.iter().position(|&b| b == b':') {
        return match &last[colon + 1..] {
            b"generateContent" | b"streamGenerateContent" => "generate_content",
            b"embedContent" | b"batchEmbedContents" | b"predict" => "embeddings",
            _ => "chat",
        };
    }
    match last {
        b"embeddings" => "embeddings",
        b"completions" if !path.ends_with("/chat/completions") => "text_completion",
        _ => "chat",
    }
}

/// The conventions' name of a provider, from the host it is reached at;
/// `None` for a host they have no name for (a self-hosted server, a
/// proxy): name it with [`GenAiLayer::provider`](super::GenAiLayer::provider).
pub fn provider_of_host(host: &str) -> Option<&'static str> {
    let host = host.trim_end_matches('.');
    let is = |domain: &str| {
        host.eq_ignore_ascii_case(domain)
            || (host.len() > domain.len()
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
                && host[host.len() - domain.len()..].eq_ignore_ascii_case(domain))
    };
    Some(if is("api.openai.com") {
        "openai"
    } else if is("openai.azure.com") {
        "azure.ai.openai"
    } else if is("services.ai.azure.com")
        || is("inference.ai.azure.com")
        || is("models.ai.azure.com")
    {
        "azure.ai.inference"
    } else if is("api.anthropic.com") {
        "anthropic"
    } else if is("generativelanguage.googleapis.com") {
        "gcp.gemini"
    } else if is("aiplatform.googleapis.com")
        || (is("googleapis.com") && host.ends_with("-aiplatform.googleapis.com"))
    {
        "gcp.vertex_ai"
    } else if is("amazonaws.com") && host.starts_with("bedrock") {
        "aws.bedrock"
    } else if is("api.mistral.ai") {
        "mistral_ai"
    } else if is("api.groq.com") {
        "groq"
    } else if is("api.cohere.com") || is("api.cohere.ai") {
        "cohere"
    } else if is("api.deepseek.com") {
        "deepseek"
    } else if is("api.x.ai") {
        "x_ai"
    } else if is("api.perplexity.ai") {
        "perplexity"
    } else if is("ml.cloud.ibm.com") {
        "ibm.watsonx.ai"
    } else if is("openrouter.ai") {
        "openrouter"
    } else {
        return None;
    })
}

/// The conventions' name of a provider Levee reads as `dialect`; `None`
/// for an OpenAI-compatible endpoint of no known provider.
pub fn provider_of_dialect(dialect: Dialect) -> Option<&'static str> {
    Some(match dialect {
        Dialect::OpenAi => "openai",
        Dialect::Azure => "azure.ai.openai",
        Dialect::Anthropic => "anthropic",
        Dialect::Gemini => "gcp.gemini",
        Dialect::Vertex => "gcp.vertex_ai",
        Dialect::Bedrock => "aws.bedrock",
        Dialect::Mistral => "mistral_ai",
        Dialect::Groq => "groq",
        Dialect::Cohere => "cohere",
        Dialect::OpenRouter => "openrouter",
        _ => return None,
    })
}

/// `error.type` of an operation that ended in `err`, low in cardinality as
/// the conventions ask: a Levee refusal by its kind (`throttled`,
/// `parked`, `circuit_open`, `bulkhead_full`, `client_limit`),
/// `no_target_available`, `timeout` (a deadline or a stream's timeout),
/// `connect` and `reset` (the connection), else `_OTHER`.
pub fn error_type(err: &(dyn Error + 'static)) -> &'static str {
    if let Some(rejection) = Rejection::find(err) {
        return rejection.kind().as_str();
    }
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<NoTargetAvailable>() {
            return "no_target_available";
        }
        cur = e.source();
    }
    match transport_failure(err) {
        TransportFailure::Timeout => "timeout",
        TransportFailure::Connect => "connect",
        TransportFailure::Reset => "reset",
        _ => "_OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_named_by_the_endpoint() {
        for (path, op) in [
            ("/v1/chat/completions", "chat"),
            ("/openai/deployments/gpt-4o/chat/completions", "chat"),
            ("/v1/responses", "chat"),
            ("/v1/messages", "chat"),
            ("/v1/completions", "text_completion"),
            ("/v1/embeddings", "embeddings"),
            (
                "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
                "generate_content",
            ),
            (
                "/v1beta/models/text-embedding-004:embedContent",
                "embeddings",
            ),
            ("/model/anthropic.claude-3-5-sonnet/converse-stream", "chat"),
        ] {
            assert_eq!(operation_of(path), op, "{path}");
        }
    }

    #[test]
    fn providers_are_named_by_host_and_a_lookalike_is_not() {
        for (host, name) in [
            ("api.openai.com", Some("openai")),
            ("myres.openai.azure.com", Some("azure.ai.openai")),
            ("API.ANTHROPIC.COM", Some("anthropic")),
            (
                "us-central1-aiplatform.googleapis.com",
                Some("gcp.vertex_ai"),
            ),
            ("aiplatform.googleapis.com", Some("gcp.vertex_ai")),
            ("storage.googleapis.com", None),
            (
                "bedrock-runtime.us-east-1.amazonaws.com",
                Some("aws.bedrock"),
            ),
            ("s3.amazonaws.com", None),
            ("evilapi.openai.com", None),
            ("api.openai.com.evil.net", None),
            ("localhost", None),
        ] {
            assert_eq!(provider_of_host(host), name, "{host}");
        }
    }
}
