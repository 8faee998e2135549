//! One probe per failure domain per cool-off for the fleet: a lease in the
//! store, asked for just before this replica's cool-off ends, renewed while
//! its probe runs, given back (and said so) when no call comes to send it;
//! and the fleet's failed probes, so cool-offs grow as one breaker's would.

use std::time::Duration;

use levee_core::breaker::BreakerStatus;
use tokio::time::Instant;
use tower_levee::breaker::{FleetUpdate, MAX_ADOPTED_OPEN};

use super::{DomainKey, FleetTask, Outgoing};
use crate::notice::Notice;
use crate::policy::BreakerPolicy;
use crate::store::{Lease, Store, StoreError};

/// How long a replica holding the fleet's probe lease keeps it with no
/// probe in flight (granted, but no call came; or its probe was
/// cancelled): then it gives the probe back, and the lease, to a replica
/// with traffic.
const MAX_UNUSED: Duration = Duration::from_secs(10);

/// How long before a cool-off ends the fleet asks who probes: at least
/// this, or two store round trips, so the answer is in before a call
/// would wait for it.
const ASK_LEAD: Duration = Duration::from_millis(10);

/// A probe lease this replica holds.
#[derive(Debug)]
pub(crate) struct HeldLease {
    /// When a probe last ran (or the lease was taken).
    busy: Instant,
}

/// What to do with a lease the verdict ended.
#[derive(Debug)]
pub(crate) struct Release {
    key: String,
    keep: Option<Duration>,
}

impl<S: Store> FleetTask<S> {
    /// Who probes `key`: this replica if it takes the lease (or the store
    /// fails it: then it probes alone), or the holder; told to the layer.
    pub(super) async fn ask(&mut self, key: DomainKey) -> Result<(), StoreError> {
        self.cool_offs.remove(&key);
        let Some(ttl) = self.settings.probe_lease else {
            self.grant(&key);
            return Ok(());
        };
        if self.leases.contains_key(&key) {
            self.grant(&key);
            return Ok(());
        }
        let lease = self.settings.keys.lease(&key.0, &key.1);
        let answer = self.store.lease(&lease, &self.settings.replica, ttl).await;
        match answer {
            Ok(Lease::Taken) => {
                let busy = Instant::now();
                self.leases.insert(key.clone(), HeldLease { busy });
                if !self.grant(&key) {
                    // Closed since: nothing to probe.
                    self.leases.remove(&key);
                    let none = Release {
                        key: lease,
                        keep: None,
                    };
                    self.release(none).await?;
                }
            }
            Ok(Lease::Held { ttl, .. }) => {
                // Refuse until just past the lease's end, and ask again as
                // it ends: a lapsed lease is taken over then.
                let wait = ttl + self.lead();
                self.hold_probe(&key, wait);
            }
            Err(e) => {
                self.grant(&key);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Holds this replica's breaker of `key` open `wait` more (another
    /// replica probes, or has just found the domain failing), and asks
    /// again when that ends if it is still open. Whether the hold moved
    /// the breaker's deadline.
    fn hold_probe(&mut self, key: &DomainKey, wait: Duration) -> bool {
        let Some(handle) = self.layers.get(&key.0) else {
            return false;
        };
        let scope = key.1.as_str();
        let held = handle.adopt(FleetUpdate::ProbeHeld { scope, wait });
        if handle.breaker_status(scope) == Some(BreakerStatus::Open) {
            self.arm(key.clone(), Instant::now() + wait);
        }
        held
    }

    /// Asks who probes each domain whose cool-off ends now.
    pub(super) async fn ask_due(&mut self) -> Result<(), StoreError> {
        let now = Instant::now();
        let lead = self.lead();
        let due: Vec<DomainKey> = self
            .cool_offs
            .iter()
            .filter(|(_, until)| until.checked_sub(lead).is_none_or(|at| at <= now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in due {
            self.ask(key).await?;
        }
        Ok(())
    }

    /// When the next ask is due.
    pub(super) fn next_ask(&self) -> Instant {
        let lead = self.lead();
        self.cool_offs
            .values()
            .min()
            .map_or_else(Instant::now, |until| {
                until.checked_sub(lead).unwrap_or_else(Instant::now)
            })
    }

    fn lead(&self) -> Duration {
        (self.round_trip * 2).max(ASK_LEAD)
    }

    /// Remembers that this replica's breaker of `key` cools off until `until`.
    pub(super) fn arm(&mut self, key: DomainKey, until: Instant) {
        if self.settings.probe_lease.is_some() {
            let at = self.cool_offs.entry(key).or_insert(until);
            *at = (*at).max(until);
        }
    }

    /// This replica probes `key` (it holds the lease, or the store is
    /// away), its cool-off growth the fleet's. Whether its breaker is open
    /// and took the grant.
    pub(super) fn grant(&mut self, key: &DomainKey) -> bool {
        let reopens = self.growth.get(key).map_or(0, |(n, _)| *n);
        let scope = key.1.as_str();
        self.layers
            .get(&key.0)
            .is_some_and(|handle| handle.adopt(FleetUpdate::ProbeGranted { scope, reopens }))
    }

    /// This replica's probe of `key` is under way.
    pub(super) fn probing(&mut self, key: &DomainKey) {
        if let Some(held) = self.leases.get_mut(key) {
            held.busy = Instant::now();
        }
    }

    /// A verdict of this replica's (a recovery, a close, or a failed probe
    /// reopening until `reopened_until`) ends its lease of `key`: what to
    /// tell the store. After a failure the lease stays through the new
    /// cool-off, held by no one, so no replica probes again within it.
    pub(super) fn end_lease(
        &mut self,
        key: &DomainKey,
        reopened_until: Option<Instant>,
    ) -> Option<Release> {
        self.leases.remove(key)?;
        let keep = reopened_until
            .map(|until| until.saturating_duration_since(Instant::now()))
            .filter(|keep| !keep.is_zero());
        Some(Release {
            key: self.settings.keys.lease(&key.0, &key.1),
            keep,
        })
    }

    /// Tells the store a lease is ended.
    pub(super) async fn release(&mut self, release: Release) -> Result<(), StoreError> {
        let Release { key, keep } = release;
        self.store.release(&key, &self.settings.replica, keep).await
    }

    /// A reopen carries the fleet's failed probes since the domain last
    /// recovered; a recovery or a close forgets them.
    pub(super) fn count_probes(&mut self, mut d: super::Decision) -> super::Decision {
        let key = (d.layer.to_string(), d.scope.clone());
        if d.reopen {
            let (growth, at) = self.growth.entry(key).or_insert((0, Instant::now()));
            *growth = growth.saturating_add(1);
            *at = Instant::now();
            d.count = *growth;
        } else if d.kind.ends_open() {
            self.growth.remove(&key);
        }
        d
    }

    /// Another replica's probe of the domain `n` names failed: no replica
    /// probes again in its cool-off, and the next prober's grows from it.
    /// (Under [`BreakerPolicy::Local`] every replica probes for itself.)
    pub(super) fn probe_failed(&mut self, n: &Notice, now: Instant) {
        if self.settings.probe_lease.is_none() || self.settings.policy == BreakerPolicy::Local {
            return;
        }
        let key = (n.layer.clone(), n.scope.clone());
        let (growth, at) = self.growth.entry(key.clone()).or_insert((0, now));
        *growth = (*growth).max(n.count);
        *at = now;
        if self.hold_probe(&key, n.wait) {
            self.status.adopted();
        }
    }

    /// A domain recovered, or an operator closed it: its growth and this
    /// replica's cool-off of it are over.
    pub(super) fn domain_recovered(&mut self, n: &Notice) {
        let key = (n.layer.clone(), n.scope.clone());
        self.growth.remove(&key);
        self.cool_offs.remove(&key);
    }

    /// Growth not heard of for the longest cool-off there is belongs to an
    /// outage whose recovery notice was lost.
    pub(super) fn forget_old_growth(&mut self, now: Instant) {
        self.growth
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < MAX_ADOPTED_OPEN);
    }

    /// A replica gave back the lease of the domain `n` names: if this one
    /// waits on it (held, a cool-off armed), it asks at once.
    pub(super) fn lease_freed(&mut self, n: &Notice, now: Instant) {
        let key = (n.layer.clone(), n.scope.clone());
        if let Some(at) = self.cool_offs.get_mut(&key) {
            *at = now;
        }
    }

    /// Renews the leases held whose probe runs or may still come; gives
    /// back those with no probe in flight for too long (the grant first,
    /// then the lease, so two probes never run at once) and those whose
    /// breaker closed by other means.
    pub(super) async fn renew(&mut self) -> Result<(), StoreError> {
        let Some(ttl) = self.settings.probe_lease else {
            return Ok(());
        };
        let now = Instant::now();
        let keys: Vec<DomainKey> = self.leases.keys().cloned().collect();
        for key in keys {
            let Some(handle) = self.layers.get(&key.0).cloned() else {
                continue;
            };
            let scope = key.1.as_str();
            let lease = self.settings.keys.lease(&key.0, &key.1);
            if !matches!(
                handle.breaker_status(scope),
                Some(BreakerStatus::Open | BreakerStatus::HalfOpen)
            ) {
                self.leases.remove(&key);
                self.release(Release {
                    key: lease,
                    keep: None,
                })
                .await?;
                continue;
            }
            if handle.probes_in_flight(scope) > 0 {
                self.probing(&key);
            }
            let idle = self
                .leases
                .get(&key)
                .is_some_and(|held| now.saturating_duration_since(held.busy) >= MAX_UNUSED);
            let revoke = FleetUpdate::ProbeRevoked { scope, wait: ttl };
            if idle && handle.adopt(revoke) {
                self.leases.remove(&key);
                self.arm(key.clone(), now + ttl);
                self.release(Release {
                    key: lease,
                    keep: None,
                })
                .await?;
                let freed = Notice::lease_freed(&key.0, &key.1, &self.settings.replica);
                let outgoing = Outgoing::Remove {
                    keys: Vec::new(),
                    notice: freed,
                };
                self.send(outgoing).await?;
                continue;
            }
            let renewed = self
                .store
                .lease(&lease, &self.settings.replica, ttl)
                .await?;
            if renewed != Lease::Taken {
                // Lost (the store was slower than the lease's life): the
                // new holder speaks for the fleet. A probe of this
                // replica's already in flight runs on; one not yet sent
                // is taken back.
                self.leases.remove(&key);
                if handle.adopt(revoke) {
                    self.arm(key, now + ttl);
                }
            }
        }
        Ok(())
    }
}
