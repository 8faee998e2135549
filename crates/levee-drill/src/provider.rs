//! The simulated LLM provider: a tower service answering as each target's
//! dialect would, with per-account rate limits, spend caps and the
//! scenario's faults on their timeline. Latency is `tokio::time::sleep`, so
//! under a paused clock an hour passes in seconds.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use levee_core::classify::{StreamScanner, Verdict};
use tokio::time::Instant;
use tower::Service;
use tower_levee::BoxError;

use crate::dialect::{self, SimBody};
use crate::scenario::{Fault, Scenario};

/// Which target a request is for: set by the stack on every attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetIndex(pub usize);

/// Upstream call counts, read after a run.
#[derive(Clone, Debug, Default)]
pub struct CallStats {
    /// Calls that reached the provider, per target name.
    pub by_target: BTreeMap<String, u64>,
    /// Calls the provider did not answer with a success (error status,
    /// transport error, hang, mid-stream error): wasted calls.
    pub rejected: u64,
    /// Calls answered with a throttle (a 429 with its wait: a throttle
    /// fault, or a rate or token limit reached).
    pub throttled: u64,
    /// Calls answered that the account's spend cap is exhausted.
    pub capped: u64,
    /// When each target's account first answered that its spend cap was
    /// exhausted (from the start).
    pub cap_reached: BTreeMap<String, Duration>,
    /// Calls that were hedges (a failover's copy of a late first call).
    pub hedged: u64,
    /// Calls that were shadow or active probes (no caller waits on them).
    pub probes: u64,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Takes `cost` from a bucket of `cap` refilling at `rate` a second, as
    /// of `now`: what is left to report, or how long until `cost` is there
    /// (rounded up to the millisecond: a hint never ends before the tokens
    /// exist).
    fn take(
        &mut self,
        now: Instant,
        cost: f64,
        rate: f64,
        cap: f64,
    ) -> Result<dialect::RequestLimit, Duration> {
        self.tokens = (self.tokens + (now - self.at).as_secs_f64() * rate).min(cap);
        self.at = now;
        if self.tokens >= cost {
            self.tokens -= cost;
            Ok(dialect::RequestLimit {
                limit: cap.floor() as u64,
                remaining: self.tokens.floor() as u64,
                reset: Duration::from_secs_f64((cap - self.tokens) / rate),
            })
        } else {
            Err(Duration::from_millis(
                ((cost - self.tokens) / rate * 1000.0).ceil() as u64,
            ))
        }
    }
}

struct State {
    buckets: HashMap<(String, String), Bucket>,
    /// The request window the headers report, per account × model.
    window_buckets: HashMap<(String, String), Bucket>,
    token_buckets: HashMap<(String, String), Bucket>,
    spent: HashMap<String, u64>,
    stats: CallStats,
    rng: fastrand::Rng,
}

/// The simulated provider shared by every target of one run.
#[derive(Clone)]
pub struct Provider {
    scenario: Arc<Scenario>,
    start: Instant,
    state: Arc<Mutex<State>>,
    remote: Option<crate::live::Remote>,
    /// Whether every target speaks OpenAI's API (see [`Provider::openai_api`]).
    openai_api: bool,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("scenario", &self.scenario.name)
            .finish()
    }
}

/// A connection refused by the (simulated) network.
fn connect_error() -> BoxError {
    Box::new(io::Error::new(
        io::ErrorKind::ConnectionRefused,
        "connection refused",
    ))
}

/// The outcome the provider decided for one call, before its latency.
enum Answer {
    Respond(Response<SimBody>, Duration),
    Fail(BoxError, Duration),
    Hang,
}

impl Provider {
    /// A provider for `scenario`, its timeline starting now.
    pub fn new(scenario: Arc<Scenario>) -> Self {
        let seed = scenario.seed ^ 0x005e_ed0f_d711;
        Provider {
            scenario,
            start: Instant::now(),
            state: Arc::new(Mutex::new(State {
                buckets: HashMap::new(),
                window_buckets: HashMap::new(),
                token_buckets: HashMap::new(),
                spent: HashMap::new(),
                stats: CallStats::default(),
                rng: fastrand::Rng::with_seed(seed),
            })),
            remote: None,
            openai_api: false,
        }
    }

    /// The same provider, every target answering in OpenAI's API: its
    /// successes, streams and errors inside a stream in OpenAI's shape; its
    /// refusals (status, body, headers) still its dialect's. What a gateway
    /// under `--through` calls: each target as an OpenAI-compatible
    /// endpoint, as Anthropic, Google and AWS offer, and the errors Levee
    /// classifies still each provider's own.
    pub fn openai_api(self) -> Provider {
        Provider {
            openai_api: true,
            ..self
        }
    }

    /// The same provider reached over HTTP through `remote` (live mode):
    /// its targets send real requests to the loopback server.
    pub fn over(&self, remote: crate::live::Remote) -> Provider {
        Provider {
            remote: Some(remote),
            ..self.clone()
        }
    }

    /// The call counts so far.
    pub fn stats(&self) -> CallStats {
        self.state.lock().expect("provider state").stats.clone()
    }

    fn active<'a>(&'a self, target: &'a str, t: Duration) -> impl Iterator<Item = &'a Fault> + 'a {
        self.scenario
            .faults
            .iter()
            .filter(move |f| f.active(target, t))
    }

    fn decide(&self, idx: usize) -> Answer {
        let sc = &*self.scenario;
        let target = &sc.targets[idx];
        let d = target.dialect.as_str();
        // The shape of a success (and of an error inside one).
        let api = if self.openai_api { "openai" } else { d };
        let model = sc.load.model.as_str();
        let now = Instant::now();
        let t = now - self.start;
        let mut st = self.state.lock().expect("provider state");
        *st.stats.by_target.entry(target.name.clone()).or_default() += 1;
        let jitter = 0.8 + 0.4 * st.rng.f64();
        let mut latency = target.latency.mul_f64(jitter);
        let quick = Duration::from_millis(30);
        let mut midstream = false;
        let mut first_token: Option<Duration> = None;
        let mut answer = None;
        // Which kind of refusal the answer is, for the counts.
        let (mut throttled, mut capped) = (false, false);
        for f in self.active(&target.name, t) {
            answer = match f.kind.as_str() {
                "outage" => Some(Answer::Respond(
                    dialect::server_error(d, false, f.status),
                    Duration::from_millis(50),
                )),
                "overload" | "flap" => Some(Answer::Respond(
                    dialect::server_error(d, true, f.status),
                    Duration::from_millis(50),
                )),
                "hang" => Some(Answer::Hang),
                "connect_error" => Some(Answer::Fail(connect_error(), Duration::from_millis(5))),
                "revoke_key" => Some(Answer::Respond(dialect::revoked(d), quick)),
                "answer" => Some(Answer::Respond(
                    dialect::scripted(f.status.unwrap_or(500), f.body.as_deref().unwrap_or("")),
                    quick,
                )),
                "spend_cap" => {
                    capped = true;
                    Some(Answer::Respond(dialect::spend_cap(d), quick))
                }
                "throttle" => {
                    throttled = true;
                    let wait = (f.to - t).min(Duration::from_secs(20));
                    Some(Answer::Respond(
                        dialect::throttle(d, model, wait, target.rpm),
                        quick,
                    ))
                }
                "brownout" => {
                    latency = latency.mul_f64(f.factor);
                    None
                }
                "midstream_error" => {
                    midstream = true;
                    None
                }
                "slow_first_token" => {
                    first_token = Some(f.delay);
                    None
                }
                _ => None,
            };
            if answer.is_some() {
                break;
            }
        }
        if answer.is_none()
            && target.spend_cap > 0
            && st.spent.get(&target.account).copied().unwrap_or(0) >= target.spend_cap
        {
            st.stats.cap_reached.entry(target.name.clone()).or_insert(t);
            capped = true;
            answer = Some(Answer::Respond(dialect::spend_cap(d), quick));
        }
        // What the limits report on this call's answer.
        let mut reported = dialect::Limits::default();
        // The request limit, enforced per second as OpenAI and Anthropic
        // document it may be ("60,000 RPM may be enforced as 1,000 requests
        // per second"), and reported over the window the dialect's headers
        // count: a minute, or for Azure OpenAI, which evaluates requests
        // "over a small period of time, typically 1 or 10 seconds", ten
        // seconds (a limit of RPM/6). The headers may show room while a
        // burst is refused.
        if answer.is_none() && target.rpm > 0 {
            let rate = f64::from(target.rpm) / 60.0;
            let cap = rate.max(1.0);
            let key = (target.account.clone(), model.to_owned());
            let b = st.buckets.entry(key.clone()).or_insert(Bucket {
                tokens: cap,
                at: now,
            });
            let taken = b.take(now, 1.0, rate, cap);
            let taken = match taken {
                Ok(_) => {
                    let window = rate * dialect::request_window(d).as_secs_f64();
                    let window = window.max(cap);
                    let w = st.window_buckets.entry(key).or_insert(Bucket {
                        tokens: window,
                        at: now,
                    });
                    // Never refuses what the second admitted: it holds at
                    // least as much and refills as fast.
                    let reported = w.take(now, 1.0, rate, window);
                    debug_assert!(reported.is_ok(), "the window outlasts the second");
                    reported.or(taken)
                }
                refused => refused,
            };
            match taken {
                Ok(left) => reported.requests = Some(left),
                Err(wait) => {
                    throttled = true;
                    answer = Some(Answer::Respond(
                        dialect::throttle(d, model, wait, target.rpm),
                        quick,
                    ));
                }
            }
        }
        // The token limit, per account × model, as OpenAI and Anthropic
        // describe theirs: a minute's allowance refilling continuously,
        // each call spending what the load says a request counts.
        let cost = sc.load.tokens;
        if answer.is_none() && target.tpm > 0 && cost > 0 {
            let rate = target.tpm as f64 / 60.0;
            let cap = (target.tpm as f64).max(cost as f64);
            let b = st
                .token_buckets
                .entry((target.account.clone(), model.to_owned()))
                .or_insert(Bucket {
                    tokens: cap,
                    at: now,
                });
            match b.take(now, cost as f64, rate, cap) {
                Ok(left) => reported.tokens = Some(left),
                Err(wait) => {
                    throttled = true;
                    answer = Some(Answer::Respond(
                        dialect::throttle_tokens(d, model, wait, target.tpm),
                        quick,
                    ));
                }
            }
        }
        let answer = answer.unwrap_or_else(|| {
            *st.spent.entry(target.account.clone()).or_default() += 1;
            let limits = |r: Response<SimBody>| {
                dialect::with_rate_limits(r, d, reported, dialect::wall_clock(t))
            };
            if midstream {
                if sc.load.stream {
                    Answer::Respond(limits(dialect::midstream_error(api, model)), latency / 2)
                } else {
                    Answer::Fail(
                        Box::new(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "connection closed before the body ended",
                        )),
                        latency / 2,
                    )
                }
            } else if let Some(delay) = first_token {
                if sc.load.stream {
                    // The head at once, the first token `delay` later.
                    Answer::Respond(
                        limits(dialect::success_slow_first_token(api, model, delay)),
                        quick,
                    )
                } else {
                    Answer::Respond(limits(dialect::success(api, model, false)), delay)
                }
            } else {
                Answer::Respond(
                    limits(dialect::success(api, model, sc.load.stream)),
                    latency,
                )
            }
        });
        let wasted = match &answer {
            Answer::Respond(r, _) => !r.status().is_success() || midstream,
            _ => true,
        };
        if wasted {
            st.stats.rejected += 1;
        }
        st.stats.throttled += u64::from(throttled);
        st.stats.capped += u64::from(capped);
        answer
    }

    /// The service answering for target `idx`.
    pub fn target(&self, idx: usize) -> TargetService {
        TargetService {
            provider: self.clone(),
            idx,
        }
    }
}

/// The boxed future of the simulated services.
pub type SimFuture = Pin<Box<dyn Future<Output = Result<Response<SimBody>, BoxError>> + Send>>;

/// One target of the simulated provider, as a tower service.
#[derive(Clone, Debug)]
pub struct TargetService {
    provider: Provider,
    idx: usize,
}

impl<B> Service<Request<B>> for TargetService {
    type Response = Response<SimBody>;
    type Error = BoxError;
    type Future = SimFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> SimFuture {
        let extensions = req.extensions();
        let hedge = extensions
            .get::<tower_levee::failover::HedgeCopy>()
            .is_some();
        let probe = extensions
            .get::<tower_levee::breaker::ShadowProbe>()
            .is_some();
        if hedge || probe {
            let stats = &mut self.provider.state.lock().expect("provider state").stats;
            stats.hedged += u64::from(hedge);
            stats.probes += u64::from(probe);
        }
        if let Some(remote) = &self.provider.remote {
            return remote.send(self.idx);
        }
        let answer = self.provider.decide(self.idx);
        Box::pin(async move {
            match answer {
                Answer::Respond(r, after) => {
                    tokio::time::sleep(after).await;
                    Ok(r)
                }
                Answer::Fail(e, after) => {
                    tokio::time::sleep(after).await;
                    Err(e)
                }
                Answer::Hang => std::future::pending().await,
            }
        })
    }
}

/// A stream that failed after its `200` (an in-band error event or a cut).
/// Its source is an `UnexpectedEof` I/O error, which Levee reads as a reset.
#[derive(Debug)]
pub struct MidStreamError {
    reason: String,
    source: io::Error,
}

impl std::fmt::Display for MidStreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream failed mid-way: {}", self.reason)
    }
}

impl std::error::Error for MidStreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Reads a streamed body to its end with a [`StreamScanner`], as a client
/// consuming the stream would, and turns an in-band error into a
/// [`MidStreamError`]: the client of the `unprotected` and `naive` stacks.
/// (The `levee` stack reads streams through the breaker's own stream watch.)
#[derive(Clone, Debug)]
pub struct StreamCheck<S>(pub S);

impl<S, B> Service<Request<B>> for StreamCheck<S>
where
    S: Service<Request<B>, Response = Response<SimBody>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<SimBody>;
    type Error = BoxError;
    type Future = SimFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> SimFuture {
        let fut = self.0.call(req);
        Box::pin(async move {
            let res = fut.await?;
            let Some(mut scanner) = StreamScanner::for_response(res.status(), res.headers()) else {
                return Ok(res);
            };
            let (parts, body) = res.into_parts();
            let bytes: Bytes = body
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            scanner.feed(&bytes);
            let verdict = scanner.finish();
            if verdict.verdict != Verdict::Success {
                let e: BoxError = Box::new(MidStreamError {
                    reason: verdict.reason.as_str().to_owned(),
                    source: io::Error::new(io::ErrorKind::UnexpectedEof, "stream error"),
                });
                return Err(e);
            }
            Ok(Response::from_parts(parts, SimBody::full(bytes)))
        })
    }
}
