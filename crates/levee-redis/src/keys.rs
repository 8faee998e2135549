//! The one place keys and the channel are named.

use crate::notice::{Kind, Notice};
use crate::store::Space;

/// The store's keys under one namespace and format version:
/// `{namespace}:v1:s:{gate|park|isolate}:{layer}:{scope}`,
/// `{namespace}:v1:s:open:{layer}:{replica}:{scope}` (a breaker open is one
/// replica's report: a quorum counts them) and
/// `{namespace}:v1:s:streak:{layer}:{replica}:{scope}` (a replica's failures
/// in a row) and `{namespace}:v1:s:member:{replica}` (its heartbeat), with
/// notices on `{namespace}:v1:notices`, indexed in
/// `{namespace}:v1:index`; and the probe leases,
/// `{namespace}:v1:lease:{layer}:{scope}`, outside the index (they hold a
/// replica id, not a notice). Layer names and replica ids hold no `:`, so
/// the scope, which may, comes last.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    space: Space,
}

impl Keys {
    pub(crate) fn new(namespace: &str) -> Self {
        let root = format!("{namespace}:v{}:", crate::notice::VERSION);
        Keys {
            space: Space {
                // Decisions under `s:`, apart from the index's own key.
                prefix: format!("{root}s:"),
                channel: format!("{root}notices"),
                index: format!("{root}index"),
            },
        }
    }

    /// The prefix, channel and index of the fleet's decisions.
    pub(crate) fn space(&self) -> &Space {
        &self.space
    }

    /// The key a lasting decision is stored under; `None` for a notice
    /// that removes one (recovered, closed, unparked).
    pub(crate) fn of(&self, n: &Notice) -> Option<String> {
        Some(match n.kind {
            Kind::Gated => self.state("gate", &n.layer, &n.scope),
            Kind::Parked => self.state("park", &n.layer, &n.scope),
            Kind::Isolated => self.state("isolate", &n.layer, &n.scope),
            Kind::Opened => self.open(&n.layer, &n.replica, &n.scope),
            Kind::Failing if n.count > 0 => self.streak(&n.layer, &n.replica, &n.scope),
            Kind::Member => format!("{}member:{}", self.space.prefix, n.replica),
            Kind::Recovered | Kind::Closed | Kind::Unparked | Kind::Failing | Kind::LeaseFreed => {
                return None;
            }
        })
    }

    /// The keys a removing notice deletes: what it ends. `reporters` are
    /// the replicas known to report the domain open (an operator's close
    /// ends every report).
    pub(crate) fn ended_by<'a>(
        &self,
        n: &Notice,
        reporters: impl IntoIterator<Item = &'a str>,
    ) -> Vec<String> {
        match n.kind {
            Kind::Recovered => vec![self.open(&n.layer, &n.replica, &n.scope)],
            Kind::Closed => {
                let mut keys = vec![
                    self.state("isolate", &n.layer, &n.scope),
                    self.open(&n.layer, &n.replica, &n.scope),
                ];
                keys.extend(
                    reporters
                        .into_iter()
                        .map(|r| self.open(&n.layer, r, &n.scope)),
                );
                keys.sort_unstable();
                keys.dedup();
                keys
            }
            Kind::Unparked => vec![self.state("park", &n.layer, &n.scope)],
            Kind::Failing => vec![self.streak(&n.layer, &n.replica, &n.scope)],
            Kind::Gated
            | Kind::Parked
            | Kind::Opened
            | Kind::Isolated
            | Kind::LeaseFreed
            | Kind::Member => Vec::new(),
        }
    }

    fn state(&self, what: &str, layer: &str, scope: &str) -> String {
        format!("{}{what}:{layer}:{scope}", self.space.prefix)
    }

    fn open(&self, layer: &str, replica: &str, scope: &str) -> String {
        format!("{}open:{layer}:{replica}:{scope}", self.space.prefix)
    }

    fn streak(&self, layer: &str, replica: &str, scope: &str) -> String {
        format!("{}streak:{layer}:{replica}:{scope}", self.space.prefix)
    }

    /// The lease of a failure domain's probe: who sends the fleet's next one.
    pub(crate) fn lease(&self, layer: &str, scope: &str) -> String {
        let root = self
            .space
            .prefix
            .strip_suffix("s:")
            .unwrap_or(&self.space.prefix);
        format!("{root}lease:{layer}:{scope}")
    }
}
