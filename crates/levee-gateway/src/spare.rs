//! Each route's stack, cloned once per worker thread and reused.
//!
//! A request needs a service of its own to call (tower's `Service::call`
//! takes `&mut self`), and cloning a route's stack costs several
//! allocations: the retry layer gives each clone its own state and a spare
//! of the stack beneath, and the failover gives each clone its own copies
//! of its targets' services (so that clones on different threads share no
//! count that every call writes). So a request takes a clone from its
//! thread's spares, readies it, calls it, and puts it back before it awaits
//! the answer: the answer's future owns what it needs, not the service.
//! Spares of a routing table that a reload replaced are dropped the next
//! time the thread takes one.

use std::cell::RefCell;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};

use tower::Service;

/// A routing table's generation: each build takes the next one.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The most spares a thread keeps of one stack: enough for the requests a
/// thread readies at once, few enough that an idle route holds little.
const KEEP: usize = 8;

/// The spares of one worker thread, of one table generation.
struct Spares<S> {
    generation: u64,
    /// `(stack id, a clone of it)`.
    stacks: Vec<(usize, S)>,
}

/// Names a stack among the spares: its table's generation and its place.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StackId {
    generation: u64,
    index: usize,
}

/// Hands out the ids of one routing table's stacks.
#[derive(Debug)]
pub(crate) struct StackIds {
    generation: u64,
    next: usize,
}

impl StackIds {
    /// Ids for a new table: every spare of an older one is stale.
    pub(crate) fn new() -> Self {
        StackIds {
            generation: GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
            next: 0,
        }
    }

    pub(crate) fn next(&mut self) -> StackId {
        self.next += 1;
        StackId {
            generation: self.generation,
            index: self.next,
        }
    }
}

thread_local! {
    static SPARES: RefCell<Spares<crate::table::Stack>> = const {
        RefCell::new(Spares { generation: 0, stacks: Vec::new() })
    };
}

/// Calls a spare clone of `stack` (named `id`) with `request`, cloning
/// `stack` when this thread has none to spare.
pub(crate) async fn call<Req>(
    id: StackId,
    stack: &crate::table::Stack,
    request: Req,
) -> Result<
    <crate::table::Stack as Service<Req>>::Response,
    <crate::table::Stack as Service<Req>>::Error,
>
where
    crate::table::Stack: Service<Req>,
{
    let mut service = take(id).unwrap_or_else(|| stack.clone());
    poll_fn(|cx| service.poll_ready(cx)).await?;
    let answer = service.call(request);
    give_back(id, service);
    answer.await
}

fn take(id: StackId) -> Option<crate::table::Stack> {
    SPARES.with(|spares| {
        let mut spares = spares.borrow_mut();
        if id.generation > spares.generation {
            // A reload: the table these spares came from is gone.
            spares.generation = id.generation;
            spares.stacks.clear();
        } else if id.generation < spares.generation {
            // A request that began on the table before the reload.
            return None;
        }
        let at = spares.stacks.iter().rposition(|(i, _)| *i == id.index)?;
        Some(spares.stacks.swap_remove(at).1)
    })
}

fn give_back(id: StackId, service: crate::table::Stack) {
    SPARES.with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.generation != id.generation {
            return;
        }
        let kept = spares.stacks.iter().filter(|(i, _)| *i == id.index).count();
        if kept < KEEP {
            spares.stacks.push((id.index, service));
        }
    });
}
