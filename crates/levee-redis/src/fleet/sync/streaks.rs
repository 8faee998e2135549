//! Failures in a row counted across the fleet: each replica's streak of a
//! failure domain, stored under its own key for as long as it counts, and
//! the others' sum given to this replica's breaker.

use tokio::time::Instant;
use tower_levee::breaker::FleetUpdate;

use super::{DomainKey, FleetTask, Outgoing};
use crate::notice::{Kind, Notice};
use crate::store::Store;

impl<S: Store> FleetTask<S> {
    /// Records this replica's streak of `scope`; what tells the store, if
    /// sharing.
    pub(super) fn own_streak(
        &mut self,
        layer: &str,
        scope: &str,
        failures: u32,
    ) -> Option<Outgoing> {
        let memory = self.settings.failure_memory?;
        let key = (layer.to_owned(), scope.to_owned());
        let replica = self.settings.replica.clone();
        let by_replica = self.streaks.entry(key.clone()).or_default();
        let had = by_replica.remove(&replica).is_some_and(|(n, _)| n > 0);
        if failures > 0 {
            by_replica.insert(replica.clone(), (failures, Instant::now() + memory));
        }
        let notice = Notice {
            kind: Kind::Failing,
            layer: layer.to_owned(),
            scope: scope.to_owned(),
            replica,
            wait: memory,
            reason: String::new(),
            manual: false,
            count: failures,
        };
        // The other replicas' count joins once this replica fails too.
        self.tell_failing(Instant::now(), Some(&key));
        let keys = &self.settings.keys;
        if failures > 0 {
            let key = keys.of(&notice)?;
            Some(Outgoing::Replace {
                key,
                notice,
                ttl: memory,
            })
        } else if had {
            let keys = keys.ended_by(&notice, std::iter::empty());
            Some(Outgoing::Remove { keys, notice })
        } else {
            None
        }
    }

    /// Records another replica's streak (its notice, or its key read back
    /// with the time it has left).
    pub(super) fn their_streak(&mut self, n: &Notice, now: Instant) {
        if self.settings.failure_memory.is_none() {
            return;
        }
        let key = (n.layer.clone(), n.scope.clone());
        let by_replica = self.streaks.entry(key.clone()).or_default();
        if n.count == 0 {
            by_replica.remove(&n.replica);
        } else {
            by_replica.insert(n.replica.clone(), (n.count, now + n.wait));
        }
        self.tell_failing(now, Some(&key));
    }

    /// Gives the layer of `only` (or of every domain) the other replicas'
    /// failures in a row: their live streaks summed, once the breaker
    /// policy's quorum of replicas fails. This replica counts itself toward
    /// the quorum: its breaker adds the others' failures to a streak of its
    /// own only. Told each time, not only on a change: a breaker forgets
    /// the count when it changes state, or when its idle domain is evicted.
    pub(super) fn tell_failing(&mut self, now: Instant, only: Option<&DomainKey>) {
        let me = self.settings.replica.as_str();
        let needed = self.settings.policy.needed();
        let mut tell = Vec::new();
        self.streaks.retain(|key, by_replica| {
            by_replica.retain(|_, (_, until)| *until > now);
            if only.is_none_or(|k| k == key) {
                let others = by_replica
                    .iter()
                    .filter(|(replica, (n, _))| replica.as_str() != me && *n > 0);
                let (replicas, failures) = others.fold((0u32, 0u32), |(r, f), (_, (n, _))| {
                    (r + 1, f.saturating_add(*n))
                });
                let failures = match needed {
                    Some(needed) if replicas + 1 >= needed => failures,
                    _ => 0,
                };
                tell.push((key.clone(), failures));
            }
            !by_replica.is_empty()
        });
        // Domains no streak remains of: their count is over too.
        for key in &self.told_failing {
            if only.is_none_or(|k| k == key) && !self.streaks.contains_key(key) {
                tell.push((key.clone(), 0));
            }
        }
        for (key, failures) in tell {
            let told_before = self.told_failing.contains(&key);
            if failures == 0 && !told_before {
                continue;
            }
            if let Some(handle) = self.layers.get(&key.0) {
                let scope = key.1.as_str();
                handle.adopt(FleetUpdate::Failing { scope, failures });
            }
            if failures == 0 {
                self.told_failing.remove(&key);
            } else {
                self.told_failing.insert(key);
            }
        }
    }
}
