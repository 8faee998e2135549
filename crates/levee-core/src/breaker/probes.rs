//! The half-open round: a few leased probe slots and their tally.

use std::time::Duration;

use crate::clock::Timestamp;

/// The longest `retry_after` given to a caller turned away because every
/// probe slot is taken. A probe usually answers in seconds, long before its
/// lease could expire, so pointing callers at the lease expiry (up to
/// `probe_timeout`, a minute by default) would keep them away far longer than
/// needed.
pub const HALF_OPEN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How a round ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RoundVerdict {
    /// Waiting for more probes to report.
    Pending,
    /// Enough probes succeeded.
    Close,
    /// Enough probes failed that the success ratio can no longer be met.
    Reopen,
}

#[derive(Clone, Copy, Debug)]
struct Lease {
    ticket: u32,
    expires: Timestamp,
}

/// The probes of one half-open round. At most `probes` slots are in use:
/// `in flight + reported <= probes`. A slot handed back (dropped future,
/// neutral outcome) or reclaimed (expired lease) is not a report and can be
/// leased again.
#[derive(Clone, Debug, Default)]
pub(crate) struct Round {
    leases: Vec<Lease>,
    next_ticket: u32,
    successes: u32,
    failures: u32,
}

impl Round {
    /// Leases a slot, or says how long to wait for one.
    pub(crate) fn lease(
        &mut self,
        probes: u32,
        now: Timestamp,
        timeout: Duration,
    ) -> Result<u32, Duration> {
        self.leases.retain(|l| now < l.expires);
        if self.in_flight() + self.reported() >= probes {
            let wait = self
                .leases
                .iter()
                .map(|l| l.expires.saturating_duration_since(now))
                .min()
                .unwrap_or(HALF_OPEN_RETRY_AFTER);
            return Err(wait.min(HALF_OPEN_RETRY_AFTER));
        }
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1);
        self.leases.push(Lease {
            ticket,
            expires: now.saturating_add(timeout),
        });
        Ok(ticket)
    }

    /// Ends the lease `ticket` so its outcome can be tallied. False if the
    /// lease is gone: handed back, already reported, or expired (a probe that
    /// outlived its lease no longer speaks for the round).
    pub(crate) fn take(&mut self, ticket: u32, now: Timestamp) -> bool {
        match self.leases.iter().position(|l| l.ticket == ticket) {
            Some(i) => now < self.leases.swap_remove(i).expires,
            None => false,
        }
    }

    /// Hands the slot of `ticket` back without a report.
    pub(crate) fn release(&mut self, ticket: u32) {
        self.leases.retain(|l| l.ticket != ticket);
    }

    /// Tallies a successful probe.
    pub(crate) fn success(&mut self) {
        self.successes += 1;
    }

    /// Tallies a failed probe.
    pub(crate) fn failure(&mut self) {
        self.failures += 1;
    }

    /// Whether the round is decided.
    ///
    /// It closes only when all `probes` have reported and `required`
    /// succeeded; it reopens as soon as the failures make that impossible
    /// (waiting for the rest would only send more trial traffic to a
    /// provider already known to be failing).
    pub(crate) fn verdict(&self, probes: u32, required: u32) -> RoundVerdict {
        if self.failures > probes.saturating_sub(required) {
            RoundVerdict::Reopen
        } else if self.reported() >= probes {
            RoundVerdict::Close
        } else {
            RoundVerdict::Pending
        }
    }

    /// Probes in flight.
    pub(crate) fn in_flight(&self) -> u32 {
        u32::try_from(self.leases.len()).unwrap_or(u32::MAX)
    }

    /// Probes that reported a success or a failure.
    pub(crate) fn reported(&self) -> u32 {
        self.successes + self.failures
    }

    /// Successful probes so far.
    pub(crate) fn successes(&self) -> u32 {
        self.successes
    }

    /// Failed probes so far.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Starts over, keeping the ticket counter so old tickets stay unique.
    pub(crate) fn clear(&mut self) {
        // Free the buffer: most keys never half-open again.
        self.leases = Vec::new();
        self.successes = 0;
        self.failures = 0;
    }
}
