//! Per-key state that a hot path can reach without writing shared memory.
//!
//! A breaker sits in front of every call, so its per-key lookup is on the
//! hottest path a client has. Measured on a 2-vCPU machine, any shared write
//! per call — an `Arc` clone, a `RwLock` read (the reader count), a
//! `fetch_add` — costs 1.4× to 2.9× a bare tower call once 64 tasks share two
//! threads. A response future also has to find its key's state again when the
//! call completes, and a `'static` future cannot borrow from its service.
//!
//! So per-key state lives in [`Slot`]s that are allocated once, leaked, and
//! recycled: a [`Handle`] is a `&'static` slot plus the generation it was
//! handed out at, so it is `Copy`, costs no reference count, and goes stale —
//! never dangling — when its key is evicted and the slot reused. Each slot
//! splits into a lock-free part `H` that the hot path reads (state summaries
//! published as atomics) and a mutex-protected part `V` that changes only when
//! something happens (a failure, a transition).
//!
//! Memory is bounded: past `max_keys` entries, idle entries (as judged by the
//! caller) are evicted; busy ones never are. Eviction is incremental: each
//! insertion looks at a few of the oldest entries (a clock sweep: an entry
//! found busy goes to the back), never at the whole registry, so a storm of
//! new keys above the cap costs the same per key as below it. Idle entries
//! older than [`IDLE_AGE`] go too, cap or not. Slots of a dropped registry go to
//! a process-wide pool for the next registry of the same type, so the leaked
//! memory is bounded by the peak number of live keys, not by how many
//! registries were ever built.

use std::any::{Any, TypeId};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::PoisonError;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering, RwLock};

/// Entries an insertion examines for eviction, at most.
const SWEEP: usize = 4;

/// An idle entry this old is evicted even below the cap: a scope nobody
/// has failed on for an hour costs only its re-creation if called again.
pub(crate) const IDLE_AGE: Duration = Duration::from_secs(3600);

/// Why the sweep looks at an entry: the registry is at its cap, or the
/// entry is older than [`IDLE_AGE`]. An entry may keep something worth
/// more than its memory below the cap (a gate's recent history).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pressure {
    /// At the cap: only what must stay (refusing calls, counting failures) stays.
    Full,
    /// Below the cap, but old.
    Age,
}

/// The lock-free part of a slot: atomics the hot path reads.
pub(crate) trait Hot: Default + Send + Sync + 'static {
    /// Returns the atomics to their default values (the slot is being reused).
    fn reset(&self);
}

impl Hot for () {
    fn reset(&self) {}
}

/// One key's state: a lock-free part `H` and a mutex-protected part `V`.
pub(crate) struct Slot<V, H> {
    generation: AtomicU64,
    hot: H,
    inner: Mutex<SlotInner<V>>,
}

struct SlotInner<V> {
    /// Only read and written under the lock, so it always agrees with `value`.
    generation: u64,
    key: Box<str>,
    value: Option<V>,
}

impl<V, H: Hot> Slot<V, H> {
    fn leak() -> &'static Self {
        Box::leak(Box::new(Slot {
            generation: AtomicU64::new(0),
            hot: H::default(),
            inner: Mutex::new(SlotInner {
                generation: 0,
                key: Box::from(""),
                value: None,
            }),
        }))
    }

    fn lock_inner(&self) -> MutexGuard<'_, SlotInner<V>> {
        // A panic while holding the lock leaves a consistent value behind
        // (every mutation is a plain assignment), so poisoning is ignored.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the current generation: handles to it go stale.
    fn retire(&self, inner: &mut SlotInner<V>) {
        inner.generation += 1;
        inner.value = None;
        inner.key = Box::from("");
        self.hot.reset();
        self.generation.store(inner.generation, Ordering::Release);
    }
}

impl<V, H> fmt::Debug for Slot<V, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A reference to one key's slot at one generation. `Copy`; no reference count.
pub(crate) struct Handle<V: 'static, H: 'static> {
    slot: &'static Slot<V, H>,
    generation: u64,
}

impl<V, H> Clone for Handle<V, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V, H> Copy for Handle<V, H> {}

impl<V, H> PartialEq for Handle<V, H> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.slot, other.slot) && self.generation == other.generation
    }
}

impl<V, H> Eq for Handle<V, H> {}

impl<V, H> fmt::Debug for Handle<V, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("slot", &(self.slot as *const Slot<V, H>))
            .field("generation", &self.generation)
            .finish()
    }
}

impl<V, H: Hot> Handle<V, H> {
    /// Whether the key this handle was issued for still owns the slot.
    pub(crate) fn is_current(&self) -> bool {
        self.slot.generation.load(Ordering::Acquire) == self.generation
    }

    /// The lock-free part, or `None` if the key was evicted.
    pub(crate) fn hot(&self) -> Option<&'static H> {
        self.is_current().then_some(&self.slot.hot)
    }

    /// Locks the mutable part, or `None` if the key was evicted.
    pub(crate) fn lock(&self) -> Option<SlotGuard<V>> {
        let guard = self.slot.lock_inner();
        (guard.generation == self.generation && guard.value.is_some())
            .then_some(SlotGuard { guard })
    }

    /// The key this handle was issued for, or `None` if it was evicted.
    #[cfg(test)]
    pub(crate) fn key(&self) -> Option<Box<str>> {
        let guard = self.slot.lock_inner();
        (guard.generation == self.generation).then(|| guard.key.clone())
    }
}

/// A locked slot value.
pub(crate) struct SlotGuard<V: 'static> {
    guard: MutexGuard<'static, SlotInner<V>>,
}

impl<V> SlotGuard<V> {
    /// The key of the locked slot.
    pub(crate) fn key(&self) -> &str {
        &self.guard.key
    }

    /// The key and the value at once, so the value can change while the
    /// key is read (no copy of it).
    pub(crate) fn split(&mut self) -> (&str, &mut V) {
        let inner = &mut *self.guard;
        (
            &inner.key,
            inner.value.as_mut().expect("checked when locked"),
        )
    }
}

impl<V: fmt::Debug> fmt::Debug for SlotGuard<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotGuard")
            .field("key", &self.guard.key)
            .field("value", &self.guard.value)
            .finish()
    }
}

impl<V> std::ops::Deref for SlotGuard<V> {
    type Target = V;
    fn deref(&self) -> &V {
        self.guard.value.as_ref().expect("checked when locked")
    }
}

impl<V> std::ops::DerefMut for SlotGuard<V> {
    fn deref_mut(&mut self) -> &mut V {
        self.guard.value.as_mut().expect("checked when locked")
    }
}

// === Registry ===

/// A map from keys to [`Handle`]s, bounded by evicting idle entries.
pub(crate) struct Registry<V: Send + 'static, H: Hot = ()> {
    map: RwLock<Entries<V, H>>,
    max_keys: usize,
}

/// The keys, and the order a sweep visits them in (oldest first).
struct Entries<V: 'static, H: 'static> {
    map: HashMap<Box<str>, Handle<V, H>>,
    /// Every current handle once (stale ones are dropped when met), with
    /// when it was inserted.
    ring: VecDeque<(Handle<V, H>, Instant)>,
}

impl<V, H> Default for Entries<V, H> {
    fn default() -> Self {
        Entries {
            map: HashMap::new(),
            ring: VecDeque::new(),
        }
    }
}

impl<V: Send + 'static, H: Hot> Registry<V, H> {
    /// An empty registry that starts evicting idle entries past `max_keys`.
    pub(crate) fn new(max_keys: usize) -> Self {
        Registry {
            map: RwLock::new(Entries::default()),
            max_keys: max_keys.max(1),
        }
    }

    /// The handle of `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<Handle<V, H>> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .get(key)
            .copied()
    }

    /// The handle of `key`, inserting `make()` if absent. Past `max_keys`, the
    /// entries for which `is_idle` holds may be evicted to make room; see
    /// [`Registry::get_or_insert_evicting`].
    #[cfg(test)]
    pub(crate) fn get_or_insert(&self, key: &str, make: impl FnOnce() -> V) -> Handle<V, H> {
        self.get_or_insert_evicting(key, |_| make(), |_, _| false)
    }

    /// Like [`Registry::get_or_insert`], evicting entries whose value
    /// satisfies `is_idle` when the registry is full (or that are idle and
    /// older than [`IDLE_AGE`]), a few per insertion. If none is idle the
    /// registry grows past `max_keys` rather than drop state that matters.
    pub(crate) fn get_or_insert_evicting(
        &self,
        key: &str,
        make: impl FnOnce(&H) -> V,
        is_idle: impl Fn(&V, Pressure) -> bool,
    ) -> Handle<V, H> {
        if let Some(h) = self.get(key) {
            return h;
        }
        let mut entries = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = entries.map.get(key) {
            return *h;
        }
        let now = Instant::now();
        self.sweep(&mut entries, now, &is_idle);
        let slot = pool_take::<V, H>().unwrap_or_else(Slot::leak);
        let mut inner = slot.lock_inner();
        inner.key = Box::from(key);
        // Made under the slot's lock, and before the handle is in the map:
        // whatever `make` publishes in the hot part is there before any
        // caller can read it.
        inner.value = Some(make(&slot.hot));
        let handle = Handle {
            slot,
            generation: inner.generation,
        };
        drop(inner);
        entries.map.insert(Box::from(key), handle);
        entries.ring.push_back((handle, now));
        handle
    }

    /// Looks at up to [`SWEEP`] of the oldest entries: one that is idle goes
    /// if the registry is full or it is older than [`IDLE_AGE`]; one that
    /// stays goes to the back of the ring.
    fn sweep(
        &self,
        entries: &mut Entries<V, H>,
        now: Instant,
        is_idle: &impl Fn(&V, Pressure) -> bool,
    ) {
        for _ in 0..SWEEP.min(entries.ring.len()) {
            let Some((handle, since)) = entries.ring.pop_front() else {
                break;
            };
            let full = entries.map.len() >= self.max_keys;
            let old = now.saturating_duration_since(since) >= IDLE_AGE;
            if !full && !old {
                // The rest are younger still.
                entries.ring.push_front((handle, since));
                break;
            }
            let mut inner = handle.slot.lock_inner();
            if inner.generation != handle.generation {
                // Removed already: its ring entry just goes.
                continue;
            }
            let pressure = if full { Pressure::Full } else { Pressure::Age };
            if inner.value.as_ref().is_none_or(|v| is_idle(v, pressure)) {
                let key = std::mem::take(&mut inner.key);
                handle.slot.retire(&mut inner);
                drop(inner);
                entries.map.remove(&key);
                pool_put(handle.slot);
            } else {
                drop(inner);
                entries.ring.push_back((handle, since));
            }
        }
    }

    /// Removes `key`, ending its handles' generation.
    #[cfg(test)]
    pub(crate) fn remove(&self, key: &str) -> bool {
        let mut entries = self.map.write().unwrap_or_else(PoisonError::into_inner);
        match entries.map.remove(key) {
            Some(h) => {
                release(h);
                true
            }
            None => false,
        }
    }

    /// Every current key with its handle, in no particular order.
    pub(crate) fn entries(&self) -> Vec<(Box<str>, Handle<V, H>)> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .iter()
            .map(|(k, h)| (k.clone(), *h))
            .collect()
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .len()
    }
}

impl<V: Send + 'static, H: Hot> fmt::Debug for Registry<V, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("keys", &self.len())
            .field("max_keys", &self.max_keys)
            .finish()
    }
}

impl<V: Send + 'static, H: Hot> Drop for Registry<V, H> {
    fn drop(&mut self) {
        // `write`, not `get_mut`: loom's lock has no `get_mut`, and a
        // registry is dropped once.
        let entries =
            std::mem::take(&mut *self.map.write().unwrap_or_else(PoisonError::into_inner));
        for (_, h) in entries.map {
            release(h);
        }
    }
}

fn release<V: Send + 'static, H: Hot>(h: Handle<V, H>) {
    let mut inner = h.slot.lock_inner();
    if inner.generation == h.generation {
        h.slot.retire(&mut inner);
        drop(inner);
        pool_put(h.slot);
    }
}

// === The process-wide pool of retired slots ===

type Pool = HashMap<TypeId, Vec<&'static (dyn Any + Send + Sync)>>;

/// Not one of the modelled primitives: a loom build keeps no pool at all
/// (a slot made in one of loom's executions must not reach the next).
static POOL: std::sync::Mutex<Option<Pool>> = std::sync::Mutex::new(None);

fn pool_put<V: Send + 'static, H: Hot>(slot: &'static Slot<V, H>) {
    if cfg!(levee_loom) {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    pool.get_or_insert_with(HashMap::new)
        .entry(TypeId::of::<Slot<V, H>>())
        .or_default()
        .push(slot);
}

fn pool_take<V: Send + 'static, H: Hot>() -> Option<&'static Slot<V, H>> {
    if cfg!(levee_loom) {
        return None;
    }
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    let slot = pool.as_mut()?.get_mut(&TypeId::of::<Slot<V, H>>())?.pop()?;
    slot.downcast_ref::<Slot<V, H>>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[derive(Default)]
    struct Counter(AtomicU32);
    impl Hot for Counter {
        fn reset(&self) {
            self.0.store(0, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_key_maps_to_one_handle_until_removed() {
        let r: Registry<String, Counter> = Registry::new(8);
        let a = r.get_or_insert("a", || "first".to_owned());
        let again = r.get_or_insert("a", || unreachable!("present"));
        assert_eq!(a, again);
        assert_eq!(&*a.lock().unwrap(), "first");
        assert_eq!(a.key().as_deref(), Some("a"));
        assert!(r.remove("a"));
        assert!(!a.is_current());
        assert!(a.lock().is_none());
        assert!(a.hot().is_none());
        assert!(r.get("a").is_none());
    }

    #[test]
    fn a_stale_handle_never_sees_the_next_owner_of_its_slot() {
        let r: Registry<u32, Counter> = Registry::new(1);
        let a = r.get_or_insert("a", || 1);
        a.hot().unwrap().0.store(7, Ordering::Relaxed);
        // Full, and `a` is idle: inserting `b` evicts it and may reuse its slot.
        let b = r.get_or_insert_evicting("b", |_| 2, |_, _| true);
        assert!(!a.is_current());
        assert!(a.lock().is_none());
        assert_eq!(*b.lock().unwrap(), 2);
        assert_eq!(
            b.hot().unwrap().0.load(Ordering::Relaxed),
            0,
            "hot part reset on reuse"
        );
    }

    #[test]
    fn busy_entries_are_never_evicted_even_past_the_bound() {
        let r: Registry<bool, ()> = Registry::new(2);
        let busy = r.get_or_insert("busy", || true);
        let idle = r.get_or_insert("idle", || false);
        let _c = r.get_or_insert_evicting("c", |_| false, |busy, _| !busy);
        assert!(busy.is_current());
        assert!(!idle.is_current());
        let _d = r.get_or_insert_evicting("d", |_| true, |busy, _| !busy);
        let _e = r.get_or_insert_evicting("e", |_| true, |busy, _| !busy);
        assert!(busy.is_current());
        assert_eq!(r.len(), 3, "c was idle and went; busy, d and e stay");
    }

    #[test]
    fn above_the_cap_an_insertion_looks_at_a_few_entries_not_all() {
        let r: Registry<bool, ()> = Registry::new(4);
        let busy: Vec<_> = (0..100)
            .map(|i| r.get_or_insert_evicting(&format!("busy{i}"), |_| true, |busy, _| !busy))
            .collect();
        assert_eq!(r.len(), 100, "busy entries are kept past the cap");
        let idle = r.get_or_insert_evicting("idle", |_| false, |busy, _| !busy);
        // The ring is oldest first: the idle entry is reached only after the
        // busy ones ahead of it have been passed over, a few per insertion.
        let mut inserted = 0;
        while idle.is_current() {
            r.get_or_insert_evicting(&format!("new{inserted}"), |_| true, |busy, _| !busy);
            inserted += 1;
            assert!(
                inserted <= 101 / SWEEP + 1,
                "reached in {inserted} insertions"
            );
        }
        assert!(busy.iter().all(Handle::is_current));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_entry_older_than_the_idle_age_goes_even_below_the_cap() {
        let r: Registry<bool, ()> = Registry::new(1000);
        let idle = r.get_or_insert_evicting("idle", |_| false, |busy, _| !busy);
        let busy = r.get_or_insert_evicting("busy", |_| true, |busy, _| !busy);
        tokio::time::advance(IDLE_AGE / 2).await;
        r.get_or_insert_evicting("young", |_| false, |busy, _| !busy);
        assert!(idle.is_current(), "not old yet");
        tokio::time::advance(IDLE_AGE * 3 / 4).await;
        r.get_or_insert_evicting("later", |_| false, |busy, _| !busy);
        assert!(!idle.is_current(), "idle and old: evicted below the cap");
        assert!(busy.is_current(), "old but busy: kept");
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn slots_of_a_dropped_registry_are_reused() {
        struct Marker;
        let r: Registry<Marker, ()> = Registry::new(4);
        let h = r.get_or_insert("x", || Marker);
        let first = h.slot as *const _;
        drop(r);
        assert!(!h.is_current());
        let r2: Registry<Marker, ()> = Registry::new(4);
        let h2 = r2.get_or_insert("y", || Marker);
        assert_eq!(first, h2.slot as *const _);
        assert_eq!(h2.key().as_deref(), Some("y"));
    }

    #[test]
    fn concurrent_inserts_of_one_key_agree_on_its_handle() {
        let r: std::sync::Arc<Registry<u32, ()>> = std::sync::Arc::new(Registry::new(64));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || r.get_or_insert("k", || 0))
            })
            .collect();
        let hs: Vec<_> = handles.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(hs.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(r.len(), 1);
    }
}
