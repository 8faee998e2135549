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
use crate::store::{Lease, Notices, Store, StoreError};

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
}

/// The longest a probe holds the fleet's lease: a holder that stays
/// half-open longer (its probe lost, no call since) lets it lapse, and
/// another replica probes.
const MAX_PROBE_HOLD: Duration = Duration::from_secs(60);

/// A failure domain of one layer: `(layer, scope)`.
type DomainKey = (String, String);

/// How long a replica granted the fleet's probe ahead of its cool-off's
/// end keeps the lease without sending it (no call came): then it gives
/// the grant back, and the lease, to a replica with traffic.
const MAX_GRANT_UNUSED: Duration = Duration::from_secs(10);

/// How long before a cool-off ends the fleet asks who probes: at least
/// this, or two store round trips, so the answer is in before a call
/// would wait for it.
const ASK_LEAD: Duration = Duration::from_millis(10);

/// A probe lease this replica holds.
#[derive(Debug)]
struct HeldLease {
    /// When it was taken.
    taken: Instant,
    /// When its breaker went half-open: the probe runs; `None` until then.
    probing_since: Option<Instant>,
}

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
    /// The other replicas' failures last given to each layer's domain.
    told_failing: HashMap<DomainKey, u32>,
    /// The probe leases this replica holds.
    leases: HashMap<DomainKey, HeldLease>,
    /// The fleet's failed probes since each domain last recovered.
    growth: HashMap<DomainKey, u32>,
    /// When each open breaker here ends its cool-off, as far as this task
    /// knows: it asks who probes just before.
    cool_offs: HashMap<DomainKey, Instant>,
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
            told_failing: HashMap::new(),
            leases: HashMap::new(),
            growth: HashMap::new(),
            cool_offs: HashMap::new(),
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
                    Some(Message::Decision(d)) => {
                        let d = self.count_probes(d);
                        if let removal @ Outgoing::Remove { .. } = self.hold(d) {
                            self.pending.push(removal);
                        }
                    }
                    // No store to ask: this replica probes alone.
                    Some(Message::ProbeWanted { layer, scope }) => {
                        self.grant(&layer, &scope);
                    }
                    Some(Message::Streak { layer, scope, failures }) => {
                        self.own_streak(&layer, &scope, failures);
                    }
                    Some(Message::Probing { .. }) => {}
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
                    self.handle(message).await?;
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
                        if left < Duration::from_millis(1) && notice.kind != Kind::Opened {
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
        let stored = self.store.scan(self.settings.keys.space()).await?;
        let now = Instant::now();
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
        self.tell_failing(now);
        Ok(())
    }

    /// Handles one message from this replica's layers while connected.
    async fn handle(&mut self, message: Message) -> Result<(), StoreError> {
        match message {
            Message::Decision(d) => {
                let key = (d.layer.to_string(), d.scope.clone());
                let ends_probe = matches!(d.kind, Kind::Recovered | Kind::Closed) || d.reopen;
                let keep = d
                    .reopen
                    .then(|| d.until.map(|u| u.saturating_duration_since(Instant::now())))
                    .flatten();
                let recovered = matches!(d.kind, Kind::Recovered | Kind::Closed);
                if ends_probe {
                    self.cool_offs.remove(&key);
                }
                if let (Kind::Opened, Some(until)) = (d.kind, d.until) {
                    self.arm(key.clone(), until);
                }
                // The decision first: the others wait on it.
                let d = self.count_probes(d);
                let outgoing = self.hold(d);
                self.send(outgoing).await?;
                if recovered {
                    // Its streak ended with the breaker's recovery.
                    if let Some(outgoing) = self.own_streak(&key.0, &key.1, 0) {
                        self.send(outgoing).await?;
                    }
                }
                // The verdict is out: the lease goes, or stays through a
                // failed probe's cool-off, in which no replica probes.
                if ends_probe && self.leases.remove(&key).is_some() {
                    let lease = self.settings.keys.lease(&key.0, &key.1);
                    let keep = keep.filter(|k| !k.is_zero());
                    self.store
                        .release(&lease, &self.settings.replica, keep)
                        .await?;
                }
            }
            Message::Probing { layer, scope } => {
                if let Some(held) = self.leases.get_mut(&(layer.to_string(), scope)) {
                    held.probing_since.get_or_insert_with(Instant::now);
                }
            }
            Message::Streak {
                layer,
                scope,
                failures,
            } => {
                if let Some(outgoing) = self.own_streak(&layer, &scope, failures) {
                    self.send(outgoing).await?;
                }
            }
            Message::ProbeWanted { layer, scope } => {
                self.ask((layer.to_string(), scope)).await?;
            }
        }
        Ok(())
    }

    /// Who probes `key`: this replica if it takes the lease (or the store
    /// fails it: then it probes alone), or the holder; told to the layer.
    async fn ask(&mut self, key: DomainKey) -> Result<(), StoreError> {
        self.cool_offs.remove(&key);
        let Some(ttl) = self.settings.probe_lease else {
            self.grant(&key.0, &key.1);
            return Ok(());
        };
        if self.leases.contains_key(&key) {
            self.grant(&key.0, &key.1);
            return Ok(());
        }
        let lease = self.settings.keys.lease(&key.0, &key.1);
        let answer = self.store.lease(&lease, &self.settings.replica, ttl).await;
        match answer {
            Ok(Lease::Taken) => {
                if self.grant(&key.0, &key.1) {
                    let held = HeldLease {
                        taken: Instant::now(),
                        probing_since: None,
                    };
                    self.leases.insert(key, held);
                } else {
                    // Closed since: nothing to probe.
                    self.store
                        .release(&lease, &self.settings.replica, None)
                        .await?;
                }
            }
            Ok(Lease::Held { ttl, .. }) => {
                // Refuse until just past the lease's end, and ask again as
                // it ends: a lapsed lease is taken over then.
                let wait = ttl + self.lead();
                if let Some(handle) = self.layers.get(&key.0) {
                    let scope = key.1.as_str();
                    if handle.adopt(FleetUpdate::ProbeHeld { scope, wait }) {
                        self.arm(key, Instant::now() + wait);
                    }
                }
            }
            Err(e) => {
                self.grant(&key.0, &key.1);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Asks who probes each domain whose cool-off ends now.
    async fn ask_due(&mut self) -> Result<(), StoreError> {
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
    fn next_ask(&self) -> Instant {
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
    fn arm(&mut self, key: DomainKey, until: Instant) {
        if self.settings.probe_lease.is_some() {
            let at = self.cool_offs.entry(key).or_insert(until);
            *at = (*at).max(until);
        }
    }

    /// This replica probes `scope` (it holds the lease, or the store is
    /// away), its cool-off growth the fleet's. Whether its breaker is open
    /// and took the grant.
    fn grant(&mut self, layer: &str, scope: &str) -> bool {
        let reopens = self
            .growth
            .get(&(layer.to_owned(), scope.to_owned()))
            .copied()
            .unwrap_or(0);
        self.layers
            .get(layer)
            .is_some_and(|handle| handle.adopt(FleetUpdate::ProbeGranted { scope, reopens }))
    }

    /// A reopen carries the fleet's failed probes since the domain last
    /// recovered; a recovery or a close forgets them.
    fn count_probes(&mut self, mut d: Decision) -> Decision {
        let key = (d.layer.to_string(), d.scope.clone());
        if d.reopen {
            let growth = self.growth.entry(key).or_default();
            *growth = growth.saturating_add(1);
            d.count = *growth;
        } else if matches!(d.kind, Kind::Recovered | Kind::Closed) {
            self.growth.remove(&key);
        }
        d
    }

    /// Renews the probe leases held; gives back those granted but unused
    /// too long (no call came) and those whose probe ran too long.
    async fn renew(&mut self) -> Result<(), StoreError> {
        let Some(ttl) = self.settings.probe_lease else {
            return Ok(());
        };
        let now = Instant::now();
        let (mut keep, mut give_back) = (Vec::new(), Vec::new());
        for (key, held) in &self.leases {
            let expired = match held.probing_since {
                Some(since) => now.saturating_duration_since(since) >= MAX_PROBE_HOLD,
                None => now.saturating_duration_since(held.taken) >= MAX_GRANT_UNUSED,
            };
            if expired { &mut give_back } else { &mut keep }.push(key.clone());
        }
        for key in give_back {
            self.leases.remove(&key);
            // The grant first, then the lease: never two probes at once.
            if let Some(handle) = self.layers.get(&key.0) {
                let scope = key.1.as_str();
                let wait = Duration::from_millis(1);
                handle.adopt(FleetUpdate::ProbeHeld { scope, wait });
            }
            let lease = self.settings.keys.lease(&key.0, &key.1);
            self.store
                .release(&lease, &self.settings.replica, None)
                .await?;
            let freed = Notice::lease_freed(&key.0, &key.1, &self.settings.replica);
            self.send(Outgoing::Remove {
                keys: Vec::new(),
                notice: freed,
            })
            .await?;
        }
        for key in keep {
            let lease = self.settings.keys.lease(&key.0, &key.1);
            if let Lease::Held { .. } = self
                .store
                .lease(&lease, &self.settings.replica, ttl)
                .await?
            {
                // Lost (the store was slow past its life): the holder's
                // probe speaks for the fleet; this one gives its grant back.
                self.leases.remove(&key);
                if let Some(handle) = self.layers.get(&key.0) {
                    let scope = key.1.as_str();
                    let wait = Duration::from_millis(1);
                    handle.adopt(FleetUpdate::ProbeHeld { scope, wait });
                }
            }
        }
        Ok(())
    }

    /// Records this replica's streak; what tells the store, if sharing.
    fn own_streak(&mut self, layer: &str, scope: &str, failures: u32) -> Option<Outgoing> {
        let memory = self.settings.failure_memory?;
        let key = (layer.to_owned(), scope.to_owned());
        let replica = self.settings.replica.clone();
        let by_replica = self.streaks.entry(key).or_default();
        let had = by_replica.remove(&replica).is_some_and(|(n, _)| n > 0);
        if failures > 0 {
            by_replica.insert(replica.clone(), (failures, Instant::now() + memory));
        }
        let notice = Notice {
            kind: Kind::Failing,
            layer: layer.to_owned(),
            scope: scope.to_owned(),
            replica,
            wait: Duration::ZERO,
            reason: String::new(),
            manual: false,
            count: failures,
        };
        // The other replicas' count joins once this replica fails too.
        self.tell_failing(Instant::now());
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

    /// Gives each layer the other replicas' failures in a row, where they
    /// changed: their live streaks summed, once the breaker policy's quorum
    /// of replicas fails (this one counts itself: its breaker adds them to
    /// a streak of its own only).
    fn tell_failing(&mut self, now: Instant) {
        let me = self.settings.replica.as_str();
        let needed = self.settings.policy.needed();
        let mut changes = Vec::new();
        self.streaks.retain(|key, by_replica| {
            by_replica.retain(|_, (_, until)| *until > now);
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
            if self.told_failing.get(key).copied().unwrap_or(0) != failures {
                changes.push((key.clone(), failures));
            }
            !by_replica.is_empty()
        });
        // Domains no streak remains of: their count is over too.
        for (key, told) in &self.told_failing {
            if *told > 0 && !self.streaks.contains_key(key) {
                changes.push((key.clone(), 0));
            }
        }
        for ((layer, scope), failures) in changes {
            if let Some(handle) = self.layers.get(&layer) {
                let scope = scope.as_str();
                handle.adopt(FleetUpdate::Failing { scope, failures });
            }
            if failures == 0 {
                self.told_failing.remove(&(layer, scope));
            } else {
                self.told_failing.insert((layer, scope), failures);
            }
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
                handle.adopt(FleetUpdate::Opened {
                    scope,
                    wait: n.wait,
                    reason: &format!("opened by hand on {}", n.replica),
                })
            }
            Kind::Opened => {
                if n.count > 0 && self.settings.probe_lease.is_some() {
                    // The fleet's probe failed: no replica probes again in
                    // its cool-off, and the next prober's grows from it.
                    let key = (n.layer.clone(), n.scope.clone());
                    let growth = self.growth.entry(key).or_default();
                    *growth = (*growth).max(n.count);
                    let until = made_at + n.wait;
                    let wait = until.saturating_duration_since(now);
                    if handle.adopt(FleetUpdate::ProbeHeld { scope, wait }) {
                        self.status.adopted();
                        self.arm((n.layer.clone(), n.scope.clone()), until);
                    }
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
                let key = (n.layer.clone(), n.scope.clone());
                let by_replica = self.streaks.entry(key).or_default();
                if n.count == 0 {
                    by_replica.remove(&n.replica);
                } else {
                    by_replica.insert(n.replica.clone(), (n.count, made_at + n.wait));
                }
                self.tell_failing(now);
                return;
            }
            Kind::LeaseFreed => {
                // Waiting on it (held, a cool-off armed): ask at once.
                let key = (n.layer.clone(), n.scope.clone());
                if let Some(at) = self.cool_offs.get_mut(&key) {
                    *at = now;
                }
                return;
            }
            Kind::Isolated => handle.adopt(FleetUpdate::Isolated { scope }),
            Kind::Recovered => {
                let key = (n.layer.clone(), n.scope.clone());
                self.growth.remove(&key);
                self.cool_offs.remove(&key);
                self.reports.recovered(&n.layer, scope, now);
                if self.settings.policy == BreakerPolicy::Local {
                    return;
                }
                handle.adopt(FleetUpdate::Recovered { scope })
            }
            Kind::Closed => {
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
