//! The breaker: stop sending to an account that is failing.
//!
//! # Why a breaker, and why only for some errors
//!
//! A circuit breaker exists so that callers fail fast instead of waiting on
//! something broken, and so that the broken thing gets room to recover. It
//! assumes an error means the dependency is unwell. For LLM providers the most
//! common error, `429`, means the opposite: the account answered promptly and
//! said it is busy. A breaker that counts 429s ejects accounts exactly at peak
//! traffic, for a cool-off that outlasts the throttle by minutes, and cascades
//! the load onto the next account until every breaker is open.
//!
//! So this breaker counts only what it is for:
//!
//! - **availability failures** — timeouts, connection errors, 5xx, Anthropic's
//!   529 overload, a success slower than
//!   [`slow_call`](BreakerConfig::slow_call) — feed the tripping rule
//!   ([`Tripping`]: 5 in a row by default, or a failure ratio over a rolling
//!   window, or a [`TrippingPolicy`] of your own);
//! - **rejected credentials** (401/403) count too, and also trip on their own
//!   lower threshold (2) with a longer cool-off: a revoked key will not come
//!   back by waiting thirty seconds;
//! - **throttled, quota and bad-request outcomes count for nothing**: they
//!   neither add a failure nor clear one. The throttle gate
//!   ([`gate`](crate::gate)) and the park table ([`park`](crate::park)) deal
//!   with them.
//!
//! # Cool-off and recovery
//!
//! An open breaker rejects at once with a `retry_after`. Its cool-off is
//! exactly 10 s for the first six (a probe every 10 s for an outage's first
//! minute, so a provider that recovers within it is back within 10 s), then
//! doubles with each failed recovery up to 15 min ([`Cooldown`]), drawn
//! with jitter ([`Jitter::Equal`]) so that a fleet of clients that saw the
//! same long outage does not probe in lockstep; the growth resets once the
//! breaker recovers. Each client still sends one probe per cool-off: a
//! fleet of N probes N times. When the cool-off
//! ends, the breaker turns half-open and admits
//! [`half_open_probes`](BreakerConfig::half_open_probes) trial calls (one by
//! default), never more at a time: letting every caller through while
//! half-open is how a recovering provider gets flattened again. A probe whose
//! call is cancelled, or whose outcome says nothing about health, hands its
//! slot back; a probe that hangs loses its lease after
//! [`probe_timeout`](BreakerConfig::probe_timeout), so a lost probe cannot
//! wedge the breaker half-open forever. Every change of state starts a new
//! generation, and outcomes of calls admitted in an earlier one are ignored.
//!
//! # Sans-IO
//!
//! [`BreakerState`] is the state of one key. It reads no clock (time comes in
//! as a [`Timestamp`](crate::clock::Timestamp)), draws randomness from the
//! caller's [`fastrand::Rng`], and returns every change of state as a
//! [`Transition`](crate::transition::Transition) for the caller to publish.
//! The tower layer keeps one per failure domain in a registry.
//!
//! ```
//! use std::time::Duration;
//! use levee_core::breaker::{Admission, BreakerConfig, BreakerState, BreakerStatus, Outcome};
//! use levee_core::classify::Verdict;
//! use levee_core::clock::{Clock, ManualClock};
//!
//! let cfg = BreakerConfig::default();
//! let clock = ManualClock::new();
//! let mut rng = fastrand::Rng::with_seed(7);
//! let mut breaker = BreakerState::new(&cfg);
//!
//! // A storm of 429s: the account is busy, not broken.
//! for _ in 0..100 {
//!     let (admission, _) = breaker.admit(&cfg, clock.now());
//!     let permit = admission.permit().unwrap();
//!     let throttled = Outcome::new(Verdict::Throttled, "status:429");
//!     assert!(breaker.record(&cfg, "org-a", permit, &throttled, clock.now(), &mut rng).is_none());
//! }
//! assert_eq!(breaker.status(), BreakerStatus::Closed);
//!
//! // Five 503s in a row: that is an outage.
//! let mut opened = None;
//! for _ in 0..5 {
//!     let permit = breaker.admit(&cfg, clock.now()).0.permit().unwrap();
//!     let outage = Outcome::new(Verdict::Availability, "status:503");
//!     opened = breaker.record(&cfg, "org-a", permit, &outage, clock.now(), &mut rng);
//! }
//! let opened = opened.unwrap();
//! assert_eq!(opened.reason, "opened after 5 consecutive availability failures (status:503)");
//! assert!(matches!(breaker.admit(&cfg, clock.now()).0, Admission::Rejected { .. }));
//!
//! // After the cool-off (10 s, exactly, for a first open), one probe decides.
//! clock.advance(Duration::from_secs(10));
//! let (admission, half_open) = breaker.admit(&cfg, clock.now());
//! assert_eq!(half_open.unwrap().to, "half_open");
//! let probe = admission.permit().unwrap();
//! assert!(!breaker.admit(&cfg, clock.now()).0.is_allowed()); // one probe at a time
//! let closed = breaker.record(&cfg, "org-a", probe, &Outcome::success(), clock.now(), &mut rng);
//! assert_eq!(closed.unwrap().to, "closed");
//! ```

mod adopt;
mod config;
mod cooldown;
mod manual;
mod outcome;
mod probes;
mod record;
mod state;
mod tripping;

pub use config::{BreakerConfig, BreakerConfigBuilder};
pub use cooldown::{Cooldown, FULL_JITTER_FLOOR, Jitter};
pub use outcome::{Admission, BreakerStatus, Outcome, Permit};
pub use probes::HALF_OPEN_RETRY_AFTER;
pub use state::{BreakerState, ISOLATED_RETRY_AFTER};
pub use tripping::{ROLLING_BUCKETS, Tripping, TrippingPolicy};
