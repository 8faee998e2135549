//! Turning a provider response into a verdict.
//!
//! Everything Levee does starts here. A breaker that counts every error
//! ejects a busy account at its peak, because the most common error an LLM
//! provider returns, `429`, means the account answered promptly and is
//! healthy: **throttling is not failure**. So a response is not "ok or
//! error" but one of six [`Verdict`]s, each driving its own mechanism:
//!
//! | verdict | typical signal | mechanism |
//! |---|---|---|
//! | `Success` | 2xx, a stream that reached its terminal event | — |
//! | `Availability` | timeout, connect error, 5xx, 529, 408, load shed under any status, a stream cut or failing mid-way | breaker |
//! | `Credential` | 401/403, invalid key, region not served | breaker, lower threshold |
//! | `Throttled` | 429 with or without a wait | throttle gate, never the breaker |
//! | `Quota` | a spend cap, credits, a daily allowance: any 4xx naming a cap | park until the reset |
//! | `Request` | 400/404/413/422, a request too large for any window | nothing |
//!
//! # The body decides before the status
//!
//! Providers reuse statuses: a `429` is a spend cap when its code is
//! `insufficient_quota` or `*_spend_limit_exceeded`, and a bad request when
//! it says "Request too large … must be reduced"; Anthropic's spend limit is
//! a `400`, Gemini's rejected key a `400 INVALID_ARGUMENT` with `ErrorInfo`
//! `API_KEY_INVALID`, Bedrock's `429 ModelNotReadyException` a model still
//! loading. So the classifier reads the AWS exception name
//! (`x-amzn-ErrorType`), then the body's codes (most specific first), then
//! the phrases providers put behind generic codes ("usage limit", "credits
//! are depleted"), and only then the status. The body is a bounded peek (16 KiB by default) of
//! non-2xx responses only: a 2xx is classified without reading anything,
//! and a cut or non-UTF-8 body still classifies from what is readable.
//!
//! Two rules generalise beyond the providers named here:
//!
//! - **An exhausted allowance named in the body wins over the status.** A
//!   `401` "Insufficient balance", a `403` "Out of call volume quota" or
//!   "Key limit exceeded (monthly limit)", a `400` "Your credit balance is
//!   too low" are the account's allowance, not its key or the request: a
//!   quota. "Quota exceeded" alone is read so only under a status that is
//!   not a throttle, since Google says it of its per-minute limits.
//! - **Shedding load is never the request's fault.** A provider-specific
//!   status ([Groq's `498`](https://console.groq.com/docs/errors) "flex tier
//!   capacity exceeded"), a `429` whose code or words say the model or
//!   server is overloaded or out of capacity, and Cloudflare's `52x` pages
//!   in front of a provider are availability. A 5xx stays availability
//!   whatever its body, except a provider asking its caller to slow down
//!   ([OpenAI's `503 Slow Down`](https://platform.openai.com/docs/guides/error-codes)):
//!   the account is healthy and its own rate is the problem, a throttle.
//!
//! A gateway's copy of the upstream provider's error (OpenRouter's
//! `error.metadata.raw`) is read with the message. Three more follow the
//! providers' own documentation:
//!
//! - **The period named beats the code.** A cap's code on a per-second or
//!   per-minute limit ([Together's](https://docs.together.ai/docs/rate-limits)
//!   `credit_limit` "60 queries per minute", Cerebras's
//!   `token_quota_exceeded` "Tokens per minute limit exceeded") is a
//!   throttle; a throttle's code on a daily, weekly, monthly or plan
//!   window ("5-hour usage limit reached", "week allocated quota
//!   exceeded", `duration_s: 86400`) is a quota.
//! - **Money and credentials are read in the words, in any language**:
//!   an unpaid bill ("overdue balance", `Arrearage`), a balance to top up
//!   (余额不足, 请充值, 残高不足, 잔액 부족, недостаточно средств), a token
//!   that "seems invalid" under a `400`. Messages are lowercased in any
//!   script before the phrases are looked for.
//! - **Errors inside a `200`** (Baidu's `error_code`, MiniMax's
//!   `base_resp`, Tencent Cloud's `Response.Error`) are errors, read in a
//!   stream's first event and, where asked for
//!   ([`peek_success`](ProviderClassifierBuilder::peek_success)), in a
//!   plain `200`.
//!
//! # Your rules first
//!
//! [`Rules`] are checked before all of this: a status, a code, a phrase, a
//! JSON field or a header decides a verdict, a wait and a reason, read from
//! a TOML file or built in code. Every built-in rule, in order and in the
//! same terms: `docs/classification.md` in the repository.
//!
//! # Wait hints, first usable match wins
//!
//! 1. `retry-after-ms`, `x-ms-retry-after-ms`, `retry-after` (seconds,
//!    fractional seconds, or an HTTP-date measured from the `Date` header);
//! 2. the body: Gemini's `RetryInfo.retryDelay` or a field of its own
//!    (`retry_after`, `retry_after_ms`, Hugging Face's `estimated_time`),
//!    then the message ("try again
//!    in 1m26.4s", "retry after 60 seconds", "your quota will reset after
//!    8h44m7s", "replenished in 5.03:23:11", "regain access on 2026-09-01 at
//!    00:00 UTC");
//! 3. the reset header of the exhausted dimension only
//!    (`x-ratelimit-reset-tokens` when `x-ratelimit-remaining-tokens: 0`,
//!    `anthropic-ratelimit-*-reset`).
//!
//! Zero, negative, past and garbage values are skipped; waits are rounded up
//! to the millisecond and reported as the provider meant them, under a
//! sanity cap ([`ProviderClassifier::DEFAULT_MAX_WAIT`], 366 days). The gate
//! and retry layers apply their own caps. See [`hints`].
//!
//! # A throttle that will not lift is a quota
//!
//! A throttle whose wait exceeds [`quota_after`](ProviderClassifierBuilder::quota_after)
//! (one hour by default, the longest window providers rate-limit over), or
//! that names a per-day or per-month limit with no short wait, is a
//! [`Verdict::Quota`] with its wait kept: Azure's "retry after 86400
//! seconds" is a deployment with no quota left, a Gemini `PerDay` violation
//! an allowance gone until tomorrow. This is a fact about the response
//! (which kind of limit was hit), so it lives here; how long the gate holds
//! traffic before parking is the gate's own policy. Conversely a throttle
//! that lifts within `quota_after` is never a cap: its message is not
//! searched for one.
//!
//! # Reasons
//!
//! Short and stable: `<dialect>:<code>` with the provider's code when one
//! decided (`openai:insufficient_quota`, `anthropic:overloaded_error`,
//! `gemini:RESOURCE_EXHAUSTED`, `bedrock:ThrottlingException`);
//! `<dialect>:<rule>` when a Levee rule did (`spend_limit`, `usage_limit`,
//! `credits_exhausted`, `billing_disabled`, `quota_exceeded`, `per_day`,
//! `per_month`, `long_wait`, `overloaded`, `slow_down`,
//! `request_too_large`, `moderation`, `location_unsupported`,
//! `invalid_api_key`, `account_disabled`, `finish_reason_error`); `status:<n>` when only the
//! status spoke; `transport:<kind>`, `stream:eof_before_done`,
//! `stream:error`; `success` (no allocation). The dialect is the caller's
//! hint, else read from headers and the body ([`Dialect::as_str`]).
//!
//! # Streams
//!
//! A `200` stream can still fail: [`Classify::stream_scanner`] returns a
//! [`StreamScanner`] that reads a 2xx stream's chunks as they pass and
//! reports in-band errors and cut streams.
//!
//! ```
//! use http::{HeaderMap, StatusCode};
//! use levee_core::classify::{Classify, ProviderClassifier, ResponseView, Verdict};
//! use std::time::Duration;
//!
//! let classifier = ProviderClassifier::default();
//! let headers = HeaderMap::new();
//!
//! // Same status, three verdicts: the body decides.
//! let throttled = br#"{"error":{"code":"rate_limit_exceeded","message":"Please try again in 1m26.4s."}}"#;
//! let capped = br#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#;
//! let too_big = br#"{"error":{"code":"rate_limit_exceeded","message":"Request too large for gpt-4o. The input or output tokens must be reduced."}}"#;
//! let classify = |body: &[u8]| {
//!     classifier.classify_response(&ResponseView::new(StatusCode::TOO_MANY_REQUESTS, &headers, body))
//! };
//!
//! let c = classify(throttled);
//! assert_eq!((c.verdict, c.wait), (Verdict::Throttled, Some(Duration::from_millis(86_400))));
//! assert_eq!(c.reason.as_str(), "openai:rate_limit_exceeded");
//! assert!(!c.verdict.is_breaker_failure());
//! assert_eq!(classify(capped).verdict, Verdict::Quota);
//! assert_eq!(classify(too_big).reason.as_str(), "openai:request_too_large");
//! ```

pub mod hints;

mod body;
mod custom;
mod dialect;
mod headers;
mod provider;
mod rules;
mod stream;
#[cfg(test)]
mod tests;
pub(crate) mod text;

mod response;
mod verdict;

pub use self::custom::{Rule, RuleBuilder, Rules};
pub use self::dialect::Dialect;
pub use self::provider::{ProviderClassifier, ProviderClassifierBuilder, answers_errors_with_200};
pub use self::response::{Classify, HeadDecision, ResponseView};
#[cfg(test)]
pub(crate) use self::stream::eventstream_tests;
pub(crate) use self::stream::{AwsMessage, Frames, aws_chunk_event, is_content, is_delta_name};
pub use self::stream::{StreamFormat, StreamScanner};
pub use self::verdict::{Classification, Reason, StatedLimit, TransportFailure, Verdict};
