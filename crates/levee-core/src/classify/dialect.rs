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

use super::body::Shape;
use super::text::{Needle, contains_any, needles};

/// The provider family whose error dialect a response speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Dialect {
    /// OpenAI.
    #[cfg_attr(feature = "serde", serde(rename = "openai"))]
    OpenAi,
    /// Azure OpenAI.
    Azure,
    /// Anthropic.
    Anthropic,
    /// Google Gemini API.
    Gemini,
    /// Google Vertex AI.
    Vertex,
    /// AWS Bedrock.
    Bedrock,
    /// Mistral.
    Mistral,
    /// Groq.
    Groq,
    /// Cohere.
    Cohere,
    /// OpenRouter.
    #[cfg_attr(feature = "serde", serde(rename = "openrouter"))]
    OpenRouter,
    /// Any other OpenAI-compatible endpoint.
    Generic,
}

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

/// The dialect the headers name, if any.
pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Dialect> {
    headers
        .keys()
        .fold(None, |found, name| better(found, marker(name.as_str())))
}

/// The dialect a header name marks: `x-amzn-*` Bedrock, `anthropic-*`
/// Anthropic, `x-ms-*`/`azureml-*`/`apim-request-id` Azure, `x-groq-*` Groq,
/// `mistral-*` Mistral, `openai-*` OpenAI.
pub(crate) fn marker(name: &str) -> Option<Dialect> {
    // Every response carries a dozen headers: dispatch on two bytes before
    // comparing any prefix.
    let b = name.as_bytes();
    let (d, prefix) = match (b.first(), b.get(2)) {
        (Some(b'x'), Some(b'a')) => (Dialect::Bedrock, "x-amzn-"),
        (Some(b'x'), Some(b'm')) => (Dialect::Azure, "x-ms-"),
        (Some(b'x'), Some(b'g')) => (Dialect::Groq, "x-groq-"),
        (Some(b'a'), Some(b't')) => (Dialect::Anthropic, "anthropic-"),
        (Some(b'a'), Some(b'u')) => (Dialect::Azure, "azureml-"),
        (Some(b'a'), Some(b'i')) => (Dialect::Azure, "apim-request-id"),
        (Some(b'o'), Some(b'e')) => (Dialect::OpenAi, "openai-"),
        (Some(b'm'), Some(b's')) => (Dialect::Mistral, "mistral-"),
        _ => return None,
    };
    name.starts_with(prefix).then_some(d)
}

/// The stronger of two markers. Azure and the OpenAI-compatible providers
/// forward `openai-*` headers, so OpenAI's marker is the weakest; the
/// others do not mix in practice, and the first seen stays.
pub(crate) fn better(found: Option<Dialect>, new: Option<Dialect>) -> Option<Dialect> {
    match (found, new) {
        (None | Some(Dialect::OpenAi), Some(d)) => Some(d),
        (found, _) => found,
    }
}

/// Links in a message that name the provider behind an OpenAI-shaped body.
static MARKERS: [(Needle, Dialect); 6] = [
    (Needle::new("groq.com"), Dialect::Groq),
    (Needle::new("openrouter.ai"), Dialect::OpenRouter),
    (Needle::new("azure"), Dialect::Azure),
    (Needle::new("aka.ms/oai"), Dialect::Azure),
    (Needle::new("mistral.ai"), Dialect::Mistral),
    (Needle::new("cohere"), Dialect::Cohere),
];

/// The dialect an error body's envelope suggests; `lower` is its message in
/// ASCII lowercase.
pub(crate) fn from_body(shape: Shape, lower: &str) -> Dialect {
    let marked = |default| {
        MARKERS
            .iter()
            .find(|(m, _)| m.is_in(lower))
            .map_or(default, |&(_, d)| d)
    };
    let google = |default| {
        if contains_any(lower, needles!["vertex", "aiplatform"]) {
            Dialect::Vertex
        } else if contains_any(lower, needles!["generativelanguage", "ai.google.dev"]) {
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
