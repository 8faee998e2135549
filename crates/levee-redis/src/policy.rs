//! When a replica adopts another's breaker open, and the reports it counts.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use tokio::time::Instant;

/// When a replica adopts a breaker open that other replicas report.
///
/// Gates and parks are the provider's own words and are adopted at once. A
/// breaker open is a replica's own experience: one replica with a broken
/// network path, a bad DNS answer or an exhausted socket pool sees a
/// healthy account fail. Following it would eject the account from the
/// whole fleet, so by default an open is adopted only once two replicas
/// report it within its cool-off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerPolicy {
    /// Adopt once this many distinct replicas report the domain open
    /// (default 2; at least 1).
    Quorum(u32),
    /// Adopt the first report (`Quorum(1)`): for fleets whose replicas
    /// share one network path, where any replica's failure is everyone's.
    Follow,
    /// Never adopt another replica's open; gates, parks and operators'
    /// actions still travel.
    Local,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy::Quorum(2)
    }
}

impl BreakerPolicy {
    /// Reports needed to adopt, `None` for [`Local`](Self::Local).
    pub(crate) fn needed(self) -> Option<u32> {
        match self {
            BreakerPolicy::Quorum(n) => Some(n.max(1)),
            BreakerPolicy::Follow => Some(1),
            BreakerPolicy::Local => None,
        }
    }
}

impl fmt::Display for BreakerPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BreakerPolicy::Quorum(n) => write!(f, "quorum({n})"),
            BreakerPolicy::Follow => f.write_str("follow"),
            BreakerPolicy::Local => f.write_str("local"),
        }
    }
}

impl FromStr for BreakerPolicy {
    type Err = String;

    /// `quorum(n)`, `quorum` (2), `follow` or `local`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        match s {
            "follow" => return Ok(BreakerPolicy::Follow),
            "local" => return Ok(BreakerPolicy::Local),
            "quorum" => return Ok(BreakerPolicy::default()),
            _ => {}
        }
        let n = s
            .strip_prefix("quorum(")
            .and_then(|rest| rest.strip_suffix(')'))
            .ok_or_else(|| format!("{s:?} is not quorum(n), follow or local"))?;
        match n.trim().parse::<u32>() {
            Ok(n) if n >= 1 => Ok(BreakerPolicy::Quorum(n)),
            _ => Err(format!("quorum needs a count of at least 1, got {n:?}")),
        }
    }
}

/// A domain's open reports (the replica, until when, and why), and
/// whether this replica adopted the open they make.
#[derive(Debug, Default)]
struct Reporters {
    by_replica: HashMap<String, (Instant, String)>,
    adopted: bool,
}

/// The breaker opens other replicas report, per layer and domain, each
/// until its cool-off ends.
#[derive(Debug, Default)]
pub(crate) struct Reports {
    by_domain: HashMap<(String, String), Reporters>,
}

impl Reports {
    /// Records `replica`'s open of `domain` until `until`; the live reports
    /// after it, with the latest deadline among them.
    pub(crate) fn report(
        &mut self,
        layer: &str,
        domain: &str,
        replica: &str,
        until: Instant,
        reason: &str,
        now: Instant,
    ) -> (u32, Instant) {
        let reporters = self
            .by_domain
            .entry((layer.to_owned(), domain.to_owned()))
            .or_default();
        reporters.by_replica.retain(|_, (at, _)| *at > now);
        if reporters.by_replica.is_empty() {
            // Every earlier report lapsed: a new episode needs its quorum.
            reporters.adopted = false;
        }
        reporters
            .by_replica
            .insert(replica.to_owned(), (until, reason.to_owned()));
        let latest = reporters
            .by_replica
            .values()
            .map(|(at, _)| *at)
            .max()
            .unwrap_or(until);
        let count = u32::try_from(reporters.by_replica.len()).unwrap_or(u32::MAX);
        (count, latest)
    }

    /// Records that this replica adopted `domain`'s open: later reports of
    /// the same episode extend it one by one (the quorum was met).
    pub(crate) fn adopted(&mut self, layer: &str, domain: &str) {
        if let Some(r) = self
            .by_domain
            .get_mut(&(layer.to_owned(), domain.to_owned()))
        {
            r.adopted = true;
        }
    }

    /// Whether this replica adopted `domain`'s open in the current episode.
    pub(crate) fn is_adopted(&self, layer: &str, domain: &str) -> bool {
        self.by_domain
            .get(&(layer.to_owned(), domain.to_owned()))
            .is_some_and(|r| r.adopted)
    }

    /// `replica` no longer reports `domain` open (its probe succeeded).
    pub(crate) fn withdraw(&mut self, layer: &str, domain: &str, replica: &str) {
        let key = (layer.to_owned(), domain.to_owned());
        if let Some(reporters) = self.by_domain.get_mut(&key) {
            reporters.by_replica.remove(replica);
            if reporters.by_replica.is_empty() {
                self.by_domain.remove(&key);
            }
        }
    }

    /// Forgets every report of `domain` (an operator closed it), returning
    /// the replicas that had reported it.
    pub(crate) fn clear(&mut self, layer: &str, domain: &str) -> Vec<String> {
        self.by_domain
            .remove(&(layer.to_owned(), domain.to_owned()))
            .map(|r| r.by_replica.into_keys().collect())
            .unwrap_or_default()
    }

    /// Keeps only the reports a full read of the store still holds.
    pub(crate) fn retain_seen(
        &mut self,
        seen: &std::collections::HashSet<(String, String, String)>,
    ) {
        self.by_domain.retain(|(layer, domain), reporters| {
            reporters.by_replica.retain(|replica, _| {
                seen.contains(&(layer.clone(), domain.clone(), replica.clone()))
            });
            !reporters.by_replica.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn policies_parse_from_their_names() {
        assert_eq!("quorum(3)".parse(), Ok(BreakerPolicy::Quorum(3)));
        assert_eq!("quorum".parse(), Ok(BreakerPolicy::Quorum(2)));
        assert_eq!(" follow ".parse(), Ok(BreakerPolicy::Follow));
        assert_eq!("local".parse(), Ok(BreakerPolicy::Local));
        assert!(
            "quorum(0)"
                .parse::<BreakerPolicy>()
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(
            "majority"
                .parse::<BreakerPolicy>()
                .unwrap_err()
                .contains("quorum(n), follow or local")
        );
        for p in [
            BreakerPolicy::Quorum(4),
            BreakerPolicy::Follow,
            BreakerPolicy::Local,
        ] {
            assert_eq!(p.to_string().parse(), Ok(p));
        }
    }

    #[test]
    fn reports_count_distinct_live_replicas() {
        let now = Instant::now();
        let later = |s| now + Duration::from_secs(s);
        let mut r = Reports::default();
        assert_eq!(r.report("", "d", "a", later(10), "x", now), (1, later(10)));
        assert_eq!(
            r.report("", "d", "a", later(12), "x", now),
            (1, later(12)),
            "one replica once"
        );
        assert_eq!(r.report("", "d", "b", later(11), "x", now), (2, later(12)));
        // a's report lapses
        assert_eq!(
            r.report("", "d", "c", later(20), "x", later(13)),
            (1, later(20))
        );
        r.withdraw("", "d", "c");
        assert_eq!(
            r.report("", "d", "b", later(30), "x", later(13)),
            (1, later(30))
        );
        assert_eq!(r.clear("", "d"), vec!["b".to_owned()]);
    }
}
