//! Which provider dialect a response speaks.
//!
//! The caller's hint ([`ResponseView::dialect`](super::ResponseView)) wins;
//! then headers, which name the provider reliably (`x-amzn-*`,
//! `anthropic-*`, `x-ms-*`, `openai-*`, `x-groq-*`: read in `headers`);
//! then the error body's envelope, and for the OpenAI-shaped envelope every
//! compatible provider copies, the provider's own links in the message
//! (read in `body`). The dialect prefixes reasons
//! (`anthropic:overloaded_error`); the verdict rules themselves are general
//! and rarely depend on it.
//!
//! This module only names dialects: it depends on nothing else here, so
//! every reader can use it.

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
