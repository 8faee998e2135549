//! Caps, entitlements and windows named in words.
//!
//! Each rule looks for an anchor word and reads only its neighbourhood (see
//! `text`), so a 16 KiB message costs a handful of SIMD scans.

use super::super::text::{Lower, contains_any, near, needle, needles, preceded_by};

/// A cap named in words, behind a generic code (Anthropic's 400
/// `invalid_request_error` "You have reached your specified API usage
/// limits", OpenRouter's "Insufficient credits", Gemini's 402 "prepayment
/// credits are depleted", DeepSeek's "Insufficient Balance"). "Quota
/// exceeded" alone is not one: Google says it of per-minute limits.
pub(super) fn quota_text(lower: &Lower) -> Option<&'static str> {
    let b = lower.as_bytes();
    // "spend limit", "spending limit", "spend cap", "spending cap".
    let spend_cap = needle!("spend").find_all(lower).any(|at| {
        let rest = &b[at + "spend".len()..];
        let rest = rest.strip_prefix(b"ing").unwrap_or(rest);
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        rest.starts_with(b"limit") || rest.starts_with(b"cap")
    });
    if spend_cap || near(lower, needle!("budget"), &["exceeded"], 24) {
        Some("spend_limit")
    } else if contains_any(lower, needles!["usage limit", "hard limit"]) {
        Some("usage_limit")
    } else if contains_any(lower, needles!["billing to be enabled", "enable billing"]) {
        Some("billing_disabled")
    } else if near(lower, needle!("limit"), &["exceeded", "reached"], 16)
        && let Some(window) = long_window_text(lower)
    {
        // "Key limit exceeded (monthly limit)": a limit over a day or a month.
        Some(window)
    } else if contains_any(
        lower,
        needles![
            "arrear",
            "overdue",
            "past due",
            "past-due",
            "past invoices",
            "unpaid",
            "good standing",
        ],
    ) {
        // An unpaid bill: "your account has an overdue balance" (Volcengine
        // Ark), "Arrearage … make sure your account is in good standing"
        // (Alibaba Model Studio), "failure to pay past invoices" (Fireworks).
        Some("billing_overdue")
    } else if near(
        lower,
        needle!("credit"),
        &[
            "insufficient",
            "depleted",
            "exhausted",
            "too low",
            "out of",
            "ran out",
            "run out",
            "any credits",
            "purchase",
        ],
        24,
    ) || near(
        lower,
        needle!("balance"),
        &[
            "insufficient",
            "too low",
            "not enough",
            "exhausted",
            "run out",
        ],
        16,
    ) || contains_any(
        lower,
        needles![
            "insufficient fund",
            "recharge",
            "top up your",
            "top-up your",
            "please top up",
            "used all your",
            "used up all",
            "not enough quota",
            "quota is not enough",
            "quota not enough",
            // iFlytek Spark's `11200 … tokens.total`: the token allowance is spent.
            "tokens.total",
        ],
    ) || money_words(lower)
    {
        Some("credits_exhausted")
    } else {
        None
    }
}

/// "Balance insufficient, please top up", "quota used up", "arrears" in
/// the languages providers answer in: Chinese (余额不足, 请充值, 欠费,
/// 资源包已用尽, 额度已用完), Japanese (残高不足, クレジット不足), Korean (잔액
/// 부족, 충전), Russian (недостаточно средств), Spanish and Portuguese
/// (saldo insuficiente), French (solde insuffisant), German (Guthaben).
/// Matched on the message lowercased in any script.
fn money_words(lower: &Lower) -> bool {
    // A phrase with a letter outside ASCII cannot be in an ASCII message.
    (!lower.ascii()
        && contains_any(
            lower,
            needles![
                "余额不足",
                "余额已用",
                "欠费",
                "充值",
                "资源包",
                "额度已用",
                "额度不足",
                "额度用尽",
                "配额已用",
                "配额不足",
                "残高不足",
                "残高がありません",
                "クレジットが不足",
                "クレジット残高",
                "잔액",
                "충전",
                "크레딧 부족",
                "недостаточно средств",
                "недостаточный баланс",
                "пополните баланс",
                "баланс исчерпан",
                "créditos insuficientes",
                "crédito insuficiente",
                "crédit insuffisant",
                "crédits insuffisants",
            ],
        ))
        // The same in words with no letter outside ASCII.
        || contains_any(
            lower,
            needles!["saldo insuficiente", "solde insuffisant", "guthaben"],
        )
}

/// An allowance exhausted in words ("Out of call volume quota", "exceeded
/// current quota"). Read only under a status that is not a throttle:
/// Google says "Quota exceeded" of its per-minute limits under a `429`.
pub(super) fn allowance_text(lower: &Lower) -> Option<&'static str> {
    near(
        lower,
        needle!("quota"),
        &[
            "exceeded",
            "exhausted",
            "out of",
            "insufficient",
            "reached",
            "used up",
        ],
        24,
    )
    .then_some("quota_exceeded")
}

/// Load shedding in words: the provider (or the model's pool) has no room,
/// whoever asks. "Exhausted your capacity" is the caller's allowance and
/// does not match.
pub(super) fn overload_text(lower: &Lower) -> bool {
    // One search for "capacity" serves the five phrases built on it.
    needle!("overloaded").is_in(lower)
        || needle!("high demand").is_in(lower)
        || needle!("capacity").find_all(lower).any(|at| {
            lower[at + "capacity".len()..].starts_with(" exceeded")
                || ["no ", "over ", "at ", "out of "]
                    .iter()
                    .any(|w| lower[..at].ends_with(w))
        })
        || (!lower.ascii()
            && contains_any(
                lower,
                needles![
                    // Zhipu's 1305 "该模型当前访问量过大", one-api's "上游负载已饱和",
                    // DeepSeek's "服务器繁忙".
                    "访问量过大",
                    "负载已饱和",
                    "负载过高",
                    "服务繁忙",
                    "系统繁忙",
                    "服务器繁忙",
                    "过载",
                    "混雑",
                    "混み合",
                    "과부하",
                    "혼잡",
                    "перегруж",
                    "surchargé",
                    "überlast",
                    "sobrecarg",
                ],
            ))
}

/// A rate limit in words, for an error with no status to say so (one
/// inside a `200`): "rate limit", "too many requests", "qps", a
/// concurrency cap, and the same in the languages providers answer in.
pub(super) fn throttle_text(lower: &Lower) -> bool {
    contains_any(
        lower,
        needles![
            "rate limit",
            "ratelimit",
            "too many requests",
            "request limit",
            "requests limit",
            "qps",
            "concurren",
            "too frequent",
        ],
    ) || short_window_text(lower)
        || (!lower.ascii()
            && contains_any(
                lower,
                needles![
                    "频繁",
                    "频率",
                    "并发",
                    "请求过多",
                    "限流",
                    "リクエストが多すぎ",
                    "レート制限",
                    "요청이 너무 많",
                    "속도 제한",
                    "слишком много запросов",
                    "превышен лимит запросов",
                    "demasiadas solicitudes",
                    "muitas requisições",
                    "muitas solicitações",
                    "trop de requêtes",
                    "zu viele anfragen",
                ],
            ))
}

/// A limit counted over a second or a minute, or on concurrent requests:
/// a code that sounds like a cap (`credit_limit`, `token_quota_exceeded`,
/// `insufficient_quota`) on such a limit is a throttle, as the providers'
/// rate-limit pages say ("60 queries per minute", "Tokens per minute limit
/// exceeded").
pub(super) fn short_window_text(lower: &Lower) -> bool {
    contains_any(
        lower,
        needles![
            "per minute",
            "per-minute",
            "per second",
            "per-second",
            "per min ",
            "requests per min",
            "tokens per min",
            "concurrency",
            "concurrent request",
            // A link to the provider's rate-limit documentation (Alibaba Model
            // Studio's `error-code#token-limit` behind OpenAI's cap sentence).
            "#token-limit",
            "#rate-limit",
        ],
    ) || ["rpm", "tpm", "rps", "qps"]
        .iter()
        .any(|w| has_word(lower, w))
        || (!lower.ascii()
            && contains_any(
                lower,
                needles![
                    "每秒",
                    "每分钟",
                    "并发",
                    "毎分",
                    "毎秒",
                    "분당",
                    "초당",
                    "в минуту",
                    "в секунду",
                ],
            ))
        || contains_any(
            lower,
            needles![
                "por minuto",
                "por segundo",
                "par minute",
                "par seconde",
                "pro minute",
                "pro sekunde",
            ],
        )
}

/// Whether `word` (ASCII) occurs in `lower` with no letter on either side.
fn has_word(lower: &str, word: &str) -> bool {
    let b = lower.as_bytes();
    let mut from = 0;
    while let Some(i) = lower[from..].find(word) {
        let at = from + i;
        let end = at + word.len();
        let before = at.checked_sub(1).map(|j| b[j]);
        let after = b.get(end).copied();
        if !before.is_some_and(|c| c.is_ascii_alphabetic())
            && !after.is_some_and(|c| c.is_ascii_alphabetic())
        {
            return true;
        }
        from = end;
    }
    false
}

/// A request the provider will not serve as written, for an error with no
/// status to say so: content moderation, invalid parameters.
pub(super) fn request_text(lower: &Lower) -> bool {
    contains_any(
        lower,
        needles![
            "sensitive content",
            "sensitive word",
            "moderation",
            "content filter",
            "inappropriate",
            "invalid param",
            "invalid argument",
            "invalid request",
            "context length",
            "prompt is too long",
            "input is too long",
        ],
    ) || (!lower.ascii() && contains_any(lower, needles!["敏感", "违规", "参数错误", "参数无效"]))
}

/// A provider asking its caller to lower its request rate (OpenAI's `503
/// Slow Down`: "a sudden increase in your request rate").
pub(super) fn slow_down_text(lower: &Lower) -> bool {
    near(lower, needle!("slow down"), &["rate"], 96)
        || needle!("reduce your request rate").is_in(lower)
}

/// An account that may not use this endpoint or model from here.
pub(super) fn credential_text(lower: &Lower) -> Option<&'static str> {
    if near(
        lower,
        needle!("has been"),
        &[
            "disabled",
            "deactivated",
            "suspended",
            "revoked",
            "terminated",
        ],
        16,
    ) && contains_any(lower, needles!["organization", "account", "key", "project"])
    {
        // "This organization has been disabled." (Anthropic, under a 400).
        Some("account_disabled")
    } else if near(
        lower,
        needle!("not supported"),
        &["location", "territory", "country"],
        24,
    ) {
        Some("location_unsupported")
    } else if near(
        lower,
        needle!("api key"),
        &["not valid", "invalid", "incorrect", "expired"],
        12,
    ) || [
        needle!("access token"),
        needle!("api token"),
        needle!("auth token"),
        needle!("bearer token"),
    ]
    .into_iter()
    .any(|anchor| {
        near(
            lower,
            anchor,
            &["invalid", "expired", "no longer valid", "revoked"],
            12,
        )
    }) || contains_any(
        lower,
        needles![
            // Hugging Face's 400 "Authorization header is correct, but the
            // token seems invalid".
            "token seems invalid",
            "login fail",
            "authentication fail",
            "authorization fail",
            "noauth",
        ],
    ) || (!lower.ascii()
        && contains_any(
            lower,
            needles![
                "密钥不存在",
                "密钥无效",
                "无效的密钥",
                "鉴权失败",
                "认证失败",
                "令牌无效",
                "認証に失敗",
                "인증 실패",
                "неверный ключ",
                "ошибка авторизации",
            ],
        ))
    {
        Some("invalid_api_key")
    } else {
        None
    }
}

/// A limit counted over a day or a month: no short wait will lift it.
pub(super) fn long_window_text(lower: &Lower) -> Option<&'static str> {
    if contains_any(
        lower,
        needles!["per day", "per-day", "daily", "(rpd)", "(tpd)"],
    ) || window_seconds(lower).is_some_and(|s| s >= 86_400)
        || (!lower.ascii()
            && contains_any(
                lower,
                needles![
                    "每日",
                    "每天",
                    "当日",
                    "今日",
                    "日限额",
                    "일일",
                    "в день",
                    "в сутки",
                    "por día",
                    "täglich",
                ],
            ))
        || contains_any(lower, needles!["por dia", "par jour", "pro tag"])
    {
        Some("per_day")
    } else if preceded_by(lower, needle!("month"), &["per ", "/ ", "/"])
        || contains_any(lower, needles!["monthly", "month allocated"])
        || (!lower.ascii()
            && contains_any(
                lower,
                needles!["每月", "本月", "月度", "月間", "월간", "в месяц",],
            ))
        || contains_any(lower, needles!["mensual", "mensal", "mensuel", "monatlich"])
    {
        Some("per_month")
    } else if preceded_by(lower, needle!("week"), &["per ", "/ ", "/"])
        || contains_any(lower, needles!["weekly", "week allocated", "7-day"])
        || (!lower.ascii() && contains_any(lower, needles!["每周", "本周"]))
    {
        Some("per_week")
    } else if contains_any(
        lower,
        needles!["5-hour", "5 hour", "five-hour", "hour allocated"],
    ) || window_seconds(lower).is_some_and(|s| s > 3_600)
    {
        // A plan's allowance over hours (a coding plan's "5-hour" window).
        Some("per_hours")
    } else {
        None
    }
}

/// A window given as a number of seconds: SambaNova's `Violated
/// duration_s: 86400`.
fn window_seconds(lower: &str) -> Option<u64> {
    let at = needle!("duration_s:").find(lower.as_bytes())?;
    let rest = lower[at + "duration_s:".len()..].trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_words_match_each_phrase_built_on_capacity_and_nothing_else() {
        let says = |s: &str| overload_text(&Lower::new(s, None));
        for s in [
            "The engine is currently overloaded",
            "No capacity available for model",
            "Service tier capacity exceeded for this model",
            "We are over capacity",
            "model is at capacity",
            "out of capacity, try later",
            "capacity is low; capacity exceeded",
            "Experiencing high demand",
        ] {
            assert!(says(s), "{s}");
        }
        for s in [
            "You exhausted your capacity",
            "capacity",
            "capacity exceeding plans",
            "overload",
        ] {
            assert!(!says(s), "{s}");
        }
    }
}
