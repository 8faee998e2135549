//! The console in a real browser: Debian's Chromium, headless, driven by
//! playwright-core over the gateway and fake providers
//! (`tests/console/console.mjs`): the page loads with no console error and
//! no request leaving loopback; a provider's 429 shows its target gated,
//! the countdown falls and the gate clears; a spend cap shows parked, and
//! the unpark button (with the admin key only) returns it; without the key
//! there are no buttons and the admin routes answer 401; axe-core finds no
//! serious accessibility violation. It saves a screenshot.
//!
//! Chromium comes from apt (`.ci/run` installs it) and the npm modules
//! from `tests/console/setup.sh` (CI runs it). Without them the test says
//! so and passes, unless `CI` is set: then it fails.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{Gateway, Provider, Reply};

const CLIENT_KEY: &str = "sk-client-console";
const ADMIN_KEY: &str = "sk-admin-console";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The modules and the browser, when they are installed.
fn browser() -> Option<(PathBuf, &'static str)> {
    let modules = root().join("target/console-browser/node_modules");
    let chromium = "/usr/bin/chromium";
    (modules.join("playwright-core").exists() && Path::new(chromium).exists())
        .then_some((modules, chromium))
}

fn completion() -> Reply {
    Reply::json(
        200,
        r#"{"id":"c1","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_a_gate_a_park_and_the_unpark_in_a_real_browser() {
    let Some((modules, chromium)) = browser() else {
        let how =
            "apt-get install -y chromium, then run crates/levee-gateway/tests/console/setup.sh";
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs Chromium and the console's npm modules: {how}"
        );
        eprintln!("skipped: no Chromium or npm modules ({how})");
        return;
    };
    // The first call is throttled for 12 s, then the provider serves.
    let busy = Provider::start(|_, n| {
        if n == 0 {
            Reply::json(
                429,
                r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#,
            )
            .with_header("retry-after", "12")
        } else {
            completion()
        }
    })
    .await;
    // Every call finds the account's spend cap reached.
    let capped = Provider::always(Reply::json(
        429,
        r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#,
    ))
    .await;
    let config = format!(
        "admin_key_env = \"ADMIN_KEY\"\n\
         [[target]]\nname = \"busy-account\"\nbase_url = \"{}\"\napi_key_env = \"P_KEY\"\n\n\
         [[target]]\nname = \"capped-account\"\nbase_url = \"{}\"\napi_key_env = \"P_KEY\"\n\n\
         [[route]]\nmodel = \"gpt-busy\"\ntargets = [\"busy-account\"]\n[route.levee.retry]\nmax_attempts = 1\n\n\
         [[route]]\nmodel = \"gpt-capped\"\ntargets = [\"capped-account\"]\n[route.levee.retry]\nmax_attempts = 1\n\n\
         [[client]]\nname = \"console-test\"\nkey_env = \"CLIENT_KEY\"\n",
        busy.url(),
        capped.url(),
    );
    let gw = Gateway::start(
        &config,
        &[
            ("CLIENT_KEY", CLIENT_KEY),
            ("ADMIN_KEY", ADMIN_KEY),
            ("P_KEY", "sk-provider"),
        ],
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/console/console.mjs");
    let screenshot = root().join("target/console.png");
    let mut node = Command::new("node");
    node.arg(script)
        .env("MODULES", &modules)
        .env("LEVEE_CLIENT_KEY", CLIENT_KEY)
        .env("LEVEE_ADMIN_KEY", ADMIN_KEY)
        .env("CHROMIUM", chromium)
        .env("SCREENSHOT", screenshot);
    gw.run_client(node).await;
    assert!(
        !gw.log().contains(ADMIN_KEY),
        "the admin key reached the log"
    );
    // The page's clicks reached the gateway: the capped account was unparked.
    assert!(gw.log().contains("admin action"), "{}", gw.log());
}
