//! The Levee fault drill: prove a configuration against scripted provider
//! faults before production does.
//!
//! A scenario (TOML, see [`scenario`]) names the accounts, the load and the
//! faults. The drill runs the same Poisson arrivals through each stack —
//! `unprotected` (the SDK's retries), `naive` (a classic breaker that counts
//! 429s), the peers a user would otherwise pick (`tower-resilience`,
//! `failsafe`, `gateway-router`: [`peers`]) and `levee` — against a
//! simulated provider ([`provider`]) that
//! answers with each dialect's real status codes, headers and bodies
//! ([`dialect`]), all under tokio's paused clock ([`run`]): an hour of
//! traffic takes seconds and the same seed gives the same report byte for
//! byte ([`report`], [`svg`]). With `--live` ([`live`]) the same scenario
//! runs over a real hyper server and client on 127.0.0.1, in real time.
//!
//! The `levee` stack is RetryBudget → `tower_levee::failover::Failover` →
//! Bulkhead → Breaker → per-attempt timeout ([`levee`]).
//!
//! Also here: [`tune`] (`levee-drill tune`, a search of a scenario's
//! `[levee]` settings), [`classify_cmd`] (`levee-drill classify`) and
//! [`samples`] (`levee-drill samples`).
//!
//! # Stability
//!
//! This library is the `levee-drill` binary's own, public so its tests and
//! benchmarks can reach it: its modules carry no semver promise. What is
//! kept stable is what a user touches: the command line, the scenario
//! format and the JSON report.

pub mod body;
pub mod classify_cmd;
pub mod dialect;
pub mod levee;
pub mod live;
pub mod outcome;
pub mod peers;
pub mod provider;
pub mod report;
pub mod run;
pub mod samples;
pub mod scenario;
pub mod sdk;
pub mod suite;
pub mod svg;
pub mod through;
pub mod tune;
