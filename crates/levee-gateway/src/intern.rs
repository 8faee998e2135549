//! Names from the configuration, interned: a request's scope and its
//! metrics' labels are `&'static str`, so they are copied, never allocated,
//! and compared by address.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};

/// `name`, kept once for the process's life. Names come from configuration
/// files (targets, models, accounts, clients), so there are few of them,
/// even across reloads.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(&name) = names.get(name) {
        return name;
    }
    let leaked: &'static str = Box::leak(name.into());
    names.insert(leaked);
    leaked
}
