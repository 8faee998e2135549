//! The `gateway-router` stack: the documented default policy of LiteLLM's
//! Router, the most used LLM gateway. There is no Rust crate of it: this is
//! our implementation of what its documentation and code say, for the
//! drill only.
//!
//! Followed: <https://docs.litellm.ai/docs/routing> ("Cooldowns", "How
//! Cooldowns Work", "Retries", "Deployment Ordering (Priority)"),
//! <https://docs.litellm.ai/docs/router/learn/reliability>, and for what
//! the docs leave open the source of <https://github.com/BerriAI/litellm>
//! 1.106.12 (`router.py`, `router_utils/cooldown_handlers.py`,
//! `proxy/common_request_processing.py`).
//!
//! - **Deployments**: the scenario's targets are the deployments of one
//!   model group, `order` = their position (the documented way to make
//!   one primary and backups): each attempt drops the deployments cooling
//!   down, then takes the lowest order left.
//! - **Cooldown** (`cooldown_handlers.py`), per deployment, with
//!   `allowed_fails` left at its default: at once on a 429 (when the group
//!   has more than one deployment) and on a 401, 402 or 404; on a 408 or a
//!   server error (5xx, 529, and a connection error, which is an
//!   `InternalServerError`) once more than 50% of the deployment's calls
//!   in the current minute failed, at least 5 calls (not for a single
//!   deployment). Other 4xx never cool down. It lasts the answer's
//!   `retry-after` when it has one (unbounded; 0 is none), else 5 s
//!   (`DEFAULT_COOLDOWN_TIME_SECONDS`), is not extended while it runs, and
//!   ends without a probe. Only a request's first failure is counted (the
//!   proxy keeps one logging object per request, and its failure handler
//!   runs once), and a fallback hop's last; a stream that fails after its
//!   head is not (it fails while the client reads it).
//! - **Retries** (`async_function_with_retries`): `num_retries` = 2 (the
//!   OpenAI SDK's `DEFAULT_MAX_RETRIES`), each retry picking again; at
//!   once when the group has several deployments, else after the SDK's
//!   formula. Not retried: a 404, a non-retryable status in a group of one
//!   (a 401 or 403 goes to another deployment in a group of several), a
//!   stream that failed after its 200, and anything once no deployment is
//!   healthy.
//! - **Fallbacks** by `order`: when the retries fail, each higher order in
//!   turn (at most 5) gets a retry loop of its own; not after a stream
//!   that was cut once it had started (the client has it).
//! - **No deployments available**: every deployment cooling down is a
//!   `429` with `retry-after` the shortest cooldown length running, refused
//!   unsent (`no_target`). A provider's own `retry-after` reaches the
//!   client only as `llm_provider-retry-after`.
//! - **The client**: the OpenAI SDK's two retries (on a 408, 409, 429 and
//!   5xx, after the answer's `retry-after` up to 60 s, else 0.5 s × 2ⁿ
//!   jittered), since that is how the proxy is called.
//! - **Timeouts**: none below the caller's (`request_timeout` is 6,000 s).
//!
//! Calibrated against the real proxy (1.106.12) with `levee-drill run
//! --live --through litellm` on the built-in scenarios; what it does not
//! reproduce is in the project README's gateway section.
//!
//! In a fleet each replica keeps its own cooldowns (LiteLLM shares them
//! through Redis only when one is configured).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use tokio::time::Instant;

use crate::outcome::{Fail, TransitionRecord};
use crate::provider::Provider;
use crate::sdk::{Attempt, Try, attempt, backoff, with_retries};

/// `num_retries`: LiteLLM's default, the OpenAI SDK's `DEFAULT_MAX_RETRIES`.
pub const NUM_RETRIES: u32 = 2;
/// `cooldown_time`: `DEFAULT_COOLDOWN_TIME_SECONDS`.
pub const COOLDOWN: Duration = Duration::from_secs(5);
/// The most fallback hops a request makes (`max_fallbacks`).
const MAX_FALLBACKS: usize = 5;
/// A deployment with more than this share of failed calls in the current
/// minute cools down (`DEFAULT_FAILURE_THRESHOLD_PERCENT`).
const FAILURE_THRESHOLD: f64 = 0.5;
/// ... once it made at least this many calls this minute.
const MIN_REQUESTS: u32 = 5;

#[derive(Clone, Copy, Debug, Default)]
struct Deployment {
    cooling_until: Option<Instant>,
    /// How long the cooldown running was set for.
    cooled_for: Duration,
    /// The minute (from the start) the counts below are for.
    minute: u64,
    successes: u32,
    failures: u32,
}

impl Deployment {
    /// The deployment, its counts those of `minute` (reset when it began).
    fn in_minute(&mut self, minute: u64) -> &mut Self {
        if self.minute != minute {
            (self.minute, self.successes, self.failures) = (minute, 0, 0);
        }
        self
    }
}

/// The router of one run (of one replica): its deployments' cooldowns.
#[derive(Debug)]
pub struct GatewayRouter {
    names: Vec<String>,
    deployments: RefCell<Vec<Deployment>>,
    start: Instant,
    transitions: Rc<RefCell<Vec<TransitionRecord>>>,
}

impl GatewayRouter {
    /// A router over `names`, in order, recording cooldowns into `transitions`.
    pub fn new(
        names: Vec<String>,
        start: Instant,
        transitions: Rc<RefCell<Vec<TransitionRecord>>>,
    ) -> Self {
        let deployments = RefCell::new(vec![Deployment::default(); names.len()]);
        GatewayRouter {
            names,
            deployments,
            start,
            transitions,
        }
    }

    fn log(&self, i: usize, from: &str, to: &str, reason: String) {
        self.transitions.borrow_mut().push(TransitionRecord {
            t_ms: (Instant::now() - self.start).as_millis() as u64,
            target: self.names[i].clone(),
            scope: self.names[i].clone(),
            mechanism: "breaker".into(),
            from: from.into(),
            to: to.into(),
            reason,
        });
    }

    /// Whether deployment `i` is cooling down now (an ended cooldown is
    /// cleared and logged).
    pub fn is_cooling(&self, i: usize) -> bool {
        let now = Instant::now();
        let mut deployments = self.deployments.borrow_mut();
        let Some(d) = deployments.get_mut(i) else {
            return false;
        };
        match d.cooling_until {
            Some(until) if now < until => true,
            Some(_) => {
                d.cooling_until = None;
                drop(deployments);
                self.log(i, "open", "closed", "cooldown_time elapsed".into());
                false
            }
            None => false,
        }
    }

    /// The deployment an attempt goes to: cooled deployments dropped, then
    /// the lowest order left (`only`: a fallback hop's one order), and not
    /// one that answered this request with a status never retried on it.
    fn pick(&self, only: Option<usize>, skip: &[usize]) -> Option<usize> {
        let mut orders = match only {
            Some(i) => i..i + 1,
            None => 0..self.names.len(),
        };
        orders.find(|i| !self.is_cooling(*i) && !skip.contains(i))
    }

    fn any_healthy(&self) -> bool {
        (0..self.names.len()).any(|i| !self.is_cooling(i))
    }

    fn minute(&self) -> u64 {
        (Instant::now() - self.start).as_secs() / 60
    }

    fn record_success(&self, i: usize) {
        let minute = self.minute();
        self.deployments.borrow_mut()[i].in_minute(minute).successes += 1;
    }

    /// A failure the Router counts (`deployment_callback_on_failure`):
    /// its minute's count, and a cooldown when the rules say so, for the
    /// answer's `retry-after` or 5 s.
    fn record_failure(&self, i: usize, status: u16, hint: Option<Duration>) {
        let minute = self.minute();
        let multi = self.names.len() > 1;
        let mut deployments = self.deployments.borrow_mut();
        let d = deployments[i].in_minute(minute);
        d.failures += 1;
        let calls = d.successes + d.failures;
        let share = f64::from(d.failures) / f64::from(calls);
        // `_is_cooldown_required`: other 4xx never cool down.
        let eligible = matches!(status, 401 | 402 | 404 | 408 | 429) || status >= 500;
        let reason = if !eligible {
            return;
        } else if status == 429 && multi {
            "429".to_owned()
        } else if multi && calls >= MIN_REQUESTS && share > FAILURE_THRESHOLD {
            format!(
                "{status}, {} of {calls} calls failed this minute",
                d.failures
            )
        } else if matches!(status, 401 | 402 | 404) {
            // Never retried on this deployment: cooled at once.
            format!("{status}")
        } else {
            return;
        };
        if d.cooling_until.is_some_and(|until| Instant::now() < until) {
            // A live cooldown is not extended.
            return;
        }
        let cooldown = hint.unwrap_or(COOLDOWN);
        if cooldown.is_zero() {
            return;
        }
        d.cooling_until = Some(Instant::now() + cooldown);
        d.cooled_for = cooldown;
        drop(deployments);
        self.log(
            i,
            "closed",
            "open",
            format!("cooldown {}s: {reason}", cooldown.as_secs_f64()),
        );
    }

    /// One request as a client of the proxy makes it: the OpenAI SDK's two
    /// retries around the proxy's answer, after the proxy's `retry-after`
    /// (only "No deployments available" carries one: a provider's own is
    /// passed on as `llm_provider-retry-after`, which the SDK does not read).
    pub async fn call(
        &self,
        provider: &Provider,
        rng: &RefCell<fastrand::Rng>,
    ) -> Result<usize, Fail> {
        with_retries(rng, || async {
            match self.proxy_request(provider, rng).await {
                Ok(i) => Try::Done(Ok(i)),
                Err(e) if e.sdk_retries => Try::Retry {
                    hint: e.retry_after,
                    fail: e.fail,
                },
                Err(e) => Try::Done(Err(e.fail)),
            }
        })
        .await
    }

    /// One request to the proxy: the retry loop over the group, then a
    /// fallback hop to each higher order in turn, each with a retry loop of
    /// its own (`async_function_with_fallbacks`, `run_async_fallback`).
    async fn proxy_request(
        &self,
        provider: &Provider,
        rng: &RefCell<fastrand::Rng>,
    ) -> Result<usize, ProxyError> {
        // One logging object per request: only its first failure is counted.
        let mut counted = false;
        let mut result = self.retry_loop(provider, None, &mut counted, rng).await;
        for order in 1..self.names.len().min(1 + MAX_FALLBACKS) {
            // A stream cut after its head has reached the client: nothing
            // falls back from it.
            if result.as_ref().is_ok() || result.as_ref().is_err_and(|e| e.cut) {
                break;
            }
            result = self
                .retry_loop(provider, Some(order), &mut counted, rng)
                .await;
        }
        result
    }

    /// `async_function_with_retries`: the first attempt and up to
    /// [`NUM_RETRIES`] more, each picking a deployment again; at once when
    /// another deployment is healthy (with several, always), else after the
    /// SDK's formula; stopped when nothing is healthy.
    async fn retry_loop(
        &self,
        provider: &Provider,
        only: Option<usize>,
        counted: &mut bool,
        rng: &RefCell<fastrand::Rng>,
    ) -> Result<usize, ProxyError> {
        let multi = self.names.len() > 1;
        let mut skip: Vec<usize> = Vec::new();
        let mut failed: Option<(usize, u16, Option<Duration>)> = None;
        let mut last = self.no_deployments();
        for n in 0..=NUM_RETRIES {
            let Some(i) = self.pick(only, &skip) else {
                last = self.no_deployments();
                break;
            };
            let (fail, status, hint, retryable, cut) = match attempt(provider, i).await {
                Attempt::Served => {
                    self.record_success(i);
                    return Ok(i);
                }
                // A connection error is an `InternalServerError` (500).
                Attempt::Retryable { hint, fail, status } => {
                    (fail, status.unwrap_or(500), hint, true, false)
                }
                // Mid-stream (no status) is a server error, not retried,
                // and the client sees its stream cut.
                Attempt::Final { fail, status } => {
                    (fail, status.unwrap_or(500), None, false, status.is_none())
                }
            };
            // A stream that fails after its head fails while the client
            // reads it, past the Router's failure callbacks: not counted.
            if !cut && !std::mem::replace(counted, true) {
                self.record_failure(i, status, hint);
            }
            if !cut {
                failed = Some((i, status, hint));
            }
            last = ProxyError {
                fail,
                // The SDK retries a 408, 409, 429 and 5xx, not a cut stream.
                sdk_retries: !cut && (matches!(status, 408 | 409 | 429) || status >= 500),
                retry_after: None,
                cut,
            };
            // `should_retry_this_error`: 401 and 403 are retried elsewhere
            // in a group of several; a 404 never; nothing when no
            // deployment is healthy.
            let retried = (retryable || (multi && matches!(status, 401 | 403))) && status != 404;
            if !retried || n == NUM_RETRIES || !self.any_healthy() {
                break;
            }
            if !(matches!(status, 408 | 409 | 429) || status >= 500) {
                skip.push(i);
            }
            if !multi {
                tokio::time::sleep(backoff(n + 1, hint, rng)).await;
            }
        }
        // A fallback hop's final error goes through the cooldown rules too.
        if only.is_some()
            && let Some((i, status, hint)) = failed
        {
            self.record_failure(i, status, hint);
        }
        Err(last)
    }

    /// "No deployments available": a 429 with `retry-after` the shortest
    /// cooldown length configured among those running (not what is left).
    fn no_deployments(&self) -> ProxyError {
        let now = Instant::now();
        let shortest = self
            .deployments
            .borrow()
            .iter()
            .filter(|d| d.cooling_until.is_some_and(|until| now < until))
            .map(|d| d.cooled_for)
            .min();
        ProxyError {
            fail: Fail::NoTarget,
            sdk_retries: true,
            retry_after: Some(shortest.unwrap_or(COOLDOWN)),
            cut: false,
        }
    }
}

/// What the proxy answers a request that failed.
struct ProxyError {
    fail: Fail,
    /// Whether the SDK retries the answer's status.
    sdk_retries: bool,
    /// The answer's own `retry-after`.
    retry_after: Option<Duration>,
    /// A stream cut after its head: the client has its answer, cut.
    cut: bool,
}
