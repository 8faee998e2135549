//! Running the gateway: its operations endpoints, the admin API and its
//! key, reloads that keep state and requests in flight, a graceful stop,
//! configuration errors that name the key, and keys that never leak.

mod support;

use std::time::Duration;

use support::{Gateway, Provider, Reply, check_config, post, send};

const KEY: &str = "sk-canary-CLIENT-7f3a91";
const PROVIDER_KEY: &str = "sk-canary-PROVIDER-b81c44";
const ADMIN_KEY: &str = "sk-canary-ADMIN-09d2e5";
const OPS_KEY: &str = "sk-canary-OPS-55aa10";

fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("CLIENT_KEY", KEY),
        ("P_KEY", PROVIDER_KEY),
        ("ADMIN_KEY", ADMIN_KEY),
        ("OPS_KEY", OPS_KEY),
    ]
}

fn config(url: &str, extra: &str) -> String {
    format!(
        r#"{extra}
[[target]]
name = "a"
base_url = "{url}"
api_key_env = "P_KEY"

[[route]]
model = "gpt-4o"
targets = ["a"]

[[client]]
name = "app"
key_env = "CLIENT_KEY"
"#
    )
}

const CHAT: &str = r#"{"model":"gpt-4o","messages":[]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn liveness_readiness_health_and_metrics_answer_without_a_key() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = Gateway::start(&config(&provider.url(), ""), &env());
    assert_eq!(send("GET", &gw.url("/healthz"), &[], "").await.status, 200);
    assert_eq!(send("GET", &gw.url("/readyz"), &[], "").await.status, 200);
    post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
    let health = send("GET", &gw.url("/levee/health"), &[], "").await;
    assert_eq!(health.header("cache-control"), Some("no-store"));
    let json = health.json();
    assert_eq!(json["ready"], true);
    assert_eq!(json["routes"]["gpt-4o"]["openai"]["failover"]["served"], 1);
    assert_eq!(json["clients"][0]["requests"], 1);
    let metrics = send("GET", &gw.url("/metrics"), &[], "").await.text();
    for name in [
        "levee_gateway_requests_total",
        "levee_gateway_request_duration_seconds",
        "levee_gateway_client_requests_total",
        "levee_failover_served_total",
        "levee_retry_budget_requests_total",
        "levee_bulkhead_limit",
    ] {
        assert!(metrics.contains(name), "{name} missing from\n{metrics}");
    }
    // No admin key configured: no admin routes at all.
    let res = send("GET", &gw.url("/levee/admin/events"), &[], "").await;
    assert_eq!(res.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ops_key_guards_health_and_metrics_but_never_liveness() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = Gateway::start(
        &config(&provider.url(), "ops_key_env = \"OPS_KEY\""),
        &env(),
    );
    assert_eq!(send("GET", &gw.url("/healthz"), &[], "").await.status, 200);
    assert_eq!(send("GET", &gw.url("/readyz"), &[], "").await.status, 200);
    for path in ["/metrics", "/levee/health"] {
        assert_eq!(send("GET", &gw.url(path), &[], "").await.status, 401);
        let client_key = format!("Bearer {KEY}");
        let res = send("GET", &gw.url(path), &[("authorization", &client_key)], "").await;
        assert_eq!(res.status, 401, "a client key is not the ops key");
        let auth = format!("Bearer {OPS_KEY}");
        let res = send("GET", &gw.url(path), &[("authorization", &auth)], "").await;
        assert_eq!(res.status, 200);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_page_is_served_and_its_state_asks_for_the_ops_or_the_admin_key() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = Gateway::start(
        &config(
            &provider.url(),
            "admin_key_env = \"ADMIN_KEY\"\nops_key_env = \"OPS_KEY\"",
        ),
        &env(),
    );
    // The page itself holds no state and no secret.
    let page = send("GET", &gw.url("/levee/console"), &[], "").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("Levee console"));
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("connect-src 'self'")
    );
    // The event stream's head only: the stream itself stays open.
    let url = gw.url("/levee/events");
    let events = |key: Option<&'static str>| {
        let url = url.clone();
        async move {
            let mut req = http::Request::get(url);
            if let Some(key) = key {
                req = req.header("authorization", format!("Bearer {key}"));
            }
            let req = req
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .unwrap();
            let res = support::client().request(req).await.unwrap();
            (
                res.status().as_u16(),
                res.headers().get("content-type").cloned(),
            )
        }
    };
    assert_eq!(events(None).await.0, 401);
    assert_eq!(
        events(Some(KEY)).await.0,
        401,
        "a client key is not the ops key"
    );
    for key in [OPS_KEY, ADMIN_KEY] {
        let (status, content_type) = events(Some(key)).await;
        assert_eq!(status, 200);
        assert_eq!(content_type.unwrap(), "text/event-stream");
        let auth = format!("Bearer {key}");
        let health = send(
            "GET",
            &gw.url("/levee/health"),
            &[("authorization", &auth)],
            "",
        )
        .await;
        assert_eq!(
            health.status, 200,
            "the console reads with the one key it was given"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_admin_api_opens_closes_and_unparks_behind_its_own_key() {
    let provider = Provider::always(Reply::json(200, "{}")).await;
    let gw = Gateway::start(
        &config(&provider.url(), "admin_key_env = \"ADMIN_KEY\""),
        &env(),
    );
    let open = gw.url("/levee/admin/targets/a/open");
    assert_eq!(send("POST", &open, &[], "").await.status, 401);
    let client = format!("Bearer {KEY}");
    assert_eq!(
        send("POST", &open, &[("authorization", &client)], "")
            .await
            .status,
        401,
        "a client key is not the admin key"
    );
    let admin = format!("Bearer {ADMIN_KEY}");
    let auth = [("authorization", admin.as_str())];
    assert_eq!(send("POST", &open, &auth, "").await.status, 200);

    let refused = post(&gw.url("/v1/chat/completions"), KEY, CHAT).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-levee-refusal"), Some("circuit_open"));
    assert_eq!(provider.calls(), 0);

    let close = gw.url("/levee/admin/targets/a/close");
    assert_eq!(send("POST", &close, &auth, "").await.status, 200);
    assert_eq!(
        post(&gw.url("/v1/chat/completions"), KEY, CHAT)
            .await
            .status,
        200
    );

    let unpark = send("POST", &gw.url("/levee/admin/targets/a/unpark"), &auth, "").await;
    assert_eq!(unpark.json()["was_parked"], false);
    let unknown = send("POST", &gw.url("/levee/admin/targets/zz/open"), &auth, "").await;
    assert_eq!(unknown.status, 404);

    let events = send("GET", &gw.url("/levee/admin/events"), &auth, "")
        .await
        .json();
    let kinds: Vec<(String, String)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["to"].as_str().unwrap().into(),
                e["origin"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("open".into(), "manual".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("closed".into(), "manual".into())),
        "{kinds:?}"
    );
    let targets = send("GET", &gw.url("/levee/admin/targets"), &auth, "")
        .await
        .json();
    assert_eq!(targets["targets"][0]["name"], "a");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_key_ever_appears_in_a_log_line_or_an_answer() {
    let provider = Provider::start(|_, n| match n % 4 {
        0 => Reply::json(200, r#"{"choices":[]}"#),
        1 => Reply::json(500, r#"{"error":{"message":"boom"}}"#),
        2 => Reply::json(
            401,
            r#"{"error":{"code":"invalid_api_key","message":"bad key"}}"#,
        ),
        _ => Reply::Drop,
    })
    .await;
    let gw = Gateway::start(
        &config(
            &provider.url(),
            "admin_key_env = \"ADMIN_KEY\"\nops_key_env = \"OPS_KEY\"",
        ),
        &env(),
    );
    let mut answers = Vec::new();
    for body in [CHAT, "nope", r#"{"model":"x"}"#, CHAT, CHAT, CHAT, CHAT] {
        let res = post(&gw.url("/v1/chat/completions"), KEY, body).await;
        answers.push(format!("{:?} {}", res.headers, res.text()));
        let res = post(&gw.url("/v1/chat/completions"), "sk-wrong", body).await;
        answers.push(format!("{:?} {}", res.headers, res.text()));
    }
    for path in [
        "/levee/health",
        "/metrics",
        "/levee/admin/events",
        "/levee/admin/targets",
    ] {
        for key in [OPS_KEY, ADMIN_KEY] {
            let auth = format!("Bearer {key}");
            let res = send("GET", &gw.url(path), &[("authorization", &auth)], "").await;
            answers.push(format!("{:?} {}", res.headers, res.text()));
        }
    }
    // A reload and a refused one are logged too.
    gw.reload("this is not toml");
    assert!(
        gw.wait_for_log("reload refused", Duration::from_secs(10))
            .await
    );
    let log = gw.log();
    assert!(log.contains("levee_gateway::access"), "{log}");
    for canary in [KEY, PROVIDER_KEY, ADMIN_KEY, OPS_KEY, "canary"] {
        assert!(!log.contains(canary), "{canary} in the log:\n{log}");
        for answer in &answers {
            assert!(!answer.contains(canary), "{canary} in an answer: {answer}");
        }
    }
    // The provider got its own key, never the client's.
    for seen in provider.seen() {
        assert_eq!(
            seen.headers["authorization"],
            format!("Bearer {PROVIDER_KEY}")
        );
        assert!(!format!("{:?}", seen.headers).contains(KEY));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_keeps_requests_in_flight_and_the_state_of_unchanged_targets() {
    let provider = Provider::start(|seen, _| {
        if seen.body.windows(4).any(|w| w == b"slow") {
            Reply::Stream {
                headers: vec![("content-type", "application/json".into())],
                chunks: vec![(Duration::from_millis(800), r#"{"slow":true}"#.into())],
            }
        } else {
            Reply::json(
                429,
                r#"{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}"#,
            )
            .with_header("retry-after", "120")
        }
    })
    .await;
    let base = config(&provider.url(), "");
    let gw = Gateway::start(
        &format!("{base}\n[levee.retry]\nmax_attempts = 1\n"),
        &env(),
    );
    let url = gw.url("/v1/chat/completions");
    // Gate the target.
    assert_eq!(post(&url, KEY, CHAT).await.status, 429);
    // A slow request in flight across the reload (on a second route, so
    // that the gate does not refuse it).
    let slow_cfg = |extra: &str| {
        format!(
            "{base}\n[[target]]\nname = \"s\"\nbase_url = \"{}\"\napi_key_env = \"P_KEY\"\n\n[[route]]\nmodel = \"slow\"\ntargets = [\"s\"]\n{extra}\n[levee.retry]\nmax_attempts = 1\n",
            provider.url()
        )
    };
    gw.reload(&slow_cfg(""));
    assert!(
        gw.wait_for_log("configuration reloaded", Duration::from_secs(10))
            .await
    );
    let in_flight = tokio::spawn({
        let url = url.clone();
        async move { post(&url, KEY, r#"{"model":"slow","note":"slow"}"#).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    gw.reload(&slow_cfg(
        "\n[[route]]\nmodel = \"slow-2\"\ntargets = [\"s\"]\n",
    ));
    let res = in_flight.await.unwrap();
    assert_eq!(
        res.status,
        200,
        "the request in flight finished: {}",
        res.text()
    );
    assert_eq!(res.text(), r#"{"slow":true}"#);
    assert!(
        gw.wait_for_log("configuration reloaded", Duration::from_secs(10))
            .await
    );

    // Target `a` did not change: still gated, refused unsent.
    let calls = provider.calls();
    let refused = post(&url, KEY, CHAT).await;
    assert_eq!(refused.header("x-levee-refusal"), Some("throttled"));
    assert_eq!(provider.calls(), calls);
    // The new route serves.
    let routes = send(
        "GET",
        &gw.url("/v1/models"),
        &[("authorization", &format!("Bearer {KEY}"))],
        "",
    )
    .await
    .json();
    assert_eq!(routes["data"].as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_the_requests_in_flight_on_every_serving_thread_and_exits_0() {
    let provider = Provider::always(Reply::Stream {
        headers: vec![("content-type", "application/json".into())],
        chunks: vec![(Duration::from_millis(600), r#"{"done":true}"#.into())],
    })
    .await;
    // Three serving threads; eight connections land on them as the kernel
    // wakes their accept loops.
    let mut gw = Gateway::start(&config(&provider.url(), "[server]\nthreads = 3\n"), &env());
    let url = gw.url("/v1/chat/completions");
    let in_flight: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { post(&url, KEY, CHAT).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    gw.signal("TERM");
    for request in in_flight {
        let res = request.await.unwrap();
        assert_eq!(res.status, 200);
        assert_eq!(res.text(), r#"{"done":true}"#);
    }
    let status = tokio::task::spawn_blocking(move || {
        let status = gw.wait(Duration::from_secs(20));
        (status, gw.log())
    })
    .await
    .unwrap();
    assert_eq!(status.0.and_then(|s| s.code()), Some(0), "{}", status.1);
    assert!(status.1.contains("every request finished"), "{}", status.1);
}

#[test]
fn a_config_that_does_not_parse_or_validate_exits_2_naming_the_key_line_and_column() {
    let env = [("P_KEY", "sk-x"), ("CLIENT_KEY", "sk-y")];
    let target = "[[target]]\nname = \"a\"\nbase_url = \"https://api.openai.com\"\napi_key_env = \"P_KEY\"\n";
    let cases = [
        (
            format!("listen = \"127.0.0.1:4000\"\n{target}[[route]]\nmodel = \"m\"\ntargets = [\"a\", \"b\"]\n"),
            "`route[0].targets[1]` (line 8, column 17)",
        ),
        (
            format!("listen = \"127.0.0.1:4000\"\n{target}bogus = 1\n"),
            "`target[0].bogus` (line 6, column 1)",
        ),
        (
            format!("listen = \"127.0.0.1:4000\"\n{target}[levee.breaker]\nhalf_open_probes = 0\n"),
            "`levee.breaker.half_open_probes` (line 7, column 1): must be at least 1, got 0",
        ),
        (
            "listen = \"0.0.0.0:4000\"\n".to_owned(),
            "`listen` (line 1, column 10)",
        ),
        (
            "listen = \"127.0.0.1:4000\"\n[[target]]\nname = \"a\"\nbase_url = \"https://x\"\napi_key_env = \"NOT_SET_ANYWHERE\"\n".to_owned(),
            "`target[0].api_key_env` (line 5, column 15): the environment variable NOT_SET_ANYWHERE is not set",
        ),
        ("listen = [".to_owned(), "line 1, column"),
        (
            format!("listen = \"127.0.0.1:4000\"\n[server]\nthreads = 5000\n{target}"),
            "`server.threads`: must be at most 1024 (0 is one per core), got 5000",
        ),
    ];
    for (config, says) in cases {
        let (code, stderr) = check_config(&config, &env);
        assert_eq!(code, Some(2), "{config}\n{stderr}");
        assert!(stderr.contains(says), "{says:?} not in {stderr:?}");
    }
    let good = format!(
        "listen = \"127.0.0.1:4000\"\n{target}[[route]]\nmodel = \"m\"\ntargets = [\"a\"]\n"
    );
    assert_eq!(check_config(&good, &env).0, Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_tls_it_serves_https_over_http2_and_http11() {
    use http_body_util::{BodyExt, Full};
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let provider = Provider::always(Reply::json(200, r#"{"choices":[]}"#)).await;
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let tls = format!(
        "[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
        data.join("test-cert.pem").display(),
        data.join("test-key.pem").display()
    );
    let gw = Gateway::start(&config(&provider.url(), &tls), &env());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(data.join("test-ca.pem")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    for http2 in [true, false] {
        let tls = rustls::ClientConfig::builder()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1();
        let https = if http2 {
            https.enable_http2().build()
        } else {
            https.build()
        };
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build::<_, Full<bytes::Bytes>>(https);
        let req = http::Request::post(format!(
            "https://localhost:{}/v1/chat/completions",
            gw.addr.port()
        ))
        .header("authorization", format!("Bearer {KEY}"))
        .body(Full::new(bytes::Bytes::from_static(CHAT.as_bytes())))
        .unwrap();
        let res = client.request(req).await.unwrap();
        let version = res.version();
        assert_eq!(res.status(), 200);
        assert_eq!(
            version,
            if http2 {
                http::Version::HTTP_2
            } else {
                http::Version::HTTP_11
            }
        );
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, r#"{"choices":[]}"#);
    }
    // Plain HTTP on the TLS port is not served.
    let plain = tokio::time::timeout(
        Duration::from_secs(5),
        support::client().get(gw.url("/healthz").parse().unwrap()),
    )
    .await
    .unwrap();
    assert!(plain.is_err() || plain.unwrap().status() != 200);
}
