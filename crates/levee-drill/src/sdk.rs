//! The two baseline stacks: `unprotected` (an SDK's own retries against the
//! first target) and `naive` (a classic breaker that counts every non-2xx,
//! 429 included, with failover when open).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use tokio::time::Instant;
use tower::Service;

use crate::outcome::{Fail, TransitionRecord, read_failure};
use crate::provider::{MidStreamError, Provider, StreamCheck};

/// Attempts per request, the first included (2 retries, as the SDKs default).
pub(crate) const ATTEMPTS: u32 = 3;

/// The longest `retry-after` the SDKs honour.
const MAX_HINT: Duration = Duration::from_secs(60);

/// One call to one target, as an SDK sees it.
pub(crate) enum Attempt {
    Served,
    /// A 408, 409, 429, 5xx or transport error: the SDKs retry it.
    Retryable {
        hint: Option<Duration>,
        fail: Fail,
        /// The answer's status (`None`: a transport error).
        status: Option<u16>,
    },
    /// Any other error answer (`status`), or a stream that failed after
    /// its 200 (`None`).
    Final {
        fail: Fail,
        status: Option<u16>,
    },
}

/// The wait an answer asks for, as the SDKs read it: `retry-after-ms`, else
/// `retry-after` in seconds (a negative or non-finite value is no wait).
pub(crate) fn hint(headers: &http::HeaderMap) -> Option<Duration> {
    let get = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
    };
    get("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| get("retry-after").map(Duration::from_secs_f64))
}

/// One call to target `idx`, its stream read to the end.
pub(crate) async fn attempt(provider: &Provider, idx: usize) -> Attempt {
    let mut svc = StreamCheck(provider.target(idx));
    let req = Request::post("/v1/chat/completions")
        .body(Bytes::new())
        .expect("static request");
    match svc.call(req).await {
        Ok(res) if res.status().is_success() => Attempt::Served,
        Ok(res) => {
            let status = res.status().as_u16();
            let hint = hint(res.headers());
            let fail = read_failure(res).await;
            if matches!(status, 408 | 409 | 429) || status >= 500 {
                Attempt::Retryable {
                    hint,
                    fail,
                    status: Some(status),
                }
            } else {
                Attempt::Final {
                    fail,
                    status: Some(status),
                }
            }
        }
        // The SDKs do not retry a stream that failed after its 200.
        Err(e) if e.is::<MidStreamError>() => Attempt::Final {
            fail: Fail::Upstream,
            status: None,
        },
        Err(_) => Attempt::Retryable {
            hint: None,
            fail: Fail::Upstream,
            status: None,
        },
    }
}

/// The SDKs' backoff before retry `n` (1-based): the provider's hint when it
/// gave one of at most 60 s, else 0.5 s × 2ⁿ⁻¹ capped at 8 s, jittered down
/// by up to 25%.
pub(crate) fn backoff(n: u32, hint: Option<Duration>, rng: &RefCell<fastrand::Rng>) -> Duration {
    if let Some(h) = hint.filter(|h| *h <= MAX_HINT) {
        return h;
    }
    let base = Duration::from_millis(500)
        .saturating_mul(1 << (n - 1).min(8))
        .min(Duration::from_secs(8));
    base.mul_f64(1.0 - 0.25 * rng.borrow_mut().f64())
}

/// What one try of a request came to, as an SDK's retry loop sees it.
pub(crate) enum Try<T> {
    /// An answer the SDK returns: served, or a failure it does not retry.
    Done(Result<T, Fail>),
    /// A failure it retries, after `hint` when the answer gave one.
    Retry { hint: Option<Duration>, fail: Fail },
}

/// The SDKs' retry loop: up to [`ATTEMPTS`] tries of `once`, with
/// [`backoff`] between them; the last failure when none serves.
pub(crate) async fn with_retries<T, Fut>(
    rng: &RefCell<fastrand::Rng>,
    mut once: impl FnMut() -> Fut,
) -> Result<T, Fail>
where
    Fut: std::future::Future<Output = Try<T>>,
{
    let mut n = 1;
    loop {
        match once().await {
            Try::Done(answer) => return answer,
            Try::Retry { fail, .. } if n == ATTEMPTS => return Err(fail),
            Try::Retry { hint, .. } => tokio::time::sleep(backoff(n, hint, rng)).await,
        }
        n += 1;
    }
}

/// `unprotected`: the SDK's own retries against the first target only.
pub async fn unprotected(provider: &Provider, rng: &RefCell<fastrand::Rng>) -> Result<usize, Fail> {
    with_retries(rng, || async {
        match attempt(provider, 0).await {
            Attempt::Served => Try::Done(Ok(0)),
            Attempt::Final { fail, .. } => Try::Done(Err(fail)),
            Attempt::Retryable { hint, fail, .. } => Try::Retry { hint, fail },
        }
    })
    .await
}

#[derive(Clone, Copy)]
enum State {
    Closed,
    Open(Instant),
    HalfOpen(Option<Instant>),
}

/// The naive stack's breakers, one per target.
#[derive(Debug)]
pub struct Naive {
    inner: RefCell<NaiveInner>,
    start: Instant,
    transitions: Rc<RefCell<Vec<TransitionRecord>>>,
}

struct NaiveInner {
    names: Vec<String>,
    state: Vec<State>,
    fails: Vec<u32>,
}

impl std::fmt::Debug for NaiveInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NaiveInner")
            .field("names", &self.names)
            .finish()
    }
}

/// Consecutive non-2xx answers that open a naive breaker.
const NAIVE_THRESHOLD: u32 = 5;
/// The naive breaker's fixed cool-off.
const NAIVE_COOLOFF: Duration = Duration::from_secs(30);

impl Naive {
    /// Breakers for `names`, recording transitions into `transitions`.
    pub fn new(
        names: Vec<String>,
        start: Instant,
        transitions: Rc<RefCell<Vec<TransitionRecord>>>,
    ) -> Self {
        let n = names.len();
        Naive {
            inner: RefCell::new(NaiveInner {
                names,
                state: vec![State::Closed; n],
                fails: vec![0; n],
            }),
            start,
            transitions,
        }
    }

    fn log(&self, name: &str, from: &str, to: &str, reason: String) {
        self.transitions.borrow_mut().push(TransitionRecord {
            t_ms: (Instant::now() - self.start).as_millis() as u64,
            target: name.to_owned(),
            scope: name.to_owned(),
            mechanism: "breaker".into(),
            from: from.into(),
            to: to.into(),
            reason,
        });
    }

    fn admit(&self) -> Option<usize> {
        let now = Instant::now();
        let mut inner = self.inner.borrow_mut();
        for i in 0..inner.names.len() {
            match inner.state[i] {
                State::Closed => return Some(i),
                State::Open(until) if now >= until => {
                    inner.state[i] = State::HalfOpen(Some(now));
                    let name = inner.names[i].clone();
                    drop(inner);
                    self.log(&name, "open", "half_open", "cool-off elapsed".into());
                    return Some(i);
                }
                // A probe that never reported loses its lease after a cool-off.
                State::HalfOpen(None) => {
                    inner.state[i] = State::HalfOpen(Some(now));
                    return Some(i);
                }
                State::HalfOpen(Some(since)) if now >= since + NAIVE_COOLOFF => {
                    inner.state[i] = State::HalfOpen(Some(now));
                    return Some(i);
                }
                _ => {}
            }
        }
        None
    }

    fn record(&self, i: usize, ok: bool) {
        let mut inner = self.inner.borrow_mut();
        let name = inner.names[i].clone();
        let now = Instant::now();
        let (from, to, reason) = match (inner.state[i], ok) {
            (State::HalfOpen(_), true) => {
                inner.state[i] = State::Closed;
                inner.fails[i] = 0;
                ("half_open", "closed", "probe succeeded".to_owned())
            }
            (State::HalfOpen(_), false) => {
                inner.state[i] = State::Open(now + NAIVE_COOLOFF);
                ("half_open", "open", "probe failed".to_owned())
            }
            (State::Closed, true) => {
                inner.fails[i] = 0;
                return;
            }
            (State::Closed, false) => {
                inner.fails[i] += 1;
                if inner.fails[i] < NAIVE_THRESHOLD {
                    return;
                }
                inner.fails[i] = 0;
                inner.state[i] = State::Open(now + NAIVE_COOLOFF);
                (
                    "closed",
                    "open",
                    format!("opened after {NAIVE_THRESHOLD} consecutive non-2xx"),
                )
            }
            (State::Open(_), _) => return,
        };
        drop(inner);
        self.log(&name, from, to, reason);
    }

    /// One request through the naive stack.
    pub async fn call(
        &self,
        provider: &Provider,
        rng: &RefCell<fastrand::Rng>,
    ) -> Result<usize, Fail> {
        for n in 1..=ATTEMPTS {
            let Some(i) = self.admit() else {
                return Err(Fail::CircuitOpen);
            };
            match attempt(provider, i).await {
                Attempt::Served => {
                    self.record(i, true);
                    return Ok(i);
                }
                Attempt::Final { fail, .. } => {
                    self.record(i, false);
                    return Err(fail);
                }
                Attempt::Retryable { hint, fail, .. } => {
                    self.record(i, false);
                    if n == ATTEMPTS {
                        return Err(fail);
                    }
                    tokio::time::sleep(backoff(n, hint, rng)).await;
                }
            }
        }
        Err(Fail::Upstream)
    }
}
