//! [`TokenCost`]: what a request will count against its provider's token
//! limits, for pacing.

/// What a request will count against a token limit (its prompt and the
/// most output it allows), put in its extensions so that pacing can count
/// it while it is in flight. Without one a request counts against request
/// limits only.
///
/// Estimate it from the JSON body with [`levee_core::pace::estimate_tokens`]:
///
/// ```
/// use tower_levee::breaker::TokenCost;
///
/// let body = r#"{"model":"gpt-4o","max_tokens":500,"messages":[]}"#;
/// let mut req = http::Request::post("https://api.openai.com/v1/chat/completions")
///     .body(body.to_owned())
///     .unwrap();
/// req.extensions_mut().insert(TokenCost::of_json(body.as_bytes()));
/// assert_eq!(req.extensions().get::<TokenCost>(), Some(&TokenCost(513)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(
    clippy::exhaustive_structs,
    reason = "a newtype a caller builds as `TokenCost(n)`: one number is all it can be"
)]
pub struct TokenCost(pub u64);

impl TokenCost {
    /// The estimate for a JSON request body
    /// ([`estimate_tokens`](levee_core::pace::estimate_tokens)).
    pub fn of_json(body: &[u8]) -> Self {
        TokenCost(levee_core::pace::estimate_tokens(body))
    }
}
