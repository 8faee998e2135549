//! What statuses and provider codes mean.
//!
//! Codes are matched by the words they are built from rather than looked up
//! one by one: `project_spend_limit_exceeded` and
//! `organization_usage_limit_exceeded` are caps because they contain
//! `spend_limit`/`usage_limit`, whatever the next provider prefixes them with.

use super::super::body::Shape;
use super::super::text::{Word, pairs};
use super::super::verdict::Verdict;

/// What the status alone says.
pub(crate) fn status_verdict(status: u16) -> Verdict {
    match status {
        0..=399 => Verdict::Success,
        401 | 403 => Verdict::Credential,
        402 => Verdict::Quota,
        408 => Verdict::Availability,
        429 => Verdict::Throttled,
        400..=499 => Verdict::Request,
        // 5xx, Anthropic's 529, and anything non-standard a broken server sends.
        _ => Verdict::Availability,
    }
}

macro_rules! words {
    ($($w:literal),* $(,)?) => { &[$(Word::new($w)),*] };
}

/// Words codes are built from, by the verdict they name. Checked in this
/// order: `insufficient_quota` is a cap before it is anything else, and
/// `unsupported_country_region_territory` an entitlement, not a bad request.
const CODE_WORDS: [(Verdict, &[Word]); 5] = [
    (
        Verdict::Quota,
        words![
            "insufficient_quota",
            "spend_limit",
            "usage_limit",
            "billing",
            "insufficient_balance",
            "credit",
            "insufficient_fund",
            "payment_required",
            "current_quota",
            "quota_exceeded",
            "daily_limit",
            "dailylimit",
            "user_quota",
            "arrear",
            "overdue",
            "pastdue",
            "past_due",
            "resourcepack",
            "chargeresource",
        ],
    ),
    (
        Verdict::Credential,
        words![
            "api_key",
            "apikey",
            "auth",
            "permission",
            "access_denied",
            "accessdenied",
            "forbidden",
            "unsupported_country",
            "deactivated",
            "invalid_key",
            "unrecognizedclient",
            "signature",
            "expiredtoken",
        ],
    ),
    (
        Verdict::Throttled,
        words![
            "rate_limit",
            "ratelimit",
            "too_many_requests",
            "toomanyrequests",
            "resource_exhausted",
            "throttl",
            "slow_down",
            "slowdown",
            "servicequotaexceeded",
        ],
    ),
    (
        Verdict::Availability,
        words![
            "overload",
            "capacity",
            "server_error",
            "servererror",
            "api_error",
            "internal",
            "unavailable",
            "timeout",
            "timed_out",
            "deadline_exceeded",
            "not_ready",
            "notready",
            "bad_gateway",
        ],
    ),
    (
        Verdict::Request,
        words![
            "invalid_request",
            "invalid_argument",
            "not_found",
            "notfound",
            "too_large",
            "context_length",
            "content_filter",
            "validation",
            "bad_request",
            "moderation",
            "invalid_prompt",
            "unsupported",
            "failed_precondition",
            "out_of_range",
            "policy_violation",
            "policyviolation",
            "content_policy",
            "sensitive",
        ],
    ),
];

/// The verdict a provider code names, if it names one.
pub(crate) fn code_kind(code: &str) -> Option<Verdict> {
    in_lowercase(code, |lower, code_pairs| {
        // A gateway's catch-all type (one-api's `one_api_error`, new-api's
        // `new_api_error`) names nothing; Anthropic's own `api_error` is
        // its 500.
        if lower.len() > "api_error".len() && lower.ends_with(b"_api_error") {
            return None;
        }
        CODE_WORDS
            .iter()
            .find(|(_, words)| words.iter().any(|w| w.in_code(lower, code_pairs)))
            .map(|&(v, _)| v)
    })
}

/// Words of a code that names a rate limit itself, not a resource running out.
const RATE_LIMIT_WORDS: &[Word] = words![
    "rate_limit",
    "ratelimit",
    "too_many_requests",
    "toomanyrequests",
    "throttl"
];

/// Whether a code names a rate limit itself (`rate_limit`,
/// `too_many_requests`, `throttling`).
pub(crate) fn names_rate_limit(code: &str) -> bool {
    in_lowercase(code, |lower, code_pairs| {
        RATE_LIMIT_WORDS
            .iter()
            .any(|w| w.in_code(lower, code_pairs))
    })
}

/// `f` over the code's first 64 bytes in ASCII lowercase, and their pairs.
fn in_lowercase<R>(code: &str, f: impl FnOnce(&[u8], u64) -> R) -> R {
    let mut buf = [0u8; 64];
    let len = code.len().min(buf.len());
    let lower = &mut buf[..len];
    lower.copy_from_slice(&code.as_bytes()[..len]);
    lower.make_ascii_lowercase();
    f(lower, pairs(lower))
}

/// Whether a code asks the caller to slow down (OpenAI's `slow_down`, S3's
/// `SlowDown`).
pub(crate) fn is_slow_down_code(code: &str) -> bool {
    let code = code.as_bytes();
    ["slow_down", "slowdown"].iter().any(|w| {
        code.windows(w.len())
            .any(|window| window.eq_ignore_ascii_case(w.as_bytes()))
    })
}

/// AWS exception names (`x-amzn-ErrorType`, `__type`, `:exception-type`),
/// the protocol's own dispatch key: Bedrock's 429 `ModelNotReadyException`
/// is a model still loading, its 400 `ServiceQuotaExceededException` a
/// throttle, its 424 `ModelErrorException` whatever the model's own status was.
pub(crate) fn aws_exception(name: &str, original_status: Option<u16>) -> Option<Verdict> {
    let name = name.split(':').next().unwrap_or(name);
    let name = name.rsplit('#').next().unwrap_or(name).trim_ascii();
    let is = |n: &str| name.eq_ignore_ascii_case(n);
    let v = if [
        "ThrottlingException",
        "ServiceQuotaExceededException",
        "TooManyRequestsException",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Throttled
    } else if ["ModelErrorException", "ModelStreamErrorException"]
        .into_iter()
        .any(is)
    {
        original_status
            .map(status_verdict)
            .filter(|&v| v != Verdict::Success)
            .unwrap_or(Verdict::Availability)
    } else if [
        "ModelNotReadyException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
        "InternalFailure",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Availability
    } else if [
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "IncompleteSignature",
        "MissingAuthenticationTokenException",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Credential
    } else if [
        "ValidationException",
        "ResourceNotFoundException",
        "ConflictException",
    ]
    .into_iter()
    .any(is)
    {
        Verdict::Request
    } else {
        return code_kind(name);
    };
    Some(v)
}

/// What the numeric codes of the providers that answer `200` with an error
/// mean, where their words alone would mislead or say nothing: Baidu
/// Qianfan's ([error codes](https://cloud.baidu.com/doc/WENXINWORKSHOP/s/tlmyncueh):
/// `4` is the whole cluster's limit, not the key's; `17` daily and `19`
/// total allowances; `18` the QPS limit), MiniMax's
/// ([error codes](https://platform.minimax.io/docs/api-reference/errorcode):
/// `1002` RPM and `1039` TPM limits, `1008` the balance) and iFlytek
/// Spark's ([error codes](https://www.xfyun.cn/doc/spark/Web.html):
/// `10003`–`10005` a malformed message, schema or parameter, `10006` and
/// `10007` a user's concurrency and flow limits, `10008`–`10012`, `10110`
/// and `10222` the engine failing or busy, `10015`/`10016` an app id
/// refused, `10907` too many tokens, `11201` daily, `11202` QPS, `11203`
/// concurrency). `11200` is left to
/// its words: Spark says both a missing entitlement and a spent token
/// allowance with it.
pub(crate) fn numbered(shape: Shape, n: u64) -> Option<Verdict> {
    use Verdict::{Availability, Credential, Quota, Request, Throttled};
    let v = match (shape, n) {
        (Shape::Baidu, 2 | 4 | 336_000 | 336_100) => Availability,
        (Shape::Baidu, 6 | 14 | 100 | 110 | 111) => Credential,
        (Shape::Baidu, 17 | 19) => Quota,
        (Shape::Baidu, 18 | 336_501 | 336_502) => Throttled,
        (Shape::Baidu, 336_001..=336_006) => Request,
        (Shape::MiniMax, 1000 | 1001 | 1013) => Availability,
        (Shape::MiniMax, 1002 | 1039 | 1041) => Throttled,
        (Shape::MiniMax, 1004 | 2049) => Credential,
        (Shape::MiniMax, 1008) => Quota,
        (Shape::MiniMax, 1026 | 1027 | 2013) => Request,
        (Shape::Spark, 10003..=10005 | 10013 | 10014 | 10019 | 10163 | 10907) => Request,
        (Shape::Spark, 10006 | 10007) => Throttled,
        (Shape::Spark, 10008..=10012 | 10110 | 10222) => Availability,
        (Shape::Spark, 10015 | 10016) => Credential,
        (Shape::Spark, 11201) => Quota,
        (Shape::Spark, 11202 | 11203) => Throttled,
        _ => return None,
    };
    Some(v)
}
