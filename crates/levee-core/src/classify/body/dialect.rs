//! The dialect an error body's envelope and words suggest, when the
//! headers named none.

use super::Shape;
use crate::classify::dialect::Dialect;
use crate::classify::text::{Needle, contains_any, needles};

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
        Shape::Baidu | Shape::MiniMax | Shape::Spark => Dialect::Generic,
    }
}
