//! The fleet's task: tells the store what this replica decided, applies
//! what the others decided, reads the store back periodically, and
//! reconnects when the store is lost. Never on a request's path.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tower_levee::breaker::{BreakerHandle, FleetUpdate};

use super::local::{Decision, Message};
use super::status::StatusCell;
use crate::keys::Keys;
use crate::notice::{DecodeError, Kind, MAX_WAIT, Notice};
use crate::policy::{BreakerPolicy, Reports};
use crate::store::{Notices, Store, StoreError};

mod probes;
mod streaks;

/// How long past a reporting replica's cool-off its report stands: the
/// time it has to send its probe (its next call after the cool-off). While
/// a report stands, replicas that adopted the open send no probes of
/// their own: the reporter's probe speaks for the fleet, its recovery ends
/// their cool-offs at once, and its failure reopens them. A reporter with
/// no call in that time leaves the probing to whoever adopted.
pub(crate) const PROBE_GRACE: Duration = Duration::from_secs(10);

/// What the task runs with.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) replica: String,
    pub(crate) keys: Keys,
    pub(crate) policy: BreakerPolicy,
    pub(crate) sweep_every: Duration,
    pub(crate) backoff: (Duration, Duration),
    pub(crate) probe_lease: Option<Duration>,
    pub(crate) failure_memory: Option<Duration>,
    pub(crate) share_pacing: bool,
}

/// How many reads of the store a replica's heartbeat outlives: a replica
/// gone is no longer counted after about this many sweeps.
const HEARTBEAT_SWEEPS: u32 = 3;

/// A failure domain of one layer: `(layer, scope)`.
pub(crate) type DomainKey = (String, String);

/// One of this replica's lasting decisions, kept to publish again after
/// the store comes back.
#[derive(Debug)]
struct Held {
    notice: Notice,
    until: Option<Instant>,
}

/// What to tell the store.
#[derive(Debug)]
enum Outgoing {
    /// Store the decision held under `key`, and notify.
    Put { key: String, notice: Notice },
    /// Store `notice` under `key` for `ttl` whatever it held, and notify.
    Replace {
        key: String,
        notice: Notice,
        ttl: Duration,
    },
    /// Remove the keys a decision ends, and notify.
    Remove { keys: Vec<String>, notice: Notice },
}

/// The fleet's background task: one per [`Fleet`](super::Fleet) spawned.
pub(crate) struct FleetTask<S> {
    store: S,
    settings: Settings,
    layers: HashMap<String, BreakerHandle>,
    decisions: mpsc::Receiver<Message>,
    status: Arc<StatusCell>,
    /// This replica's lasting decisions, by key.
    held: HashMap<String, Held>,
    /// Removals the store missed while it was away, sent when it is back.
    pending: Vec<Outgoing>,
    reports: Reports,
    /// The last store round trip: subtracted from every wait sent, so the
    /// time a notice spends travelling never stretches a wait.
    round_trip: Duration,
    rng: fastrand::Rng,
    /// Every replica's failures in a row, by domain: until when each
    /// counts. This replica's own are kept here too.
    streaks: HashMap<DomainKey, HashMap<String, (u32, Instant)>>,
    /// Domains whose layer was last told other replicas fail (a count it
    /// must be told is over).
    told_failing: HashSet<DomainKey>,
    /// The probe leases this replica holds.
    leases: HashMap<DomainKey, probes::HeldLease>,
    /// The fleet's failed probes since each domain last recovered, and
    /// when that was last heard.
    growth: HashMap<DomainKey, (u32, Instant)>,
    /// When each open breaker here ends its cool-off, as far as this task
    /// knows: it asks who probes just before.
    cool_offs: HashMap<DomainKey, Instant>,
    /// The live replicas last told to the layers (sharing the pacing).
    members: u32,
}

impl<S: Store> FleetTask<S> {
    pub(crate) fn new(
        store: S,
        settings: Settings,
        layers: HashMap<String, BreakerHandle>,
        decisions: mpsc::Receiver<Message>,
        status: Arc<StatusCell>,
    ) -> Self {
        let seed = settings
            .replica
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        FleetTask {
            store,
            settings,
            layers,
            decisions,
            status,
            held: HashMap::new(),
            pending: Vec::new(),
            reports: Reports::default(),
            round_trip: Duration::ZERO,
            rng: fastrand::Rng::with_seed(seed),
            streaks: HashMap::new(),
            told_failing: HashSet::new(),
            leases: HashMap::new(),
            growth: HashMap::new(),
            cool_offs: HashMap::new(),
            members: 1,
        }
    }

    /// Runs until the fleet's handle aborts it (the layers it holds keep
    /// the queue of decisions open).
    pub(crate) async fn run(mut self) {
        let (min, max) = self.settings.backoff;
        let mut backoff = min;
        loop {
            let listened = self.store.listen(self.settings.keys.space()).await;
            let lost = match listened {
                Ok(notices) => match self.connected(notices).await {
                    Ok(()) => return,
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if self.status.disconnected(&lost) {
                backoff = min;
            }
            // The store's leases lapse on their own; one held here must be
            // asked for again, not trusted, when the store is back. Without
            // the store, this replica paces alone.
            self.leases.clear();
            self.tell_members(1);
            // Equal jitter: replicas that lost the store together do not
            // all come back in the same instant.
            let wait = backoff / 2 + backoff.mul_f64(self.rng.f64() / 2.0);
            if !self.offline_for(wait).await {
                return;
            }
            backoff = (backoff * 2).min(max);
        }
    }

    /// While the store is away: keeps what this replica decides, to publish
    /// when it is back. `false` once every layer is gone.
    async fn offline_for(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                message = self.decisions.recv() => match message {
                    Some(message) => {
                        // Offline: nothing reaches the store, so nothing fails.
                        let _ = self.handle(message, false).await;
                    }
                    None => return false,
                },
                () = &mut deadline => return true,
            }
        }
    }

    /// Connected: republish, read the store, then serve until it is lost
    /// (`Err`) or every layer is gone (`Ok`).
    async fn connected(&mut self, mut notices: Notices) -> Result<(), StoreError> {
        self.republish().await?;
        self.sweep().await?;
        self.status.connected();
        let mut sweep = tokio::time::interval(self.settings.sweep_every);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        sweep.reset();
        // Renewals of the probe leases held: a third of their life apart.
        let lease = self
            .settings
            .probe_lease
            .unwrap_or(Duration::from_secs(3600));
        let mut renew = tokio::time::interval(lease / 3);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.reset();
        loop {
            let (next_ask, asking) = (self.next_ask(), !self.cool_offs.is_empty());
            tokio::select! {
                message = self.decisions.recv() => {
                    let Some(message) = message else { return Ok(()) };
                    self.handle(message, true).await?;
                }
                _ = renew.tick(), if !self.leases.is_empty() => self.renew().await?,
                () = sleep_until(next_ask), if asking => {
                    self.ask_due().await?;
                }
                bytes = notices.recv() => {
                    let Some(bytes) = bytes else {
                        return Err(StoreError::new("the notice subscription ended"));
                    };
                    match Notice::decode(&bytes) {
                        Ok(notice) => {
                            let now = Instant::now();
                            self.apply(&notice, now, now);
                        }
                        Err(e) => self.status.decode_error(&e),
                    }
                }
                _ = sweep.tick() => self.sweep().await?,
            }
        }
    }

    /// Records a decision of this replica's, and what tells the store.
    fn hold(&mut self, d: Decision) -> Outgoing {
        let notice = Notice {
            kind: d.kind,
            layer: d.layer.to_string(),
            scope: d.scope,
            replica: self.settings.replica.clone(),
            wait: Duration::ZERO,
            reason: d.reason,
            manual: d.manual,
            count: d.count,
        };
        let keys = &self.settings.keys;
        if let Some(key) = keys.of(&notice) {
            let held = Held {
                notice: notice.clone(),
                until: d.until,
            };
            self.held.insert(key.clone(), held);
            return Outgoing::Put { key, notice };
        }
        // An operator's close ends every replica's report of the domain.
        let reporters = match notice.kind {
            Kind::Closed => self.reports.clear(&notice.layer, &notice.scope),
            _ => Vec::new(),
        };
        let ended = keys.ended_by(&notice, reporters.iter().map(String::as_str));
        for key in &ended {
            self.held.remove(key);
        }
        Outgoing::Remove {
            keys: ended,
            notice,
        }
    }

    /// Tells the store; a decision already over is not told, and a removal
    /// the store missed is kept for when it is back.
    async fn send(&mut self, outgoing: Outgoing) -> Result<(), StoreError> {
        let space = self.settings.keys.space().clone();
        let started = Instant::now();
        let sent = match outgoing {
            Outgoing::Put { key, mut notice } => {
                let Some(held) = self.held.get(&key) else {
                    return Ok(());
                };
                let ttl = match held.until {
                    Some(until) => {
                        let left = until
                            .saturating_duration_since(started)
                            .saturating_sub(self.round_trip)
                            .min(MAX_WAIT);
                        // A reopen is published however little is left
                        // of it: it carries the fleet's failed probes.
                        if left < Duration::from_millis(1) && notice.count == 0 {
                            return Ok(());
                        }
                        Some(left.max(Duration::from_millis(1)))
                    }
                    None => None,
                };
                notice.wait = ttl.unwrap_or_default();
                self.store.put(&space, &key, &notice.encode(), ttl).await
            }
            Outgoing::Replace {
                key,
                mut notice,
                ttl,
            } => {
                notice.wait = ttl;
                self.store
                    .replace(&space, &key, &notice.encode(), ttl)
                    .await
            }
            Outgoing::Remove { keys, notice } => {
                let result = self.store.remove(&space, &keys, &notice.encode()).await;
                if result.is_err() {
                    self.pending.push(Outgoing::Remove { keys, notice });
                }
                result
            }
        };
        sent?;
        self.round_trip = started.elapsed();
        self.status.published();
        Ok(())
    }

    /// Forgets this replica's held decisions that another replica's close
    /// or unpark ended.
    fn forget(&mut self, n: &Notice) {
        let mine = Notice {
            replica: self.settings.replica.clone(),
            ..n.clone()
        };
        for key in self.settings.keys.ended_by(&mine, std::iter::empty()) {
            self.held.remove(&key);
        }
    }

    /// After the store was away: the removals it missed, then every lasting
    /// decision still in force.
    async fn republish(&mut self) -> Result<(), StoreError> {
        let now = Instant::now();
        self.held.retain(|_, h| h.until.is_none_or(|u| u > now));
        let mut pending = std::mem::take(&mut self.pending).into_iter();
        while let Some(removal) = pending.next() {
            if let Err(e) = self.send(removal).await {
                // `send` kept the one that failed; keep the rest after it.
                self.pending.extend(pending);
                return Err(e);
            }
        }
        let lasting: Vec<Outgoing> = self
            .held
            .iter()
            .map(|(key, h)| Outgoing::Put {
                key: key.clone(),
                notice: h.notice.clone(),
            })
            .collect();
        for outgoing in lasting {
            self.send(outgoing).await?;
        }
        Ok(())
    }

    /// Reads every decision in the store: what a lost notice would have
    /// said, and which breaker reports still stand.
    async fn sweep(&mut self) -> Result<(), StoreError> {
        if self.settings.share_pacing {
            // This replica's heartbeat, before the read counts it.
            let ttl = self.settings.sweep_every * HEARTBEAT_SWEEPS;
            let notice = Notice::member(&self.settings.replica, ttl);
            if let Some(key) = self.settings.keys.of(&notice) {
                let space = self.settings.keys.space().clone();
                self.store
                    .replace(&space, &key, &notice.encode(), ttl)
                    .await?;
            }
        }
        let stored = self.store.scan(self.settings.keys.space()).await?;
        let now = Instant::now();
        let mut members = 0u32;
        // This replica's own decisions that ended need no republishing.
        self.held.retain(|_, h| h.until.is_none_or(|u| u > now));
        let mut seen = HashSet::new();
        // Other replicas' streaks are read afresh: a lost notice that ended
        // one must not keep it counting.
        let me = self.settings.replica.clone();
        for by_replica in self.streaks.values_mut() {
            by_replica.retain(|replica, _| *replica == me);
        }
        for s in stored {
            let mut notice = match Notice::decode(&s.value) {
                Ok(n) => n,
                Err(e) => {
                    self.status.decode_error(&e);
                    continue;
                }
            };
            // The store's own count of the time left: no replica's clock.
            // What it counted down since the decision was sent is the
            // decision's age.
            let mut age = Duration::ZERO;
            match (notice.kind, s.ttl) {
                (Kind::Member, Some(_)) => {
                    members = members.saturating_add(1);
                    continue;
                }
                (Kind::Gated | Kind::Parked | Kind::Opened | Kind::Failing, Some(ttl)) => {
                    age = notice.wait.saturating_sub(ttl);
                    notice.wait = ttl.min(MAX_WAIT);
                }
                (Kind::Isolated, None) => {}
                (kind, ttl) => {
                    self.status.decode_error(&DecodeError::expiry(kind, ttl));
                    continue;
                }
            }
            if notice.kind == Kind::Opened {
                seen.insert((
                    notice.layer.clone(),
                    notice.scope.clone(),
                    notice.replica.clone(),
                ));
            }
            self.apply(&notice, now.checked_sub(age).unwrap_or(now), now);
        }
        self.reports.retain_seen(&seen, now, PROBE_GRACE, MAX_WAIT);
        if self.settings.share_pacing {
            self.tell_members(members.max(1));
        }
        self.tell_failing(now, None);
        self.forget_old_growth(now);
        Ok(())
    }

    /// Tells every layer how many replicas share the providers' limits,
    /// if that changed.
    fn tell_members(&mut self, count: u32) {
        if count == self.members {
            return;
        }
        self.members = count;
        self.status.members(count);
        for handle in self.layers.values() {
            handle.adopt(FleetUpdate::Replicas { count });
        }
    }

    /// Handles one message from this replica's layers, the store reachable
    /// (`online`) or not: one path for both, so nothing the store missed
    /// is forgotten and nothing stale is trusted when it is back.
    async fn handle(&mut self, message: Message, online: bool) -> Result<(), StoreError> {
        match message {
            Message::Decision(d) => self.decided(d, online).await,
            Message::Probing { layer, scope } => {
                self.probing(&(layer.to_string(), scope));
                Ok(())
            }
            Message::Streak {
                layer,
                scope,
                failures,
            } => {
                let outgoing = self.own_streak(&layer, &scope, failures);
                self.deliver(outgoing, online).await
            }
            Message::ProbeWanted { layer, scope } => {
                let key = (layer.to_string(), scope);
                if online {
                    self.ask(key).await
                } else {
                    // No store to ask: this replica probes alone.
                    self.cool_offs.remove(&key);
                    self.grant(&key);
                    Ok(())
                }
            }
        }
    }

    /// One of this replica's decisions: held, told, and what it ends.
    async fn decided(&mut self, d: Decision, online: bool) -> Result<(), StoreError> {
        let key = (d.layer.to_string(), d.scope.clone());
        let recovered = d.kind.ends_open();
        let verdict = recovered || d.reopen;
        // Bookkeeping first, so a store that fails below leaves none stale.
        if verdict {
            self.cool_offs.remove(&key);
        }
        if let (Kind::Opened, Some(until)) = (d.kind, d.until) {
            self.arm(key.clone(), until);
        }
        let lease = verdict.then(|| self.end_lease(&key, d.reopen.then_some(d.until).flatten()));
        let d = self.count_probes(d);
        // The decision first: the others wait on it.
        let outgoing = self.hold(d);
        self.deliver(Some(outgoing), online).await?;
        if recovered {
            // Its streak ended with the breaker's recovery; the others'
            // streaks count toward its next one.
            let outgoing = self.own_streak(&key.0, &key.1, 0);
            self.deliver(outgoing, online).await?;
            self.tell_failing(Instant::now(), Some(&key));
        }
        match lease.flatten() {
            Some(release) if online => self.release(release).await,
            _ => Ok(()),
        }
    }

    /// Tells the store if it is reachable; if not, keeps a removal for when
    /// it is back (a lasting decision is republished from `held`, and a
    /// streak written later replaces any it missed).
    async fn deliver(
        &mut self,
        outgoing: Option<Outgoing>,
        online: bool,
    ) -> Result<(), StoreError> {
        match (outgoing, online) {
            (Some(outgoing), true) => self.send(outgoing).await,
            (Some(removal @ Outgoing::Remove { .. }), false) => {
                self.pending.push(removal);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Applies another replica's decision, made at `made_at`, to the layer
    /// it names.
    fn apply(&mut self, n: &Notice, made_at: Instant, now: Instant) {
        if n.replica == self.settings.replica {
            return;
        }
        let Some(handle) = self.layers.get(&n.layer).cloned() else {
            return;
        };
        let scope = n.scope.as_str();
        let changed = match n.kind {
            Kind::Gated => handle.adopt(FleetUpdate::Gated {
                scope,
                wait: n.wait,
                reason: &n.reason,
            }),
            Kind::Parked => handle.adopt(FleetUpdate::Parked {
                scope,
                wait: n.wait,
                reason: &n.reason,
            }),
            Kind::Opened if n.manual => {
                self.reports.by_hand(&n.layer, scope, &n.replica);
                let adopted = handle.adopt(FleetUpdate::Opened {
                    scope,
                    wait: n.wait,
                    reason: &format!("opened by hand on {}", n.replica),
                });
                if adopted {
                    self.arm((n.layer.clone(), n.scope.clone()), now + n.wait);
                }
                adopted
            }
            Kind::Opened => {
                if n.count > 0 {
                    self.probe_failed(n, now);
                }
                let Some(needed) = self.settings.policy.needed() else {
                    return;
                };
                let until = now + n.wait + PROBE_GRACE;
                let Some((count, until)) = self
                    .reports
                    .report(&n.layer, scope, &n.replica, made_at, until, &n.reason, now)
                else {
                    return;
                };
                // Every report counts afresh: one replica whose path is
                // broken never holds the fleet open once the others have
                // recovered.
                if count < needed {
                    return;
                }
                let reason = if count == 1 {
                    format!("{} reports it open ({})", n.replica, n.reason)
                } else {
                    format!("{count} replicas report it open ({})", n.reason)
                };
                let wait = until.saturating_duration_since(now);
                let adopted = handle.adopt(FleetUpdate::Opened {
                    scope,
                    wait,
                    reason: &reason,
                });
                if adopted {
                    self.arm((n.layer.clone(), n.scope.clone()), now + wait);
                }
                adopted
            }
            Kind::Failing => {
                self.their_streak(n, now);
                return;
            }
            Kind::LeaseFreed => {
                self.lease_freed(n, now);
                return;
            }
            // Counted when the store is read: see `sweep`.
            Kind::Member => return,
            Kind::Isolated => handle.adopt(FleetUpdate::Isolated { scope }),
            Kind::Recovered => {
                self.domain_recovered(n);
                self.reports.recovered(&n.layer, scope, now);
                if self.settings.policy == BreakerPolicy::Local {
                    return;
                }
                handle.adopt(FleetUpdate::Recovered { scope })
            }
            Kind::Closed => {
                self.domain_recovered(n);
                self.reports.clear(&n.layer, scope);
                // An operator's close ends this replica's own open or
                // isolation too: never publish it again.
                self.forget(n);
                handle.adopt(FleetUpdate::Closed { scope })
            }
            Kind::Unparked => {
                self.forget(n);
                handle.adopt(FleetUpdate::Unparked { scope })
            }
        };
        if changed {
            self.status.adopted();
        }
    }
}
