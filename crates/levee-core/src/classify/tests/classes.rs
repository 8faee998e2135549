//! The classes of answers the first rules misread: the period named beats
//! the code, waits in words and fields of their own, money and credentials
//! on any status, errors inside a `200`, messages not in English. The real
//! answers behind each are in `tests/data/researched-classes.json`; these
//! pin the rules and their edges.

use super::*;

fn verdict(status: u16, body: &str) -> Verdict {
    classify(status, &[], body).verdict
}

#[test]
fn a_caps_code_on_a_per_minute_limit_is_a_throttle_and_on_a_daily_one_a_quota() {
    let minute = r#"{"error":{"message":"You have been rate limited. Your rate limit is 60 queries per minute.","code":"credit_limit"}}"#;
    assert_eq!(verdict(429, minute), Verdict::Throttled);
    let tpm = r#"{"message":"Tokens per minute limit exceeded - too many tokens processed.","code":"token_quota_exceeded"}"#;
    assert_eq!(verdict(429, tpm), Verdict::Throttled);
    // "Quota exceeded" per minute under a 403 is still a throttle, not the key.
    let forbidden = r#"{"error":{"message":"Quota exceeded: 100 requests per minute"}}"#;
    assert_eq!(verdict(403, forbidden), Verdict::Throttled);
    let week = r#"{"error":{"code":"throttling","message":"week allocated quota exceeded."}}"#;
    assert_eq!(verdict(429, week), Verdict::Quota);
    let seconds = r#"{"error":{"message":"Request would exceed rate limit\nViolated duration_s: 86400, current usage: 196279, limit: 200000","type":"rate_limit_exceeded"}}"#;
    assert_eq!(verdict(429, seconds), Verdict::Quota);
}

#[test]
fn a_request_larger_than_the_whole_window_is_refused_as_a_request_with_no_wait() {
    let too_big = r#"{"error":{"message":"Rate limit reached on tokens per minute (TPM): Limit 7000, Used 0, Requested ~12,903. Please try again in 50.5s.","code":"rate_limit_exceeded"}}"#;
    let c = classify(429, &[], too_big);
    assert_eq!((c.verdict, c.wait), (Verdict::Request, None));
    let fits = r#"{"error":{"message":"Limit 10000, Used 8554, Requested 3082. Please try again in 9.8s.","code":"rate_limit_exceeded"}}"#;
    assert_eq!(verdict(429, fits), Verdict::Throttled);
    let none_allowed =
        r#"{"error":{"message":"Limit 0, Used 0, Requested 1.","code":"rate_limit_exceeded"}}"#;
    assert_eq!(verdict(429, none_allowed), Verdict::Throttled);
}

#[test]
fn waits_come_from_fields_of_their_own_and_hedged_words() {
    let loading = r#"{"error":"Model x is currently loading","estimated_time":20.5}"#;
    let c = classify(503, &[], loading);
    assert_eq!((c.verdict, c.wait), (Verdict::Availability, ms(20_500)));
    let retry = r#"{"error":{"message":"Rate limit exceeded","code":"rate_limit_exceeded","retry_after":30}}"#;
    assert_eq!(classify(429, &[], retry).wait, ms(30_000));
    let hedged = r#"{"detail":"Request was throttled. Your rate limit resets in ~5s."}"#;
    assert_eq!(classify(429, &[], hedged).wait, ms(5_000));
    // A time with no zone is not guessed; one with an offset is read.
    let zoneless =
        r#"{"error":{"message":"limit reached, reset at 2026-08-24 05:38:28","code":"1308"}}"#;
    assert_eq!(
        classify(429, &[("date", "Sun, 23 Aug 2026 12:00:00 GMT")], zoneless).wait,
        None
    );
    let offset = r#"{"error":{"message":"monthly quota exceeded. It will reset at 2026-08-24 20:00:00 +0800 CST."}}"#;
    let c = classify(429, &[("date", "Sun, 23 Aug 2026 12:00:00 GMT")], offset);
    assert_eq!((c.verdict, c.wait), (Verdict::Quota, ms(24 * 3_600_000)));
}

#[test]
fn money_and_credentials_are_read_in_the_words_whatever_the_status() {
    let overdue = r#"{"error":{"code":"AccountOverdueError","message":"your account has an overdue balance","type":"Forbidden"}}"#;
    assert_eq!(verdict(403, overdue), Verdict::Quota);
    let arrears = r#"{"error":{"code":"Arrearage","message":"Access denied, please make sure your account is in good standing."}}"#;
    assert_eq!(verdict(400, arrears), Verdict::Quota);
    assert_eq!(
        verdict(400, r#"{"message":"Saldo insuficiente"}"#),
        Verdict::Quota
    );
    assert_eq!(
        verdict(
            429,
            r#"{"error":{"code":"1113","message":"余额不足或无可用资源包,请充值。"}}"#
        ),
        Verdict::Quota
    );
    let token = r#"{"error":"Authorization header is correct, but the token seems invalid"}"#;
    assert_eq!(verdict(400, token), Verdict::Credential);
    // A request's own tokens are not a credential.
    let prompt = r#"{"error":{"message":"The prompt contains invalid tokens","type":"invalid_request_error"}}"#;
    assert_eq!(verdict(400, prompt), Verdict::Request);
}

#[test]
fn load_shedding_and_rate_limits_in_other_languages() {
    assert_eq!(
        verdict(
            429,
            r#"{"error":{"code":"1305","message":"该模型当前访问量过大，请您稍后再试"}}"#
        ),
        Verdict::Availability
    );
    assert_eq!(
        verdict(503, r#"{"message":"СЕРВИС ПЕРЕГРУЖЕН"}"#),
        Verdict::Availability
    );
    // "Busy" alone under a 429 is the caller's rate, not the service.
    assert_eq!(
        verdict(429, r#"{"message":"请求繁忙"}"#),
        Verdict::Throttled
    );
}

#[test]
fn an_error_inside_a_200_is_read_by_its_words_but_a_minute_to_wait_is_not_a_rate() {
    let c = ProviderClassifier::builder().peek_success(true).build();
    let classify = |body: &str| classify_with(&c, 200, &[], body.as_bytes()).verdict;
    assert_eq!(
        classify(r#"{"error_code":18,"error_msg":"Open api qps request limit reached"}"#),
        Verdict::Throttled
    );
    assert_eq!(
        classify(r#"{"error_code":17,"error_msg":"Open api daily request limit reached"}"#),
        Verdict::Quota
    );
    assert_eq!(
        classify(r#"{"error_code":4,"error_msg":"Open api request limit reached"}"#),
        Verdict::Availability
    );
    assert_eq!(
        classify(r#"{"status":429,"message":"Too many requests"}"#),
        Verdict::Throttled
    );
    assert_eq!(
        classify(r#"{"error":{"message":"Something broke, please try again in a minute"}}"#),
        Verdict::Availability
    );
    assert_eq!(
        classify(r#"{"error":{"message":"The request took too long"}}"#),
        Verdict::Availability
    );
    // A body that does not parse (cut, or the model's own text) is never an error.
    assert_eq!(
        classify(r#"{"choices":[{"message":{"content":"an \"error\": rate limit"#),
        Verdict::Success
    );
}
