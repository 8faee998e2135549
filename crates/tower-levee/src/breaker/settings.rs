//! What every clone of one breaker layer is configured with.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use levee_core::breaker::BreakerConfig;
use levee_core::classify::Classification;
use levee_core::gate::GateConfig;
use levee_core::pace::{PaceCheck, PaceConfig};
use levee_core::park::ParkConfig;

use super::event::EventSubscriber;
use super::hold::HoldLimits;
use super::scope::ScopeFn;

/// The default bound on how much of a non-2xx body is read to classify it.
pub const DEFAULT_PEEK_LIMIT: usize = 16 * 1024;

/// The default bound on scopes tracked per mechanism before idle ones are evicted.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// A user hook that can turn a 2xx response into a failure verdict (an
/// empty body, a response with no usable content). It sees the response
/// head and a bounded peek of the body.
pub type SoftFailureFn =
    Arc<dyn Fn(&http::response::Parts, &[u8]) -> Option<Classification> + Send + Sync>;

/// The settings every clone of a layer shares, validated by the builder.
pub(crate) struct Settings {
    pub(crate) breaker: BreakerConfig,
    pub(crate) gate: GateConfig,
    pub(crate) park: ParkConfig,
    pub(crate) pace: PaceConfig,
    /// `pace.check()`, computed once.
    pub(crate) pace_check: Option<PaceCheck>,
    pub(crate) peek_limit: u32,
    pub(crate) max_keys: usize,
    pub(crate) isolate_by_model: bool,
    /// [`times_any_call`](Self::times_any_call), computed once: an untimed
    /// call resolves no limits.
    pub(crate) times_calls: bool,
    pub(crate) slow_call_by_model: Vec<(Box<str>, Duration)>,
    pub(crate) slow_stream: Option<Duration>,
    pub(crate) first_content_timeout: Option<Duration>,
    pub(crate) first_content_by_model: Vec<(Box<str>, Duration)>,
    pub(crate) stall_timeout: Option<Duration>,
    /// How far a stream is read ahead before it is handed on; `None`: not.
    pub(crate) hold: Option<HoldLimits>,
    pub(crate) latency_estimate: bool,
    pub(crate) empty_body_is_failure: bool,
    /// Behind a second `Arc`, a thin pointer: every call carries a clone.
    pub(crate) soft_failure: Option<Arc<SoftFailureFn>>,
    pub(crate) scope_fn: Option<ScopeFn>,
    pub(crate) subscribers: Vec<EventSubscriber>,
    pub(crate) seed: Option<u64>,
}

impl Settings {
    /// The time limits of a call to `model`.
    #[inline]
    pub(crate) fn limits(&self, model: Option<&str>) -> Limits {
        Limits {
            first_byte: for_model(self.breaker.slow_call, &self.slow_call_by_model, model),
            total: self.slow_stream,
            first_content: for_model(
                self.first_content_timeout,
                &self.first_content_by_model,
                model,
            ),
            stall: self.stall_timeout,
        }
    }

    /// Whether some call is timed: some model's calls have a limit, or the
    /// latency estimate is kept. What `times_calls` holds, computed once.
    pub(crate) fn times_any_call(&self) -> bool {
        self.latency_estimate
            || self.limits(None).any()
            || !self.slow_call_by_model.is_empty()
            || !self.first_content_by_model.is_empty()
    }
}

/// A call's time limits, resolved for its model.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    /// Slow-call threshold on the time to first byte.
    pub(crate) first_byte: Option<Duration>,
    /// Slow threshold on a stream's whole duration.
    pub(crate) total: Option<Duration>,
    /// A stream's first-content timeout, from the call's start.
    pub(crate) first_content: Option<Duration>,
    /// A stream's longest gap between events.
    pub(crate) stall: Option<Duration>,
}

impl Limits {
    /// Whether any limit is set.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        let Limits {
            first_byte,
            total,
            first_content,
            stall,
        } = self;
        first_byte.is_some() || total.is_some() || first_content.is_some() || stall.is_some()
    }
}

/// `model`'s own value in `by_model`, else `default`.
#[inline]
fn for_model(
    default: Option<Duration>,
    by_model: &[(Box<str>, Duration)],
    model: Option<&str>,
) -> Option<Duration> {
    if by_model.is_empty() {
        return default;
    }
    model
        .and_then(|m| by_model.iter().find(|(k, _)| &**k == m))
        .map(|(_, d)| *d)
        .or(default)
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("breaker", &self.breaker)
            .field("gate", &self.gate)
            .field("park", &self.park)
            .field("pace", &self.pace)
            .field("peek_limit", &self.peek_limit)
            .field("max_keys", &self.max_keys)
            .field("isolate_by_model", &self.isolate_by_model)
            .field("slow_call_by_model", &self.slow_call_by_model)
            .field("slow_stream", &self.slow_stream)
            .field("first_content_timeout", &self.first_content_timeout)
            .field("first_content_by_model", &self.first_content_by_model)
            .field("stall_timeout", &self.stall_timeout)
            .field("hold", &self.hold)
            .field("latency_estimate", &self.latency_estimate)
            .field("empty_body_is_failure", &self.empty_body_is_failure)
            .field("soft_failure", &self.soft_failure.as_ref().map(|_| ".."))
            .field("scope_fn", &self.scope_fn.as_ref().map(|_| ".."))
            .field("subscribers", &self.subscribers.len())
            .finish()
    }
}
