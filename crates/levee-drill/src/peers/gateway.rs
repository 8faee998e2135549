//! The `gateway-router` stack: the documented default policy of LiteLLM's
//! Router, the most used LLM gateway. There is no Rust crate of it: this is
//! our implementation of what its documentation and code say, for the
//! drill only.
//!
//! Followed: <https://docs.litellm.ai/docs/routing> ("Cooldowns", "How
//! Cooldowns Work", "Retries", "Deployment Ordering (Priority)"),
//! <https://docs.litellm.ai/docs/router/learn/reliability>, and for what
//! the docs leave open `litellm/router_utils/cooldown_handlers.py` and the
//! `Router` constructor in <https://github.com/BerriAI/litellm>.
//!
//! - **Deployments**: the scenario's targets are the deployments of one
//!   model group, `order` = their position (the documented way to make
//!   one primary and backups): each attempt takes the lowest-order
//!   deployment not cooling down.
//! - **Cooldown**, 5 s (`cooldown_time` default,
//!   `DEFAULT_COOLDOWN_TIME_SECONDS`), per deployment, with `allowed_fails`
//!   left at its default (so the "v2" rules apply): at once on a 429 (when
//!   the group has more than one deployment), on a 401, 404 or 408 (the
//!   docs' "non-retryable errors"), and on any other failure (5xx, 529)
//!   once more than 50% of the deployment's calls in the current minute
//!   failed, at least 5 calls (`DEFAULT_FAILURE_THRESHOLD_PERCENT`,
//!   `DEFAULT_FAILURE_THRESHOLD_MINIMUM_REQUESTS`; not for a single
//!   deployment). Other 4xx never cool down; neither does a connection
//!   error (`APIConnectionError` is exempt). When it ends the deployment
//!   is back in rotation at once, no probe. Every deployment cooling down:
//!   "No deployments available", refused unsent (`no_target`).
//! - **Retries**: `num_retries` = 2 (its default, `openai.DEFAULT_MAX_RETRIES`).
//!   A retry skips the deployments that already failed this request, goes
//!   at once when another deployment is healthy, else waits the
//!   `Retry-After` (≤ 60 s) or 0.5 s × 2ⁿ jittered (`_calculate_retry_after`,
//!   the OpenAI SDK's formula). A 404 and a stream that failed after its
//!   200 are not retried.
//! - **Timeouts**: none below the caller's (`request_timeout` defaults to
//!   600 s), as a user of the defaults gets.
//!
//! In a fleet each replica keeps its own cooldowns (LiteLLM shares them
//! through Redis only when one is configured).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use tokio::time::Instant;

use crate::outcome::{Fail, TransitionRecord};
use crate::provider::Provider;
use crate::sdk::{Attempt, attempt, backoff};

/// `num_retries`: LiteLLM's default, the OpenAI SDK's `DEFAULT_MAX_RETRIES`.
pub const NUM_RETRIES: u32 = 2;
/// `cooldown_time`: `DEFAULT_COOLDOWN_TIME_SECONDS`.
pub const COOLDOWN: Duration = Duration::from_secs(5);
/// A deployment with more than this share of failed calls in the current
/// minute cools down (`DEFAULT_FAILURE_THRESHOLD_PERCENT`).
const FAILURE_THRESHOLD: f64 = 0.5;
/// ... once it made at least this many calls this minute.
const MIN_REQUESTS: u32 = 5;

#[derive(Clone, Copy, Debug, Default)]
struct Deployment {
    cooling_until: Option<Instant>,
    /// The minute (from the start) the counts below are for.
    minute: u64,
    successes: u32,
    failures: u32,
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

    /// The lowest-order deployment neither cooling down nor in `skip`.
    fn pick(&self, skip: &[usize]) -> Option<usize> {
        (0..self.names.len()).find(|i| !skip.contains(i) && !self.is_cooling(*i))
    }

    fn minute(&self) -> u64 {
        (Instant::now() - self.start).as_secs() / 60
    }

    fn record(&self, i: usize, status: Option<u16>, failed: bool) {
        let minute = self.minute();
        let multi = self.names.len() > 1;
        let mut deployments = self.deployments.borrow_mut();
        let d = &mut deployments[i];
        if d.minute != minute {
            (d.minute, d.successes, d.failures) = (minute, 0, 0);
        }
        if !failed {
            d.successes += 1;
            return;
        }
        d.failures += 1;
        let calls = d.successes + d.failures;
        let reason = match status {
            // A connection error never cools down.
            None => return,
            Some(429) if multi => "429".to_owned(),
            Some(s @ (401 | 404 | 408)) => format!("{s}"),
            Some(s) if (400..500).contains(&s) => return,
            Some(s)
                if multi
                    && calls >= MIN_REQUESTS
                    && f64::from(d.failures) / f64::from(calls) > FAILURE_THRESHOLD =>
            {
                format!("{s}, {} of {calls} calls failed this minute", d.failures)
            }
            Some(_) => return,
        };
        if d.cooling_until.is_some() {
            return;
        }
        d.cooling_until = Some(Instant::now() + COOLDOWN);
        drop(deployments);
        self.log(i, "closed", "open", format!("cooldown 5s: {reason}"));
    }

    /// One request: the first attempt and up to [`NUM_RETRIES`] retries.
    pub async fn call(
        &self,
        provider: &Provider,
        rng: &RefCell<fastrand::Rng>,
    ) -> Result<usize, Fail> {
        let mut failed_here: Vec<usize> = Vec::new();
        for n in 0..=NUM_RETRIES {
            // Deployments that failed this request are skipped while others
            // are healthy; with none left, any one not cooling down.
            let Some(i) = self.pick(&failed_here).or_else(|| self.pick(&[])) else {
                return Err(Fail::NoTarget);
            };
            let (hint, fail, retry) = match attempt(provider, i).await {
                Attempt::Served => {
                    self.record(i, Some(200), false);
                    return Ok(i);
                }
                Attempt::Retryable { hint, fail, status } => {
                    self.record(i, status, true);
                    (hint, fail, true)
                }
                Attempt::Final { fail, status } => {
                    // Mid-stream (no status) counts as a server error.
                    self.record(i, status.or(Some(500)), true);
                    (None, fail, !matches!(status, None | Some(404)))
                }
            };
            if !retry || n == NUM_RETRIES {
                return Err(fail);
            }
            if !failed_here.contains(&i) {
                failed_here.push(i);
            }
            // At once when another deployment can take it.
            if self.pick(&failed_here).is_none() {
                tokio::time::sleep(backoff(n + 1, hint, rng)).await;
            }
        }
        Err(Fail::Upstream)
    }
}
