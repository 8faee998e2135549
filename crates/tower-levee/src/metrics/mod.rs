//! Metrics through the [`metrics`] facade (feature `metrics`):
//! every layer's state and counters, for Prometheus, OpenTelemetry or any
//! exporter that installs a `metrics` recorder.
//!
//! # Free on the request path
//!
//! The layers already keep what is worth watching: each scope's state, the
//! calls refused per mechanism, upstream failures per verdict, time gated
//! and time open, bulkhead gauges, budget totals, the served and fallback
//! counters of a failover. A [`MetricsReporter`] holds their handles and,
//! when [`record`](MetricsReporter::record) is called — from your `/metrics`
//! scrape handler, or on an interval with
//! [`spawn`](MetricsReporter::spawn) — reads those counters and snapshots
//! and publishes them ([`Counter::absolute`](::metrics::Counter::absolute),
//! [`Gauge::set`](::metrics::Gauge::set)). No request ever touches a
//! recorder, takes a lock or writes a counter for metrics' sake: the cost is
//! paid per scrape, in the scraper's task. The one exception is
//! [`transition_counter`], a callback for a breaker layer's events that
//! bumps a counter on each change of state (rare by nature: never per call).
//!
//! # Metrics
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `levee_scope_state` | gauge | `target`, `mechanism`, `scope` | 0 admits (`closed`, `clear`, `active`), 1 refuses (`open`, `gated`, `parked`), 2 probing (`half_open`) |
//! | `levee_scope_retry_after_seconds` | gauge | `target`, `mechanism`, `scope` | time until the scope admits again; 0 when it admits |
//! | `levee_breaker_open_milliseconds_total` | counter | `target`, `scope` | time the breaker spent away from `closed` (open, half-open, isolated) |
//! | `levee_gate_gated_milliseconds_total` | counter | `target`, `scope` | time the quota scope spent gated |
//! | `levee_gate_gated_last_hour_seconds` | gauge | `target`, `scope` | time gated in the last hour (capacity signal) |
//! | `levee_gate_closings_total` | counter | `target`, `scope`, `why` | times the gate closed: on a provider's 429 (`throttled`) or before one (`paced`) |
//! | `levee_scope_remaining` | gauge | `target`, `scope`, `dimension`, `period` | what the provider last said is left of a limit, refilled since (recorded once half used) |
//! | `levee_rejections_total` | counter | `target`, `mechanism` | calls refused unsent by the `breaker`, `gate` or `park` |
//! | `levee_upstream_failures_total` | counter | `target`, `verdict` | upstream outcomes by verdict: `availability`, `credential`, `throttled`, `quota`, `request` |
//! | `levee_transitions_total` | counter | `target`, `mechanism`, `scope`, `from`, `to` | state changes ([`transition_counter`]) |
//! | `levee_bulkhead_in_flight` | gauge | `compartment` | calls holding a permit |
//! | `levee_bulkhead_limit` | gauge | `compartment` | permits in all |
//! | `levee_bulkhead_waiting` | gauge | `compartment` | callers queued under `max_wait` |
//! | `levee_bulkhead_rejected_total` | counter | `compartment` | calls refused (full) |
//! | `levee_retry_budget_tokens` | gauge | `budget` | whole retries the budget would grant now |
//! | `levee_retry_budget_requests_total` | counter | `budget` | requests deposited |
//! | `levee_retry_budget_retries_total` | counter | `budget` | retries granted |
//! | `levee_retry_budget_exhausted_total` | counter | `budget` | retries refused: budget empty |
//! | `levee_failover_served_total` | counter | `failover`, `target` | successes served by each target |
//! | `levee_failover_failed_over_total` | counter | `failover`, `target` | answers after which the request went on |
//! | `levee_failover_fallback_share` | gauge | `failover` | share of successes served by a target other than the first |
//! | `levee_failover_no_target_total` | counter | `failover` | requests refused with `NoTargetAvailable` |
//! | `levee_failover_hedges_total` | counter | `failover` | copies of late first calls sent to another target (with hedging) |
//! | `levee_failover_demoted` | gauge | `failover`, `target` | 1 while the target is tried after the others for being slow (with hedging) |
//!
//! The names are constants in [`names`]. The signals worth alerting on: `levee_failover_fallback_share` rising; a `park` scope at
//! `levee_scope_state` 1 (a spend cap is a conversation with finance);
//! `rate(levee_breaker_open_milliseconds_total[1h]) / 1000`, the share of
//! the hour a target was open; and the same over
//! `levee_gate_gated_milliseconds_total` per quota scope (its quota no
//! longer fits its traffic).
//!
//! # Labels
//!
//! Bounded and free of secrets: `target`, `budget` and `failover` are the
//! names you give the reporter (a failover's targets keep their own names);
//! `compartment` is a bulkhead's name; `mechanism`, `verdict`, `from` and
//! `to` are fixed words; `scope` is a scope key, which by default is a URI
//! authority (its userinfo dropped) and a model name, never a header. A
//! custom `scope_fn` must keep it that way. A breaker layer tracks at most
//! `max_keys` scopes per mechanism (10,000 by default) and evicts idle ones
//! (at the cap, or an hour after they last did anything). From then on the
//! reporter publishes nothing for an evicted scope; the `metrics` facade
//! cannot delete a series, so an exporter keeps its last value until its own
//! idle timeout drops it. Set one a few scrape intervals long, e.g. with
//! `metrics-exporter-prometheus`:
//! `PrometheusBuilder::new().idle_timeout(MetricKindMask::ALL, Some(Duration::from_secs(300)))`
//! (a test scrapes it and finds an evicted scope gone). A scope that comes
//! back starts its time counters from zero again, which counters allow.
//!
//! A breaker layer shared by several failover targets is reported under
//! each target's name; give each target its own layer (the default) to keep
//! them apart.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tower_levee::metrics::{MetricsReporter, transition_counter};
//! use tower_levee::{BreakerLayer, Bulkheads, RetryBudget};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Count transitions as they happen; everything else is read per scrape.
//! let breaker = BreakerLayer::builder()
//!     .on_event(transition_counter("openai"))
//!     .build()?;
//! let bulkheads = Bulkheads::new();
//! let llm = bulkheads.compartment("llm", 64);
//! let budget = Arc::new(RetryBudget::default());
//! // ... build the stack with `breaker`, `llm` and `budget` ...
//!
//! let reporter = MetricsReporter::new()
//!     .breaker("openai", breaker.handle())
//!     .bulkheads(bulkheads.clone())
//!     .budget("llm", budget.clone());
//!
//! // Install an exporter's recorder first (e.g. `metrics-exporter-prometheus`);
//! // then either call this at the top of your `/metrics` handler ...
//! reporter.record();
//! // ... or publish every 15 s from a task of its own.
//! let task = reporter.clone().spawn(Duration::from_secs(15));
//! task.abort();
//! # let _ = llm;
//! # Ok(())
//! # }
//! ```

pub mod names;
mod reporter;

pub use self::names::describe;
pub use self::reporter::{MetricsReporter, transition_counter};
