//! What Levee decides, as a client of the gateway sees it: a 429 gates its
//! target and the next request is refused unsent; a spend cap parks; a
//! stream that fails before content fails over unseen; a dead target fails
//! over; when nothing can serve, a 429 with the capped wait.

mod support;

use std::time::Duration;

use support::{Gateway, Provider, Reply, post};

const KEY: &str = "sk-client-resilience";

fn env() -> Vec<(&'static str, &'static str)> {
    vec![("CLIENT_KEY", KEY), ("P_KEY", "sk-provider")]
}

/// Targets `a`, `b`, ... at `urls`, one route over all, in order.
fn config(urls: &[String], levee: &str) -> String {
    let mut out = String::new();
    let names: Vec<String> = (0..urls.len())
        .map(|i| char::from(b'a' + i as u8).to_string())
        .collect();
    for (name, url) in names.iter().zip(urls) {
        out += &format!(
            "[[target]]\nname = \"{name}\"\nbase_url = \"{url}\"\napi_key_env = \"P_KEY\"\n\n"
        );
    }
    let list: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    out += &format!(
        "[[route]]\nmodel = \"gpt-4o\"\ntargets = [{}]\n\n[[client]]\nname = \"app\"\nkey_env = \"CLIENT_KEY\"\n\n{levee}\n",
        list.join(", ")
    );
    out
}

const CHAT: &str = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;
const OK: &str = r#"{"choices":[{"message":{"content":"ok"}}]}"#;

fn throttled(wait_secs: u64) -> Reply {
    Reply::json(
        429,
        r#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}"#,
    )
    .with_header("retry-after", &wait_secs.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_gates_its_target_and_the_next_request_is_refused_unsent_with_retry_after() {
    let provider = Provider::always(throttled(45)).await;
    // One attempt: the retry layer would otherwise wait the 45 s out.
    let gw = Gateway::start(
        &config(&[provider.url()], "[levee.retry]\nmax_attempts = 1\n"),
        &env(),
    );
    let url = gw.url("/v1/chat/completions");

    // The provider's own 429 passes through, untouched.
    let first = post(&url, KEY, CHAT).await;
    assert_eq!(first.status, 429);
    assert_eq!(first.header("retry-after"), Some("45"));
    assert_eq!(first.json()["error"]["code"], "rate_limit_exceeded");
    assert_eq!(first.header("x-levee-served-by"), Some("a"));
    assert!(first.header("x-levee-refusal").is_none());

    // The next is Levee's own refusal: never sent, and it says so.
    let second = post(&url, KEY, CHAT).await;
    assert_eq!(second.status, 429);
    assert_eq!(provider.calls(), 1, "refused without a call");
    assert_eq!(second.header("x-levee-refusal"), Some("throttled"));
    let wait: u64 = second.header("retry-after").unwrap().parse().unwrap();
    assert!((44..=45).contains(&wait), "{wait}");
    assert!(second.header("retry-after-ms").is_some());
    assert!(second.header("x-should-retry").is_none());
    let body = second.json();
    assert_eq!(body["error"]["type"], "levee_refusal");
    assert_eq!(body["error"]["code"], "provider_rate_limited");
    assert!(second.header("x-levee-served-by").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spend_cap_parks_its_target_and_says_retrying_will_not_help() {
    let cap = Reply::json(
        429,
        r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#,
    );
    let provider = Provider::always(cap).await;
    let gw = Gateway::start(&config(&[provider.url()], ""), &env());
    let url = gw.url("/v1/chat/completions");
    let first = post(&url, KEY, CHAT).await;
    assert_eq!(first.status, 429);
    assert_eq!(first.json()["error"]["code"], "insufficient_quota");
    assert_eq!(provider.calls(), 1, "a spend cap is not retried");

    let second = post(&url, KEY, CHAT).await;
    assert_eq!(second.status, 503);
    assert_eq!(second.header("x-levee-refusal"), Some("parked"));
    assert_eq!(second.header("x-should-retry"), Some("false"));
    assert_eq!(second.header("retry-after"), Some("300"), "capped at 300 s");
    assert_eq!(second.json()["error"]["code"], "parked");
    assert_eq!(provider.calls(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_that_fails_before_its_first_token_fails_over_unseen() {
    let broken = Provider::always(Reply::sse(
        &[
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n",
        ],
        Duration::from_millis(10),
    ))
    .await;
    let good_events = [
        "data: {\"choices\":[{\"delta\":{\"content\":\"fine\"}}]}\n\n",
        "data: [DONE]\n\n",
    ];
    let good = Provider::always(Reply::sse(&good_events, Duration::from_millis(10))).await;
    let gw = Gateway::start(&config(&[broken.url(), good.url()], ""), &env());
    let res = post(
        &gw.url("/v1/chat/completions"),
        KEY,
        r#"{"model":"gpt-4o","stream":true,"messages":[]}"#,
    )
    .await;
    assert_eq!(res.status, 200);
    assert_eq!(
        res.text(),
        good_events.concat(),
        "only the stream that served"
    );
    assert_eq!(res.header("x-levee-served-by"), Some("b"));
    assert_eq!((broken.calls(), good.calls()), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_target_that_cannot_be_reached_fails_over_and_opens_its_breaker() {
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let good = Provider::always(Reply::json(200, OK)).await;
    let gw = Gateway::start(&config(&[closed, good.url()], ""), &env());
    for _ in 0..8 {
        let res = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
        assert_eq!(res.status, 200);
        assert_eq!(res.header("x-levee-served-by"), Some("b"));
    }
    let health = support::send("GET", &gw.url("/levee/health"), &[], "").await;
    let targets = &health.json()["routes"]["gpt-4o"]["openai"]["failover"]["targets"];
    assert_eq!(targets[0]["name"], "a");
    assert_eq!(targets[0]["state"], "open", "{targets}");
    assert_eq!(good.calls(), 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn when_no_target_can_serve_the_answer_is_a_429_with_the_capped_wait() {
    // 400 s: gated (under the gate's 10-minute cap), past the 300-s cap.
    let a = Provider::always(throttled(400)).await;
    let b = Provider::always(throttled(400)).await;
    let gw = Gateway::start(&config(&[a.url(), b.url()], ""), &env());
    let url = gw.url("/v1/chat/completions");
    // Both throttle: the caller gets the last real answer.
    let first = post(&url, KEY, CHAT).await;
    assert_eq!(first.status, 429);
    assert_eq!(first.header("x-levee-served-by"), Some("b"));
    // Why Levee did not retry: the wait is past the retry layer's max_wait.
    assert_eq!(first.header("x-levee-retry-stop"), Some("deadline"));
    assert_eq!((a.calls(), b.calls()), (1, 1));
    // Then nothing can serve: Levee's 429, capped, sent nowhere.
    let second = post(&url, KEY, CHAT).await;
    assert_eq!(second.status, 429);
    assert_eq!(second.header("x-levee-refusal"), Some("throttled"));
    assert_eq!(second.header("retry-after"), Some("300"));
    assert_eq!(second.json()["error"]["code"], "provider_rate_limited");
    assert_eq!((a.calls(), b.calls()), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_over_its_requests_per_minute_is_refused_by_the_gateway_not_the_provider() {
    let provider = Provider::always(Reply::json(
        200,
        r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#,
    ))
    .await;
    let cfg = config(&[provider.url()], "").replace(
        "key_env = \"CLIENT_KEY\"\n",
        "key_env = \"CLIENT_KEY\"\nrequests_per_minute = 2\n",
    );
    let gw = Gateway::start(&cfg, &env());
    let url = gw.url("/v1/chat/completions");
    for _ in 0..2 {
        assert_eq!(post(&url, KEY, CHAT).await.status, 200);
    }
    let refused = post(&url, KEY, CHAT).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("x-levee-refusal"), Some("client_limit"));
    assert_eq!(refused.json()["error"]["code"], "client_rate_limited");
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((29..=30).contains(&wait), "{wait}");
    assert_eq!(provider.calls(), 2);

    let metrics = support::send("GET", &gw.url("/metrics"), &[], "")
        .await
        .text();
    assert!(
        metrics.contains("levee_gateway_client_tokens_total{client=\"app\"} 20"),
        "{metrics}"
    );
    assert!(metrics.contains("levee_gateway_client_refused_total{client=\"app\"} 1"));
    let health = support::send("GET", &gw.url("/levee/health"), &[], "")
        .await
        .json();
    assert_eq!(health["clients"][0]["tokens"], 20);
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_to_anthropic_callers_take_anthropics_shape() {
    let provider = Provider::always(
        Reply::json(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
        )
        .with_header("retry-after", "90"),
    )
    .await;
    let cfg = format!(
        "[[target]]\nname = \"claude\"\nbase_url = \"{}\"\napi_key_env = \"P_KEY\"\ndialect = \"anthropic\"\n\n[[route]]\nmodel = \"claude-sonnet-4-5\"\ntargets = [\"claude\"]\n\n[[client]]\nname = \"app\"\nkey_env = \"CLIENT_KEY\"\n\n[levee.retry]\nmax_attempts = 1\n",
        provider.url()
    );
    let gw = Gateway::start(&cfg, &env());
    let body = r#"{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}"#;
    let url = gw.url("/v1/messages");
    assert_eq!(post(&url, KEY, body).await.status, 429);
    let refused = post(&url, KEY, body).await;
    assert_eq!(refused.status, 429);
    let json = refused.json();
    assert_eq!(json["type"], "error");
    assert_eq!(json["error"]["type"], "levee_refusal");
    assert_eq!(provider.calls(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_users_rule_parks_an_unknown_providers_frozen_account_the_built_in_rules_read_as_an_outage()
 {
    let frozen = Reply::json(
        503,
        r#"{"error":{"message":"Account frozen: settle the outstanding invoice to resume service.","type":"server_error","code":"acct_frozen"}}"#,
    );
    let rule = "[[rule]]\nname = \"acme-frozen\"\nstatus = 503\ncode = \"acct_frozen\"\nverdict = \"quota\"\nreason = \"acme:frozen\"\n";

    // Without the rule: an outage, retried and left for the breaker.
    let provider = Provider::always(frozen.clone()).await;
    let gw = Gateway::start(
        &config(&[provider.url()], "[levee.retry]\nmax_attempts = 1\n"),
        &env(),
    );
    let first = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
    assert_eq!(first.status, 503);
    let second = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
    assert_eq!(second.header("x-levee-refusal"), None, "sent again");
    assert_eq!(provider.calls(), 2);

    // With it: a quota, so the account is parked and nothing more is sent.
    let provider = Provider::always(frozen).await;
    let mut with_admin = env();
    with_admin.push(("ADMIN_KEY", "sk-admin-resilience"));
    let gw = Gateway::start(
        &format!(
            "admin_key_env = \"ADMIN_KEY\"\n{}{rule}",
            config(&[provider.url()], "")
        ),
        &with_admin,
    );
    let first = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
    assert_eq!(first.status, 503);
    assert_eq!(
        first.json()["error"]["code"],
        "acct_frozen",
        "the provider's own answer"
    );
    assert_eq!(provider.calls(), 1, "a quota is not retried");
    let second = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
    assert_eq!(second.header("x-levee-refusal"), Some("parked"));
    assert_eq!(provider.calls(), 1);
    let health = support::send("GET", &gw.url("/levee/health"), &[], "").await;
    let text = health.text();
    assert!(text.contains("acme:frozen"), "{text}");
    // The event names the model whose call parked the account.
    let auth = [("authorization", "Bearer sk-admin-resilience")];
    let events = support::send("GET", &gw.url("/levee/admin/events"), &auth, "").await;
    let parked = events.json()["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["to"] == "parked")
        .cloned()
        .unwrap_or_else(|| panic!("{}", events.text()));
    assert_eq!(parked["model"], "gpt-4o", "{parked}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_targets_probe_finds_it_back_when_no_traffic_comes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let down = Arc::new(AtomicBool::new(true));
    let a = {
        let down = down.clone();
        Provider::start(move |_, _| {
            if down.load(Ordering::SeqCst) {
                Reply::json(503, r#"{"error":{"message":"overloaded"}}"#)
            } else {
                Reply::json(200, r#"{"object":"list","data":[]}"#)
            }
        })
        .await
    };
    let b = Provider::always(Reply::json(200, OK)).await;
    let cfg = config(&[a.url(), b.url()], "").replacen(
        "api_key_env = \"P_KEY\"\n",
        "api_key_env = \"P_KEY\"\nprobe = { path = \"/v1/models\" }\n",
        1,
    );
    let gw = Gateway::start(&cfg, &env());
    // Failures open `a`; the fallback serves every caller.
    for _ in 0..6 {
        let res = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
        assert_eq!(res.header("x-levee-served-by"), Some("b"));
    }
    let state = || async {
        let health = support::send("GET", &gw.url("/levee/health"), &[], "").await;
        health.json()["routes"]["gpt-4o"]["openai"]["failover"]["targets"][0]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(state().await, "open");
    // It recovers; no caller comes. Its probe, sent about once a second,
    // closes its breaker.
    down.store(false, Ordering::SeqCst);
    let mut closed = false;
    for _ in 0..100 {
        if state().await == "available" {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen: Vec<_> = a
        .seen()
        .iter()
        .map(|s| format!("{} {}", s.method, s.path_and_query))
        .collect();
    assert!(closed, "the probe closed the breaker; `a` saw {seen:?}");
    let probes: Vec<_> = a
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET" && s.path_and_query == "/v1/models")
        .collect();
    assert!(!probes.is_empty(), "the probe reached the target");
    // Sent through the target's rewrite: with its key.
    assert_eq!(probes[0].headers["authorization"], "Bearer sk-provider");
}

#[test]
fn a_probe_where_shadow_probes_are_off_or_malformed_is_refused_naming_the_key() {
    let listen = "listen = \"127.0.0.1:0\"\n";
    let with_probe = |probe: &str, levee: &str| {
        let cfg = config(&["http://127.0.0.1:9".into()], levee).replacen(
            "api_key_env = \"P_KEY\"\n",
            &format!("api_key_env = \"P_KEY\"\nprobe = {probe}\n"),
            1,
        );
        support::check_config(&format!("{listen}{cfg}"), &env())
    };
    let models = r#"{ path = "/v1/models" }"#;
    // Off for every route (the gateway's [levee]): that key is named.
    let (code, out) = with_probe(models, "[levee.failover]\nshadow_probes = false\n");
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("`levee.failover.shadow_probes`"), "{out}");
    assert!(out.contains("target `a` has a probe"), "{out}");
    for (probe, key) in [
        (r#"{ path = "v1/models" }"#, "target[0].probe.path"),
        (
            r#"{ path = "/v1/models", method = "FETCH" }"#,
            "target[0].probe.method",
        ),
        (
            r#"{ path = "/v1/x", method = "GET", body = "{}" }"#,
            "target[0].probe.body",
        ),
        (
            r#"{ path = "/v1/x", body = "not json" }"#,
            "target[0].probe.body",
        ),
    ] {
        let (code, out) = with_probe(probe, "");
        assert_eq!(code, Some(2), "{probe}: {out}");
        assert!(out.contains(key), "{probe}: {out}");
    }
    // A method in lower case is the method.
    let (code, out) = with_probe(r#"{ path = "/v1/models", method = "get" }"#, "");
    assert_eq!(code, Some(0), "{out}");
}
