//! Every metric's name, unit and description, in one place.

use ::metrics::{Unit, describe_counter, describe_gauge};

/// A scope's state: 0 admits (`closed`, `clear`, `active`), 1 refuses
/// (`open`, `gated`, `parked`), 2 probing (`half_open`).
pub const SCOPE_STATE: &str = "levee_scope_state";
/// Seconds until a scope admits requests again (0 when it admits now).
pub const SCOPE_RETRY_AFTER: &str = "levee_scope_retry_after_seconds";
/// Time a breaker scope spent away from `closed`, in all.
pub const BREAKER_OPEN_TIME: &str = "levee_breaker_open_milliseconds_total";
/// Time a quota scope spent gated, in all.
pub const GATE_GATED_TIME: &str = "levee_gate_gated_milliseconds_total";
/// Time a quota scope spent gated in the last hour.
pub const GATE_GATED_LAST_HOUR: &str = "levee_gate_gated_last_hour_seconds";
/// What a quota scope's provider last said is left of a limit, refilled since.
pub const SCOPE_REMAINING: &str = "levee_scope_remaining";
/// Times a quota scope's gate closed, by why (`throttled`, `paced`).
pub const GATE_CLOSINGS: &str = "levee_gate_closings_total";
/// Calls refused by a breaker layer, by mechanism.
pub const REJECTIONS: &str = "levee_rejections_total";
/// Upstream outcomes that were not a success, by verdict.
pub const UPSTREAM_FAILURES: &str = "levee_upstream_failures_total";
/// State changes, counted from the breaker layer's events.
pub const TRANSITIONS: &str = "levee_transitions_total";
/// Calls holding a bulkhead permit now.
pub const BULKHEAD_IN_FLIGHT: &str = "levee_bulkhead_in_flight";
/// A bulkhead's permits in all.
pub const BULKHEAD_LIMIT: &str = "levee_bulkhead_limit";
/// Callers queued under a bulkhead's `max_wait` now.
pub const BULKHEAD_WAITING: &str = "levee_bulkhead_waiting";
/// Calls a bulkhead refused.
pub const BULKHEAD_REJECTED: &str = "levee_bulkhead_rejected_total";
/// Whole retries a retry budget would grant now.
pub const BUDGET_TOKENS: &str = "levee_retry_budget_tokens";
/// Requests deposited into a retry budget.
pub const BUDGET_REQUESTS: &str = "levee_retry_budget_requests_total";
/// Retries a retry budget granted.
pub const BUDGET_RETRIES: &str = "levee_retry_budget_retries_total";
/// Retries a retry budget refused (`budget_exhausted`).
pub const BUDGET_EXHAUSTED: &str = "levee_retry_budget_exhausted_total";
/// Successful responses a failover target served.
pub const FAILOVER_SERVED: &str = "levee_failover_served_total";
/// A failover target's answers after which the request went on.
pub const FAILOVER_FAILED_OVER: &str = "levee_failover_failed_over_total";
/// The share of a failover's successes served by a target other than the first.
pub const FAILOVER_FALLBACK_SHARE: &str = "levee_failover_fallback_share";
/// Requests a failover refused with `NoTargetAvailable`.
pub const FAILOVER_NO_TARGET: &str = "levee_failover_no_target_total";
/// Hedges a failover sent: copies of late first calls to another target.
pub const FAILOVER_HEDGES: &str = "levee_failover_hedges_total";
/// Whether a failover target is demoted for being slow (1) or not (0).
pub const FAILOVER_DEMOTED: &str = "levee_failover_demoted";

/// Registers every metric's unit and description with the installed
/// recorder (an exporter shows them as help text). [`MetricsReporter::record`]
/// calls it; call it yourself to describe the metrics before the first record.
///
/// [`MetricsReporter::record`]: super::MetricsReporter::record
pub fn describe() {
    describe_gauge!(
        SCOPE_STATE,
        "Scope state: 0 admits (closed/clear/active), 1 refuses (open/gated/parked), 2 half_open."
    );
    describe_gauge!(
        SCOPE_RETRY_AFTER,
        Unit::Seconds,
        "Time until the scope admits requests again; 0 when it admits now."
    );
    describe_counter!(
        BREAKER_OPEN_TIME,
        Unit::Milliseconds,
        "Time the breaker scope spent away from closed (open, half-open, isolated)."
    );
    describe_counter!(
        GATE_GATED_TIME,
        Unit::Milliseconds,
        "Time the quota scope spent gated (throttled)."
    );
    describe_gauge!(
        GATE_GATED_LAST_HOUR,
        Unit::Seconds,
        "Time the quota scope spent gated in the last hour."
    );
    describe_gauge!(
        SCOPE_REMAINING,
        "What the provider last said is left of the quota scope's limit (by dimension), refilled since."
    );
    describe_counter!(
        GATE_CLOSINGS,
        "Times the quota scope's gate closed: on a provider's 429 (throttled) or before one (paced)."
    );
    describe_counter!(
        REJECTIONS,
        "Calls refused without being sent, by mechanism (breaker, gate, park)."
    );
    describe_counter!(
        UPSTREAM_FAILURES,
        "Upstream outcomes that were not a success, by verdict."
    );
    describe_counter!(
        TRANSITIONS,
        "State changes of breakers, throttle gates and parks."
    );
    describe_gauge!(BULKHEAD_IN_FLIGHT, "Calls holding a bulkhead permit now.");
    describe_gauge!(BULKHEAD_LIMIT, "Permits of the bulkhead compartment.");
    describe_gauge!(
        BULKHEAD_WAITING,
        "Callers queued for a bulkhead permit now."
    );
    describe_counter!(BULKHEAD_REJECTED, "Calls the bulkhead refused (full).");
    describe_gauge!(
        BUDGET_TOKENS,
        "Whole retries the retry budget would grant now."
    );
    describe_counter!(BUDGET_REQUESTS, "Requests deposited into the retry budget.");
    describe_counter!(BUDGET_RETRIES, "Retries the retry budget granted.");
    describe_counter!(
        BUDGET_EXHAUSTED,
        "Retries refused because the retry budget was empty."
    );
    describe_counter!(FAILOVER_SERVED, "Successful responses the target served.");
    describe_counter!(
        FAILOVER_FAILED_OVER,
        "Answers of the target after which the request went on to another target."
    );
    describe_gauge!(
        FAILOVER_FALLBACK_SHARE,
        "Share of successes served by a target other than the first in order."
    );
    describe_counter!(
        FAILOVER_NO_TARGET,
        "Requests refused because no target could take them."
    );
    describe_counter!(
        FAILOVER_HEDGES,
        "Copies of late first calls sent to another target (hedges)."
    );
    describe_gauge!(
        FAILOVER_DEMOTED,
        "1 while the target is tried after the others for being slow, else 0."
    );
}
