//! [`Bulkheads`]: named compartments, one per dependency.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::compartment::{BulkheadSnapshot, Compartment};
use super::layer::BulkheadLayer;

/// Named compartments, one per dependency.
///
/// Asking twice for the same name returns the same compartment, so two
/// services calling one dependency share its permits; different names never
/// share. Clones of a `Bulkheads` share its compartments.
///
/// ```
/// use tower_levee::bulkhead::Bulkheads;
///
/// let bulkheads = Bulkheads::new();
/// let llm = bulkheads.compartment("llm", 8);
/// let crm = bulkheads.compartment("crm", 4);
/// let llm_again = bulkheads.compartment("llm", 8);
/// assert_eq!(llm_again.limit(), 8);
/// let names: Vec<_> = bulkheads.snapshot().into_iter().map(|s| s.name).collect();
/// assert_eq!(names, ["crm".into(), "llm".into()]);
/// # let _ = (llm, crm);
/// ```
#[derive(Clone, Default)]
pub struct Bulkheads {
    compartments: Arc<Mutex<HashMap<Arc<str>, Arc<Compartment>>>>,
}

impl Bulkheads {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A layer over the compartment `name`, created with `max_concurrent`
    /// permits if it does not exist yet (at most `isize::MAX`, as
    /// [`BulkheadLayer::named`]). An existing compartment keeps the limit it
    /// was created with.
    pub fn compartment(&self, name: &str, max_concurrent: usize) -> BulkheadLayer {
        let mut map = self.lock();
        let compartment = match map.get(name) {
            Some(c) => c.clone(),
            None => {
                let name: Arc<str> = name.into();
                let c = Arc::new(Compartment::new(name.clone(), max_concurrent));
                map.insert(name, c.clone());
                c
            }
        };
        BulkheadLayer::from_compartment(compartment)
    }

    /// A layer over the existing compartment `name`.
    pub fn get(&self, name: &str) -> Option<BulkheadLayer> {
        self.lock()
            .get(name)
            .cloned()
            .map(BulkheadLayer::from_compartment)
    }

    /// The gauges of every compartment, by name.
    pub fn snapshot(&self) -> Vec<BulkheadSnapshot> {
        let mut all: Vec<_> = self.lock().values().map(|c| c.snapshot()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<Compartment>>> {
        self.compartments.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for Bulkheads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.snapshot()).finish()
    }
}
