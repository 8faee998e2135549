//! The user rules the classification benches share.

use levee_core::classify::{Rule, Rules, Verdict};

/// Fifty rules as a user with many providers writes them: a status and a
/// code, a phrase (some in other scripts), a field at a JSON pointer, a
/// header; none matches the OpenAI 429 unless `last_matches`.
pub fn fifty_rules(last_matches: bool) -> Rules {
    let mut rules = Vec::new();
    for i in 0..50 {
        let name = format!("rule-{i}");
        let b = Rule::builder(&name, Verdict::Quota);
        let b = match i % 5 {
            0 => b.status(402).code(&format!("acme_code_{i}")),
            1 => b.phrase(&format!("account {i} frozen")).phrase("余额不足"),
            2 => b
                .status(429)
                .field_equals(&format!("/error/acme_{i}"), ["1008"]),
            3 => b
                .statuses(400, 499)
                .header_equals("x-acme-error", &format!("quota-{i}")),
            _ => b
                .code(&format!("vendor.quota.{i}"))
                .phrase("сервис перегружен"),
        };
        let b = if last_matches && i == 49 {
            Rule::builder(&name, Verdict::Throttled)
                .status(429)
                .field_equals("/error/code", ["rate_limit_exceeded"])
        } else {
            b
        };
        rules.push(b.build().unwrap());
    }
    Rules::new(rules).unwrap()
}
