//! Counters that many threads increment without sharing a cache line: the
//! failover's successes, the breaker's refusals, the retry budget's pending
//! deposits.
//!
//! A thread claims a stripe of its own on its first increment and hands it
//! back when it exits, so its increments are a plain load and store: no
//! locked read-modify-write, which takes about 18 cycles on recent Intel
//! cores (8 on AMD's Zen) even on a cache line no other thread touches
//! (Agner Fog's instruction tables), against the one cycle of the work. A
//! stripe has one writer at a time, so no increment is lost; readers sum
//! the stripes. Threads beyond the stripes owned at once share a second
//! set of stripes, which they increment with `fetch_add`.
//!
//! The retry budget's stripes are emptied by whichever thread collects
//! them, so they have more than one writer: it takes the thread's stripe
//! from [`stripe_index`] and keeps `fetch_add` and `swap`.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Stripes a thread may own, one per thread, handed on when it exits.
const OWNED: usize = 16;

/// Stripes shared, with `fetch_add`, by the threads past the owned ones.
const SHARED: usize = 16;

/// Stripes of each counter: those owned, then those shared.
pub(crate) const STRIPES: usize = OWNED + SHARED;

/// A value alone on its cache line (128 bytes: adjacent-line prefetch).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Padded<T>(pub(crate) T);

/// One `T` per stripe, each alone on its cache line: what a thread writes
/// at its [`stripe_index`] is on no other thread's line.
pub(crate) fn per_stripe<T>(mut make: impl FnMut() -> T) -> Box<[Padded<T>]> {
    (0..STRIPES).map(|_| Padded(make())).collect()
}

/// A counter's stripe.
pub(crate) type Stripe = Padded<AtomicU64>;

impl Stripe {
    /// Adds one, from the thread that holds `slot`.
    #[inline]
    fn increment(&self, slot: ThreadStripe) {
        if slot.owned() {
            // The one writer: nothing can come between the load and the store.
            let total = self.0.load(Ordering::Relaxed) + 1;
            self.0.store(total, Ordering::Relaxed);
        } else {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The stripe's total so far.
    fn total(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A counter that threads increment without sharing a cache line: the
/// hot path's only write (a success served, a call refused) lands on the
/// calling thread's own stripe.
pub(crate) struct Striped(Box<[Stripe]>);

impl Default for Striped {
    fn default() -> Self {
        Striped(per_stripe(AtomicU64::default))
    }
}

impl std::fmt::Debug for Striped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Striped").field(&self.sum()).finish()
    }
}

impl Striped {
    /// Adds one on the calling thread's stripe.
    #[inline]
    pub(crate) fn add(&self) {
        let slot = ThreadStripe::current();
        self.0[slot.0].increment(slot);
    }

    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().map(Stripe::total).sum()
    }
}

/// The calling thread's stripe.
#[derive(Clone, Copy, Debug)]
struct ThreadStripe(usize);

thread_local! {
    /// This thread's stripe, `UNCLAIMED` until its first increment. It has
    /// no destructor, so it is readable through the thread's whole teardown.
    static INDEX: Cell<usize> = const { Cell::new(UNCLAIMED) };
    /// Hands an owned stripe back when the thread exits (registered when
    /// the thread claims one).
    static RELEASE: Release = const { Release };
}

const UNCLAIMED: usize = usize::MAX;

/// Who owns which stripe.
static POOL: Mutex<Pool> = Mutex::new(Pool::new());

/// The owned stripes handed back, those never used, and how many threads
/// were sent to the shared stripes.
#[derive(Debug)]
struct Pool {
    free: Vec<usize>,
    next: usize,
    shared: usize,
}

impl Pool {
    const fn new() -> Pool {
        Pool {
            free: Vec::new(),
            next: 0,
            shared: 0,
        }
    }

    /// A stripe for a thread: one it owns, one handed back first, if
    /// `register` can arrange for it to be handed back; else a shared one.
    fn claim(&mut self, register: impl FnOnce() -> bool) -> usize {
        let owned = self.free.pop().or_else(|| {
            (self.next < OWNED).then(|| {
                self.next += 1;
                self.next - 1
            })
        });
        match owned {
            Some(owned) if register() => owned,
            unregistered => {
                self.free.extend(unregistered);
                self.shared += 1;
                OWNED + (self.shared - 1) % SHARED
            }
        }
    }

    /// Takes back a stripe of an exiting thread (a shared one stays shared).
    fn release(&mut self, index: usize) {
        if index < OWNED {
            self.free.push(index);
        }
    }
}

/// The calling thread's stripe among [`STRIPES`], for counters that other
/// threads also write (and so must take `fetch_add` or `swap`): one of its
/// own, unless more threads than owned stripes are alive.
#[cfg(not(levee_loom))]
#[inline]
pub(crate) fn stripe_index() -> usize {
    ThreadStripe::current().0
}

/// Under loom, whose threads all run on one OS thread (and so would share
/// one stripe of `std`'s thread locals): each loom thread takes the next
/// stripe on its first call, from a count that starts again with each
/// model run, so that a model's threads work on stripes of their own and
/// the paths that cross stripes are explored.
#[cfg(levee_loom)]
pub(crate) fn stripe_index() -> usize {
    loom::lazy_static! {
        // A std lock: the count is the model's bookkeeping, not a step loom
        // should interleave.
        static ref NEXT: Mutex<usize> = Mutex::new(0);
    }
    loom::thread_local! {
        static LOOM_INDEX: Cell<usize> = Cell::new(UNCLAIMED);
    }
    LOOM_INDEX.with(|index| {
        if index.get() == UNCLAIMED {
            let mut next = NEXT.lock().unwrap_or_else(PoisonError::into_inner);
            index.set(*next % STRIPES);
            *next += 1;
        }
        index.get()
    })
}

impl ThreadStripe {
    #[inline]
    fn current() -> ThreadStripe {
        let index = INDEX.with(Cell::get);
        ThreadStripe(if index == UNCLAIMED { claim() } else { index })
    }

    /// Whether the thread is the stripe's one writer.
    #[inline]
    fn owned(self) -> bool {
        self.0 < OWNED
    }
}

#[cold]
fn claim() -> usize {
    // An owned stripe only with its hand-back registered: a thread whose
    // thread-local storage is being torn down cannot register one, and
    // shares a stripe instead.
    let index = lock_pool().claim(|| RELEASE.try_with(|_| ()).is_ok());
    INDEX.with(|i| i.set(index));
    index
}

fn lock_pool() -> std::sync::MutexGuard<'static, Pool> {
    // The pool is left whole by every step that could panic under it.
    POOL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hands the thread's owned stripe back to the pool when the thread exits.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        // The stripe's last store happens before the lock's release, and
        // the next owner's first load after its acquire: no count is lost
        // in the hand-over. Any increment after this shares a stripe.
        lock_pool().release(INDEX.with(|i| i.replace(OWNED)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn every_increment_is_counted_whether_its_stripe_is_owned_shared_or_handed_on() {
        let counter = Arc::new(Striped::default());
        // More threads alive at once than owned stripes: some share.
        let barrier = Arc::new(std::sync::Barrier::new(OWNED + 8));
        let threads: Vec<_> = (0..OWNED + 8)
            .map(|_| {
                let (c, b) = (counter.clone(), barrier.clone());
                std::thread::spawn(move || {
                    b.wait();
                    (0..10_000).for_each(|_| c.add());
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(counter.sum(), (OWNED as u64 + 8) * 10_000);
        // Then more short-lived threads than owned stripes, one after
        // another: each owns a stripe only if those before handed theirs
        // back, and hands it on with its count.
        for _ in 0..OWNED * 2 {
            let c = counter.clone();
            let owned = std::thread::spawn(move || {
                (0..1_000).for_each(|_| c.add());
                ThreadStripe::current().owned()
            })
            .join()
            .unwrap();
            assert!(owned, "a stripe was not handed back");
        }
        assert_eq!(
            counter.sum(),
            (OWNED as u64 + 8) * 10_000 + OWNED as u64 * 2_000
        );
    }

    #[test]
    fn a_thread_owns_a_stripe_until_it_hands_it_back_and_the_rest_share() {
        let mut pool = Pool::new();
        let owned: Vec<usize> = (0..OWNED).map(|_| pool.claim(|| true)).collect();
        assert_eq!(owned, (0..OWNED).collect::<Vec<_>>());
        // Every owned stripe taken: the next threads share, in turn.
        assert_eq!(pool.claim(|| true), OWNED);
        assert_eq!(pool.claim(|| true), OWNED + 1);
        // A stripe handed back goes to the next thread, owned.
        pool.release(5);
        pool.release(OWNED + 1);
        assert_eq!(pool.claim(|| true), 5);
        assert_eq!(pool.claim(|| true), OWNED + 2);
        // A thread that cannot register the hand-back shares, and the
        // stripe it was offered stays free.
        pool.release(7);
        assert_eq!(pool.claim(|| false), OWNED + 3);
        assert_eq!(pool.claim(|| true), 7);
    }
}
