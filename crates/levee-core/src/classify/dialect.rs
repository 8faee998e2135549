//! Which provider dialect a response speaks, read from the response itself.
//!
//! The caller's hint ([`ResponseView::dialect`](super::ResponseView)) wins;
//! then headers, which name the provider reliably (`x-amzn-*`,
//! `anthropic-*`, `x-ms-*`, `openai-*`, `x-groq-*`); then the error body's
//! envelope, and for the OpenAI-shaped envelope every compatible provider
//! copies, the provider's own links in the message. The dialect prefixes
//! reasons (`anthropic:overloaded_error`); the verdict rules themselves are
//! general and rarely depend on it.

use http::HeaderMap;

use super::Dialect;
use super::body::Shape;

impl Dialect {
    /// Every dialect, in declaration order.
    pub const ALL: [Dialect; 11] = [
        Dialect::OpenAi,
        Dialect::Azure,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Vertex,
        Dialect::Bedrock,
        Dialect::Mistral,
        Dialect::Groq,
        Dialect::Cohere,
        Dialect::OpenRouter,
        Dialect::Generic,
    ];

    /// The stable lowercase name (`"openai"`), the prefix of reasons.
    pub const fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Azure => "azure",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
            Dialect::Vertex => "vertex",
            Dialect::Bedrock => "bedrock",
            Dialect::Mistral => "mistral",
            Dialect::Groq => "groq",
            Dialect::Cohere => "cohere",
            Dialect::OpenRouter => "openrouter",
            Dialect::Generic => "generic",
        }
    }

    /// Parses [`Dialect::as_str`]'s names, ASCII case-insensitively, and the
    /// common aliases `azure-openai`, `vertex-ai`, `google` and `aws`.
    pub fn from_name(name: &str) -> Option<Dialect> {
        let alias = [
            ("azure-openai", Dialect::Azure),
            ("vertex-ai", Dialect::Vertex),
            ("google", Dialect::Gemini),
            ("aws", Dialect::Bedrock),
        ];
        Dialect::ALL
            .into_iter()
            .map(|d| (d.as_str(), d))
            .chain(alias)
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, d)| d)
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The dialect the headers name, if any. Azure forwards some `openai-*`
/// headers, so its own markers win over OpenAI's.
pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Dialect> {
    let mut found: Option<Dialect> = None;
    for name in headers.keys() {
        let n = name.as_str();
        let d = if n.starts_with("x-amzn-") {
            return Some(Dialect::Bedrock);
        } else if n.starts_with("anthropic-") {
            return Some(Dialect::Anthropic);
        } else if n.starts_with("x-ms-") || n.starts_with("azureml-") || n == "apim-request-id" {
            return Some(Dialect::Azure);
        } else if n.starts_with("x-groq-") {
            Dialect::Groq
        } else if n.starts_with("mistral-") {
            Dialect::Mistral
        } else if n.starts_with("openai-") {
            Dialect::OpenAi
        } else {
            continue;
        };
        // Provider-specific markers beat the `openai-*` ones compatible APIs copy.
        if found.is_none_or(|f| f == Dialect::OpenAi) {
            found = Some(d);
        }
    }
    found
}

/// Links in a message that name the provider behind an OpenAI-shaped body.
const MARKERS: [(&str, Dialect); 6] = [
    ("groq.com", Dialect::Groq),
    ("openrouter.ai", Dialect::OpenRouter),
    ("azure", Dialect::Azure),
    ("aka.ms/oai", Dialect::Azure),
    ("mistral.ai", Dialect::Mistral),
    ("cohere", Dialect::Cohere),
];

/// The dialect an error body's envelope suggests; `lower` is its message in
/// ASCII lowercase.
pub(crate) fn from_body(shape: Shape, lower: &str) -> Dialect {
    let marked = |default| {
        MARKERS
            .iter()
            .find(|(m, _)| lower.contains(m))
            .map_or(default, |&(_, d)| d)
    };
    let google = |default| {
        if lower.contains("vertex") || lower.contains("aiplatform") {
            Dialect::Vertex
        } else if lower.contains("generativelanguage") || lower.contains("ai.google.dev") {
            Dialect::Gemini
        } else {
            default
        }
    };
    match shape {
        Shape::Anthropic => Dialect::Anthropic,
        Shape::Google => google(Dialect::Gemini),
        Shape::GoogleArray => google(Dialect::Vertex),
        Shape::Mistral => Dialect::Mistral,
        Shape::Azure => Dialect::Azure,
        Shape::OpenRouter => marked(Dialect::OpenRouter),
        Shape::OpenAi => marked(Dialect::OpenAi),
        Shape::Message | Shape::Text => marked(Dialect::Generic),
    }
}
