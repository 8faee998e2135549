//! `--through ADAPTER`: the scenario's load through a real gateway process.
//!
//! The drill's own stacks run in its process; a gateway users run
//! (levee-gateway, LiteLLM's proxy) is a process of its own, with its own
//! timers, retries and cooldowns. With `--live --through ADAPTER` the drill
//! serves the scenario's targets on loopback as `--live` does (each target at
//! `http://127.0.0.1:PORT/t/{i}/v1`, answering in its dialect, faults
//! included), has the adapter start the gateway in front of them with a
//! configuration written from the scenario (every target, in order, as one
//! model's fallbacks), and sends the load through it as a client of the
//! official SDKs would: an OpenAI chat request, retried twice on a 408, 409,
//! 429, 5xx or a transport error after `retry-after-ms`/`Retry-After` (up
//! to 60 s) or the SDKs' backoff, not retried after `x-should-retry: false`.
//! A scenario with a `[fleet]` runs one gateway per replica, sharing a
//! `redis-server` of the run's own, the load spread round robin.
//!
//! # Adapters
//!
//! An adapter is an executable with two verbs (the built-in ones are in
//! `crates/levee-drill/adapters/`; a path names any other):
//!
//! - `ADAPTER check`: one line on standard output naming what runs; a
//!   non-zero exit and a reason on standard error when it cannot (not
//!   installed, say).
//! - `ADAPTER serve SPEC PORT DIR`: run the gateway in the foreground on
//!   `127.0.0.1:PORT`, as `SPEC` (a JSON file, [`Spec`]) says, writing what it
//!   needs into `DIR`. It is stopped with `SIGTERM` to its process group.
//!
//! The client's key is in the environment variable the spec names, as is
//! the targets' (the fake providers accept any).
//!
//! # What the report can and cannot say
//!
//! Requests, the served share, latencies, upstream calls (counted by the
//! fake providers) and recovery (from which target served each answer: the
//! providers stamp theirs with `x-drill-target`, which a gateway passes
//! through; LiteLLM names the deployment in `x-litellm-model-id`) are
//! measured as for every stack. A gateway's breaker and gate transitions are its own, so
//! `detect` is `-`. A refusal is read from the answer: Levee's
//! `x-levee-refusal`, LiteLLM's "No deployments available" (`no_target`),
//! otherwise as the provider's answer would be.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use levee_core::classify::{StreamScanner, Verdict};
use serde::Serialize;
use tower_levee::BoxError;

use crate::outcome::{Fail, response_failure};
use crate::scenario::Scenario;
use crate::sdk::{Try, hint, with_retries};

/// The key the drill's client presents to the gateway under test.
pub const CLIENT_KEY: &str = "sk-drill-client";
/// The environment variable that holds it.
pub const CLIENT_KEY_ENV: &str = "DRILL_CLIENT_KEY";
/// The environment variable that holds the targets' key.
pub const TARGET_KEY_ENV: &str = "DRILL_TARGET_KEY";

/// The header the fake providers stamp their answers with.
pub const TARGET_HEADER: &str = "x-drill-target";

/// The adapters that come with the drill.
fn builtin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters")
}

/// A gateway adapter: see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Adapter {
    /// Its name: the stack's name in the report.
    pub name: String,
    path: PathBuf,
}

impl Adapter {
    /// A built-in adapter by name (`levee-gateway`, `litellm`), or the
    /// executable at a path.
    pub fn resolve(arg: &str) -> Result<Adapter, String> {
        let path = if arg.contains('/') {
            PathBuf::from(arg)
        } else {
            builtin().join(format!("{arg}.sh"))
        };
        if !path.is_file() {
            let mut known: Vec<String> = std::fs::read_dir(builtin())
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_suffix(".sh")
                        .map(str::to_owned)
                })
                .collect();
            known.sort();
            return Err(format!(
                "no adapter {arg:?} (built in: {}; or a path to one)",
                known.join(", ")
            ));
        }
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(arg)
            .to_owned();
        Ok(Adapter { name, path })
    }

    /// What it runs, or why it cannot (`ADAPTER check`).
    pub fn check(&self) -> Result<String, String> {
        let out = Command::new(&self.path)
            .arg("check")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        if out.status.success() {
            let stdout = String::from_utf8_lossy(&out.stdout);
            Ok(stdout.lines().last().unwrap_or_default().to_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(stderr.lines().last().unwrap_or("check failed").to_owned())
        }
    }
}

// === the spec ===

/// What an adapter is asked to run, as `SPEC` (JSON).
#[derive(Clone, Debug, Serialize)]
pub struct Spec {
    /// The model the client names; every target serves it.
    pub model: String,
    /// The variable holding the key the client presents.
    pub client_key_env: &'static str,
    /// The targets, in failover order.
    pub targets: Vec<SpecTarget>,
    /// The scenario's `[levee]`, as TOML (the library's schema), with the
    /// drill's defaults where the scenario is silent: for a Levee gateway.
    pub levee_toml: String,
    /// The scenario's `[[rule]]` tables, as TOML: for a Levee gateway.
    pub rules_toml: String,
    /// The fleet's store, when the scenario runs replicas that share one.
    pub redis_url: Option<String>,
    /// The client's deadline per request, in milliseconds.
    pub timeout_ms: u64,
}

/// One target of a [`Spec`].
#[derive(Clone, Debug, Serialize)]
pub struct SpecTarget {
    /// Its name (the scenario's).
    pub name: String,
    /// The base URL of its OpenAI-compatible API (ending `/v1`).
    pub base_url: String,
    /// The variable holding its key.
    pub api_key_env: &'static str,
    /// The dialect its errors and headers are in (its API is OpenAI's).
    pub dialect: String,
    /// Its account (billing scope).
    pub account: String,
}

impl Spec {
    /// The spec of `sc` (already scaled) over providers at `provider`.
    pub fn new(sc: &Scenario, provider: std::net::SocketAddr, redis_url: Option<String>) -> Self {
        let mut levee = sc.levee.clone();
        levee.retry = sc.retry_config();
        let levee_toml = crate::tune::levee_block(&levee).unwrap_or_default();
        Spec {
            model: sc.load.model.clone(),
            client_key_env: CLIENT_KEY_ENV,
            targets: sc
                .targets
                .iter()
                .enumerate()
                .map(|(i, t)| SpecTarget {
                    name: t.name.clone(),
                    base_url: format!("http://{provider}/t/{i}/v1"),
                    api_key_env: TARGET_KEY_ENV,
                    dialect: t.dialect.clone(),
                    account: t.account.clone(),
                })
                .collect(),
            levee_toml,
            rules_toml: sc.rules_toml.clone(),
            redis_url,
            timeout_ms: u64::try_from(sc.load.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

// === the gateway process ===

/// A gateway an adapter started, stopped when dropped.
#[derive(Debug)]
pub struct GatewayProcess {
    child: Child,
    /// Where it listens: `http://127.0.0.1:PORT`.
    pub url: String,
    dir: PathBuf,
}

impl GatewayProcess {
    /// Starts `adapter` as `spec` says, and waits (up to two minutes) for
    /// its port to take connections.
    pub async fn start(adapter: &Adapter, spec: &Spec, replica: usize) -> Result<Self, BoxError> {
        let dir = std::env::temp_dir().join(format!(
            "levee-drill-through-{}-{}-{replica}-{:x}",
            adapter.name,
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir)?;
        let spec_path = dir.join("spec.json");
        std::fs::write(&spec_path, serde_json::to_vec_pretty(spec)?)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut command = Command::new(&adapter.path);
        command
            .arg("serve")
            .arg(&spec_path)
            .arg(port.to_string())
            .arg(&dir)
            .env(CLIENT_KEY_ENV, CLIENT_KEY)
            .env(TARGET_KEY_ENV, "sk-drill-target")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("gateway.log"))?);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .spawn()
            .map_err(|e| format!("{}: {e}", adapter.path.display()))?;
        let mut process = GatewayProcess {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(process);
            }
            if let Some(status) = process.child.try_wait()? {
                return Err(format!(
                    "{} exited ({status}) before listening:\n{}",
                    adapter.name,
                    process.log_tail()
                )
                .into());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "{} did not listen within 120 s:\n{}",
                    adapter.name,
                    process.log_tail()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last lines the gateway wrote on its standard error.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.join("gateway.log")) {
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-TERM", "--", &group])
            .stderr(Stdio::null())
            .status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// === the client ===

/// The drill's client of a gateway: an OpenAI chat request with the SDKs'
/// retries (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct ThroughClient {
    client: Client<HttpConnector, Full<Bytes>>,
    url: String,
    body: Bytes,
    key: HeaderValue,
    /// The targets' names, in order.
    targets: Vec<String>,
}

impl ThroughClient {
    /// A client of the gateway at `url` for `sc`'s load.
    pub fn new(sc: &Scenario, url: &str) -> Self {
        let body = serde_json::json!({
            "model": sc.load.model,
            "messages": [{"role": "user", "content": "drill"}],
            "stream": sc.load.stream,
        });
        ThroughClient {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build_http(),
            url: format!("{url}/v1/chat/completions"),
            body: Bytes::from(body.to_string()),
            key: HeaderValue::from_str(&format!("Bearer {CLIENT_KEY}")).expect("a header value"),
            targets: sc.targets.iter().map(|t| t.name.clone()).collect(),
        }
    }

    /// One request, with the SDKs' two retries: the target that served it,
    /// or why it failed.
    pub async fn call(&self, rng: &std::cell::RefCell<fastrand::Rng>) -> Result<usize, Fail> {
        with_retries(rng, || self.attempt()).await
    }

    async fn attempt(&self) -> Try<usize> {
        let request = Request::post(&self.url)
            .header(AUTHORIZATION, self.key.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(self.body.clone()))
            .expect("a valid request");
        let response = match self.client.request(request).await {
            Ok(response) => response,
            Err(_) => {
                return Try::Retry {
                    hint: None,
                    fail: Fail::Upstream,
                };
            }
        };
        let status = response.status().as_u16();
        let served = self.served_by(&response);
        let hint = hint(response.headers());
        let should_retry = match response.headers().get("x-should-retry") {
            Some(v) if v == "true" => Some(true),
            Some(v) if v == "false" => Some(false),
            _ => None,
        };
        let refusal = refusal(&response);
        let scanner = StreamScanner::for_response(response.status(), response.headers());
        let (parts, body) = response.into_parts();
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            // A stream cut after its head: the SDKs do not retry it.
            Err(_) => return Try::Done(Err(Fail::Upstream)),
        };
        if (200..300).contains(&status) {
            let clean = match scanner {
                Some(mut sc) => {
                    sc.feed(&bytes);
                    sc.finish().verdict == Verdict::Success
                }
                None => true,
            };
            return Try::Done(if clean {
                Ok(served.unwrap_or(0))
            } else {
                Err(Fail::Upstream)
            });
        }
        let fail = refusal.unwrap_or_else(|| {
            if String::from_utf8_lossy(&bytes).contains("No deployments available") {
                Fail::NoTarget
            } else {
                response_failure(&Response::from_parts(parts, ()), &bytes)
            }
        });
        let retryable = should_retry.unwrap_or(matches!(status, 408 | 409 | 429) || status >= 500);
        if retryable {
            Try::Retry { hint, fail }
        } else {
            Try::Done(Err(fail))
        }
    }

    /// The target that answered: the provider's stamp where the gateway
    /// passes it through, else the deployment LiteLLM names (its
    /// `x-litellm-model-id`, which the adapter sets to the target's name).
    fn served_by<B>(&self, response: &Response<B>) -> Option<usize> {
        let headers = response.headers();
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        header(TARGET_HEADER)
            .or_else(|| header("llm_provider-x-drill-target"))
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|i| *i < self.targets.len())
            .or_else(|| {
                let name = header("x-litellm-model-id")?;
                self.targets.iter().position(|t| t == name)
            })
    }
}

/// A Levee gateway's own refusal, by its `x-levee-refusal`.
fn refusal<B>(response: &Response<B>) -> Option<Fail> {
    let kind = response.headers().get("x-levee-refusal")?.to_str().ok()?;
    Some(match kind {
        "throttled" | "client_limit" => Fail::Throttled,
        "parked" => Fail::Parked,
        "circuit_open" => Fail::CircuitOpen,
        "bulkhead_full" => Fail::BulkheadFull,
        _ => Fail::NoTarget,
    })
}
