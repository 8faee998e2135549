//! [`ClientLimitLayer`]: the callers and their limits.

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::service::ClientLimit;
use super::state::{ClientLimits, ClientSnapshot, ClientState, Shared};

/// Applies [`ClientLimit`]: each named caller held to its own requests and
/// tokens per minute. See the [module docs](super).
///
/// Every service built by a layer (and by its clones) shares the layer's
/// callers and their buckets.
#[derive(Clone)]
pub struct ClientLimitLayer {
    pub(crate) shared: Arc<Shared>,
}

impl ClientLimitLayer {
    /// A layer that knows no caller yet: every request passes, uncounted.
    pub fn new() -> Self {
        ClientLimitLayer {
            shared: Arc::new(Shared::default()),
        }
    }

    /// Counts the caller named `name` and holds it to `limits` (a later
    /// call for the same name replaces its limits and counters). Name every
    /// caller before the layer is cloned or its [`handle`](Self::handle)
    /// taken: those keep the callers named until then.
    pub fn client(mut self, name: impl Into<Arc<str>>, limits: ClientLimits) -> Self {
        let name = name.into();
        let shared = Arc::make_mut(&mut self.shared);
        let state = ClientState::new(name.clone(), limits, &shared.clock);
        shared.clients.insert(name, Arc::new(state));
        self
    }

    /// A handle that reads every caller's counters.
    pub fn handle(&self) -> ClientLimitHandle {
        ClientLimitHandle {
            shared: self.shared.clone(),
        }
    }
}

impl Default for ClientLimitLayer {
    fn default() -> Self {
        ClientLimitLayer::new()
    }
}

impl<S> Layer<S> for ClientLimitLayer {
    type Service = ClientLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ClientLimit::from_parts(inner, self.shared.clone())
    }
}

impl fmt::Debug for ClientLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.shared.clients.keys().map(|k| &**k).collect();
        names.sort_unstable();
        f.debug_struct("ClientLimitLayer")
            .field("clients", &names)
            .finish()
    }
}

/// Reads the callers' counters of a [`ClientLimitLayer`].
#[derive(Clone)]
pub struct ClientLimitHandle {
    shared: Arc<Shared>,
}

impl ClientLimitHandle {
    /// Every caller's counters and what its limits leave now, by name.
    pub fn snapshot(&self) -> Vec<ClientSnapshot> {
        let mut all: Vec<_> = self
            .shared
            .clients
            .values()
            .map(|c| c.snapshot(&self.shared.clock))
            .collect();
        all.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        all
    }
}

impl fmt::Debug for ClientLimitHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientLimitHandle").finish_non_exhaustive()
    }
}
