//! Recording outcomes: the closed breaker's tripping and the half-open round.

use std::time::Duration;

use super::config::BreakerConfig;
use super::outcome::{BreakerStatus, Outcome, Permit};
use super::probes::RoundVerdict;
use super::state::{BreakerState, OpenKind};
use super::tripping::{RollingWindow, Tripping};
use crate::classify::Verdict;
use crate::clock::Timestamp;
use crate::transition::{Transition, human};

impl BreakerState {
    /// Records the outcome of a call admitted with `permit`.
    ///
    /// - A permit from an earlier generation is ignored: the breaker has
    ///   changed state since the call was admitted.
    /// - Throttled, quota and request outcomes say nothing about health:
    ///   nothing is counted or reset; a probe's slot is handed back.
    /// - Closed: a success clears the counts; a failure (availability,
    ///   credential, or a slow success) is counted and fed to the tripping
    ///   rule, and the breaker opens when the rule trips, or when
    ///   [`credential_threshold`](BreakerConfig::credential_threshold)
    ///   credential failures come with no success in between (then with the
    ///   longer [`credential_cooldown`](BreakerConfig::credential_cooldown)).
    /// - Half-open: the probe is tallied. The breaker closes once every probe
    ///   of the round has reported and enough succeeded; it reopens, with a
    ///   longer cool-off, as soon as enough have failed that the success
    ///   ratio can no longer be met. A probe that outlived its lease
    ///   ([`probe_timeout`](BreakerConfig::probe_timeout)) is ignored.
    ///
    /// `key` is passed to a custom [`TrippingPolicy`](super::TrippingPolicy).
    pub fn record(
        &mut self,
        cfg: &BreakerConfig,
        key: &str,
        permit: Permit,
        outcome: &Outcome,
        now: Timestamp,
        rng: &mut fastrand::Rng,
    ) -> Option<Transition> {
        if self.policy_reset_pending {
            self.reset_policy(cfg, Some(key));
        }
        if permit.generation != self.generation {
            return None;
        }
        match self.status {
            BreakerStatus::Closed => self.record_closed(cfg, key, outcome, now, rng),
            BreakerStatus::HalfOpen => self.record_probe(cfg, key, permit, outcome, now, rng),
            // No permit is issued while open, so a current one cannot exist.
            BreakerStatus::Open => None,
        }
    }

    /// Records the answer to a shadow probe: a copy of a request that
    /// another target serves, sent to this domain while its breaker was
    /// open (`spell`: the [`open_since`](Self::open_since) it was sent in),
    /// so that no caller pays to find out whether it is back. A success
    /// closes the breaker if it is still open (or half-open) in that spell
    /// (a probe of callers' own still in flight reports too late, and is
    /// dropped). Anything else changes nothing: the cool-off that governs
    /// callers runs on, and no copy's failure makes it grow. A breaker
    /// isolated or open on a rejected key since stays so, a closed one
    /// counts nothing (the copy's answer is not a caller's), and a copy of
    /// an earlier spell closes no later one.
    pub fn record_shadow(
        &mut self,
        cfg: &BreakerConfig,
        key: &str,
        outcome: &Outcome,
        spell: Timestamp,
        now: Timestamp,
    ) -> Option<Transition> {
        if self.status == BreakerStatus::Closed
            || self.isolated
            || self.credential_open
            || self.open_since != Some(spell)
            || outcome.effective_verdict() != Verdict::Success
        {
            return None;
        }
        let from = self.status;
        self.reset_closed(Some(cfg), Some(key), now);
        Some(self.transition(
            from,
            now,
            "closed after a shadow probe succeeded".to_owned(),
        ))
    }

    #[doc(hidden)]
    /// Records a plain success (not slow, not a probe) under rolling
    /// tripping when that is all it does: the breaker is closed with
    /// nothing counted since the last success, so the success only adds to
    /// its window's bucket. Returns `false`, having changed nothing, when
    /// [`record`](Self::record) must take it instead.
    ///
    /// Equivalent to [`record`](Self::record) for that case, but needs no
    /// config, key or rng, so a busy rolling breaker records its commonest
    /// outcome cheaply. `window` must be the
    /// [`Rolling`](super::Tripping::Rolling) window of the config this
    /// state is used with.
    pub fn record_idle_success(
        &mut self,
        window: Duration,
        permit: Permit,
        now: Timestamp,
    ) -> bool {
        if permit.probe.is_some() || !self.success_only_counts() {
            return false;
        }
        // A permit of an earlier generation is ignored, as `record` does.
        if permit.generation == self.generation {
            self.window_mut().add(window, now, false);
        }
        true
    }

    #[doc(hidden)]
    /// Whether a plain success would only add to the rolling window: the
    /// state was made for rolling tripping (no custom policy) and is idle,
    /// so the success has no count to clear. While this holds, successes
    /// may be counted elsewhere and handed in later with
    /// [`add_window_successes`](Self::add_window_successes).
    pub fn success_only_counts(&self) -> bool {
        self.window.is_some() && !self.custom_policy && self.is_idle()
    }

    #[doc(hidden)]
    /// Counts `successes` plain successes in the rolling window's bucket of
    /// `at`: successes counted outside the state while
    /// [`success_only_counts`](Self::success_only_counts) held. Ignored if
    /// the breaker is no longer closed (opening clears the window anyway)
    /// or the state has no window; a bucket that has made way for a later
    /// one is out of the window already.
    pub fn add_window_successes(&mut self, window: Duration, at: Timestamp, successes: u64) {
        if self.status != BreakerStatus::Closed || successes == 0 {
            return;
        }
        if let Some(w) = self.window.as_deref_mut() {
            w.add_successes(window, at, u32::try_from(successes).unwrap_or(u32::MAX));
        }
    }

    #[doc(hidden)]
    /// When the rolling window's bucket holding `now` ends: until then,
    /// successes counted outside the state fall in that bucket.
    pub fn window_bucket_end(window: Duration, now: Timestamp) -> Timestamp {
        RollingWindow::bucket_end(window, now)
    }

    /// Gives back the probe slot of a call that will not report: its future
    /// was dropped, or its outcome was neutral and the caller chose not to
    /// record it. Counts nothing; a no-op for non-probe or stale permits.
    pub fn release(&mut self, permit: Permit) {
        if let Some(ticket) = permit.probe
            && permit.generation == self.generation
            && self.status == BreakerStatus::HalfOpen
        {
            self.round.release(ticket);
        }
    }

    fn record_closed(
        &mut self,
        cfg: &BreakerConfig,
        key: &str,
        outcome: &Outcome,
        now: Timestamp,
        rng: &mut fastrand::Rng,
    ) -> Option<Transition> {
        let verdict = outcome.effective_verdict();
        if verdict == Verdict::Success {
            self.consecutive_failures = 0;
            self.credential_failures = 0;
            self.breakdown.clear();
            match &cfg.tripping {
                Tripping::Consecutive { .. } => {}
                Tripping::Rolling { window, .. } => {
                    self.window_mut().add(*window, now, false);
                }
                Tripping::Custom(policy) => policy.on_success(key),
            }
            return None;
        }
        if !verdict.is_breaker_failure() {
            return None;
        }
        self.count_failure(verdict, outcome);
        let cause = outcome.attribution();

        // The rule hears every failure, credential ones included, so its
        // view of the key stays complete even when the credential threshold
        // is what trips.
        let n = self.consecutive_failures;
        let rule_trips = match &cfg.tripping {
            Tripping::Consecutive { threshold } => self.streak_trips(*threshold, cause),
            Tripping::Rolling {
                window,
                min_calls,
                failure_ratio,
            } => {
                let (calls, failures) = self.window_mut().record(*window, now, true);
                RollingWindow::trips(calls, failures, *min_calls, *failure_ratio).then(|| {
                    let window = human(*window);
                    format!(
                        "opened after {failures} of {calls} calls failed within {window} ({cause})"
                    )
                })
            }
            Tripping::Custom(policy) => policy.on_failure(key).then(|| {
                format!("opened by the tripping policy after {n} consecutive failures ({cause})")
            }),
        };

        let c = self.credential_failures;
        let (kind, reason) =
            if verdict == Verdict::Credential && c >= cfg.credential_threshold.max(1) {
                let reason = format!("opened after {c} consecutive credential failures ({cause})");
                (OpenKind::Credential, reason)
            } else {
                (self.streak_open_kind(), rule_trips?)
            };
        let cause = cause.to_owned();
        Some(
            self.trip(cfg, Some(key), kind, now, now, rng, reason)
                .with_cause(Some(cause)),
        )
    }

    fn record_probe(
        &mut self,
        cfg: &BreakerConfig,
        key: &str,
        permit: Permit,
        outcome: &Outcome,
        now: Timestamp,
        rng: &mut fastrand::Rng,
    ) -> Option<Transition> {
        let ticket = permit.probe?;
        // Taking the lease hands the slot back whatever the outcome; a lost
        // lease (expired, already reported, released) means the report is stale.
        if !self.round.take(ticket, now) {
            return None;
        }
        let verdict = outcome.effective_verdict();
        match verdict {
            Verdict::Success => self.round.success(),
            Verdict::Availability | Verdict::Credential => {
                self.round.failure();
                self.count_failure(verdict, outcome);
            }
            Verdict::Throttled | Verdict::Quota | Verdict::Request => return None,
        }
        let probes = cfg.probes();
        let (successes, failures) = (self.round.successes(), self.round.failures());
        match self.round.verdict(probes, cfg.required_successes()) {
            RoundVerdict::Pending => None,
            RoundVerdict::Close => {
                self.reset_closed(Some(cfg), Some(key), now);
                let reason = format!("closed after {successes} of {probes} probes succeeded");
                Some(self.transition(BreakerStatus::HalfOpen, now, reason))
            }
            RoundVerdict::Reopen => {
                let cause = outcome.attribution().to_owned();
                let reason =
                    format!("reopened after {failures} of {probes} probes failed ({cause})");
                let kind = if verdict == Verdict::Credential {
                    OpenKind::Credential
                } else {
                    OpenKind::Availability
                };
                self.reopens = self.reopens.saturating_add(1);
                // Counted from when the probe was sent: probes are spaced by
                // the cool-off, and a slow one does not stretch the spacing
                // (a probe sent just before a brownout ends would otherwise
                // hold the next one off by its own latency on top).
                let since = permit.admitted_at;
                let t = self.trip(cfg, Some(key), kind, since, now, rng, reason);
                Some(t.with_cause(Some(cause)))
            }
        }
    }

    /// Counts a failure in the streaks and the breakdown.
    fn count_failure(&mut self, verdict: Verdict, outcome: &Outcome) {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        if verdict == Verdict::Credential {
            self.credential_failures = self.credential_failures.saturating_add(1);
        }
        let cause = outcome.attribution();
        // Allocate the key only the first time a cause is seen.
        match self.breakdown.get_mut(cause) {
            Some(n) => *n = n.saturating_add(1),
            None => {
                self.breakdown.insert(cause.to_owned(), 1);
            }
        }
    }

    /// The reason a consecutive rule of `threshold` opens the breaker on
    /// the current streak, this replica's and the fleet's together; `None`
    /// while the streak is short of it.
    pub(super) fn streak_trips(&self, threshold: u32, cause: &str) -> Option<String> {
        let (n, fleet) = (self.consecutive_failures, self.fleet_failures);
        if n.saturating_add(fleet) < threshold.max(1) {
            return None;
        }
        let kind = self.streak_kind();
        Some(if fleet == 0 {
            format!("opened after {n} consecutive {kind} ({cause})")
        } else {
            format!(
                "opened after {n} consecutive {kind} here and {fleet} on other replicas ({cause})"
            )
        })
    }

    /// The cool-off a streak that trips the main rule opens with: a streak
    /// of rejected keys only is still a credential problem, so still the
    /// longer cool-off.
    pub(super) fn streak_open_kind(&self) -> OpenKind {
        if self.credential_failures == self.consecutive_failures {
            OpenKind::Credential
        } else {
            OpenKind::Availability
        }
    }

    /// "availability failures", "credential failures" or "failures", for
    /// the current streak.
    fn streak_kind(&self) -> &'static str {
        match self.credential_failures {
            0 => "availability failures",
            c if c == self.consecutive_failures => "credential failures",
            _ => "failures",
        }
    }

    fn window_mut(&mut self) -> &mut RollingWindow {
        // Created lazily in case the state was made under another config.
        self.window.get_or_insert_with(Box::default)
    }
}
