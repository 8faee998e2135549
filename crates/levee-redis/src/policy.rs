//! When a replica adopts another's breaker open, and the reports it counts.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tokio::time::Instant;

/// When a replica adopts a breaker open that other replicas report.
///
/// Gates and parks are the provider's own words and are adopted at once. A
/// breaker open is a replica's own experience: one replica with a broken
/// network path, a bad DNS answer or an exhausted socket pool sees a
/// healthy account fail. Following it would eject the account from the
/// whole fleet, so by default an open is adopted only once two replicas
/// report it within its cool-off.
///
/// The count is of *other* replicas' reports: a replica whose own breaker
/// opened needs no one's. So in a fleet of two, `Quorum(2)` never adopts
/// (use `Follow` there), and in a fleet of `n`, `Quorum(n)` never does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

/// What the fleet says of one failure domain.
#[derive(Debug, Default)]
struct Domain {
    /// Open reports by replica: until when they stand, and why.
    by_replica: HashMap<String, (Instant, String)>,
    /// Replicas whose open was made by hand: never counted toward a
    /// quorum, but ended by an operator's close like any other.
    by_hand: HashSet<String>,
    /// When a replica last reported the domain recovered: a report made
    /// before it is stale, whatever is still stored.
    recovered_at: Option<Instant>,
}

/// The breaker opens other replicas report, per layer and domain, each
/// until its cool-off ends (and its grace after).
#[derive(Debug, Default)]
pub(crate) struct Reports {
    by_domain: HashMap<(String, String), Domain>,
}

impl Reports {
    /// Records `replica`'s open of `domain`, made at `made_at` and standing
    /// until `until`; the live reports after it, with the latest deadline
    /// among them. `None` if the report is older than a recovery since.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn report(
        &mut self,
        layer: &str,
        domain: &str,
        replica: &str,
        made_at: Instant,
        until: Instant,
        reason: &str,
        now: Instant,
    ) -> Option<(u32, Instant)> {
        let d = self
            .by_domain
            .entry((layer.to_owned(), domain.to_owned()))
            .or_default();
        if d.recovered_at.is_some_and(|at| made_at < at) {
            return None;
        }
        d.by_replica.retain(|_, (at, _)| *at > now);
        d.by_replica
            .insert(replica.to_owned(), (until, reason.to_owned()));
        let latest = d
            .by_replica
            .values()
            .map(|(at, _)| *at)
            .max()
            .unwrap_or(until);
        let count = u32::try_from(d.by_replica.len()).unwrap_or(u32::MAX);
        Some((count, latest))
    }

    /// Records an open made by hand on `replica` (not counted).
    pub(crate) fn by_hand(&mut self, layer: &str, domain: &str, replica: &str) {
        self.by_domain
            .entry((layer.to_owned(), domain.to_owned()))
            .or_default()
            .by_hand
            .insert(replica.to_owned());
    }

    /// A replica's probe found `domain` healthy at `now`: every report
    /// made before is stale (those replicas probe again and say so).
    pub(crate) fn recovered(&mut self, layer: &str, domain: &str, now: Instant) {
        let d = self
            .by_domain
            .entry((layer.to_owned(), domain.to_owned()))
            .or_default();
        d.by_replica.clear();
        d.recovered_at = Some(now);
    }

    /// Forgets every report of `domain` (an operator closed it), returning
    /// the replicas whose opens it ends.
    pub(crate) fn clear(&mut self, layer: &str, domain: &str) -> Vec<String> {
        self.by_domain
            .remove(&(layer.to_owned(), domain.to_owned()))
            .map(|d| {
                let mut replicas: Vec<String> = d.by_replica.into_keys().chain(d.by_hand).collect();
                replicas.sort_unstable();
                replicas.dedup();
                replicas
            })
            .unwrap_or_default()
    }

    /// Drops the reports a full read of the store no longer holds although
    /// their cool-off runs (the replica recovered or was closed, and the
    /// notice was lost), and those past their grace. A report whose
    /// cool-off ended stands through its `grace` with its key gone: its
    /// replica is sending its probe. Opens by hand not stored any more are
    /// forgotten; a recovery is forgotten once nothing it made stale can
    /// still be stored.
    pub(crate) fn retain_seen(
        &mut self,
        seen: &HashSet<(String, String, String)>,
        now: Instant,
        grace: Duration,
        longest: Duration,
    ) {
        self.by_domain.retain(|(layer, domain), d| {
            let listed =
                |replica: &String| seen.contains(&(layer.clone(), domain.clone(), replica.clone()));
            d.by_replica.retain(|replica, (until, _)| {
                let cooling_off = now + grace < *until;
                *until > now && (!cooling_off || listed(replica))
            });
            d.by_hand.retain(|replica| listed(replica));
            if d.recovered_at
                .is_some_and(|at| now.saturating_duration_since(at) > longest)
            {
                d.recovered_at = None;
            }
            !d.by_replica.is_empty() || !d.by_hand.is_empty() || d.recovered_at.is_some()
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
        let mut report = |replica, until, at| r.report("", "d", replica, at, until, "x", at);
        assert_eq!(report("a", later(10), now), Some((1, later(10))));
        assert_eq!(
            report("a", later(12), now),
            Some((1, later(12))),
            "one replica once"
        );
        assert_eq!(report("b", later(11), now), Some((2, later(12))));
        // a's report lapses
        assert_eq!(report("c", later(20), later(13)), Some((1, later(20))));
        assert_eq!(r.clear("", "d"), vec!["c".to_owned()]);
    }

    #[test]
    fn a_recovery_makes_every_earlier_report_stale() {
        let now = Instant::now();
        let at = |s| now + Duration::from_secs(s);
        let mut r = Reports::default();
        r.report("", "d", "a", now, at(30), "x", now);
        r.report("", "d", "b", now, at(30), "x", now);
        r.recovered("", "d", at(5));
        // b's key is still stored: read back, made before the recovery.
        assert_eq!(r.report("", "d", "b", now, at(30), "x", at(6)), None);
        // a's probe fails later: a fresh report counts.
        assert_eq!(
            r.report("", "d", "a", at(7), at(17), "x", at(7)),
            Some((1, at(17)))
        );
    }

    #[test]
    fn a_read_of_the_store_drops_reports_deleted_early_but_not_those_in_their_grace() {
        let now = Instant::now();
        let grace = Duration::from_secs(10);
        let longest = Duration::from_secs(900);
        let at = |s| now + Duration::from_secs(s);
        let mut r = Reports::default();
        // Cool-offs ending at 5 s and 30 s (reports stand 10 s more).
        r.report("", "d", "probing", now, at(15), "x", now);
        r.report("", "d", "deleted", now, at(40), "x", now);
        r.report("", "d", "listed", now, at(40), "x", now);
        r.by_hand("", "d", "operator");
        let seen = [("".to_owned(), "d".to_owned(), "listed".to_owned())].into();
        r.retain_seen(&seen, at(6), grace, longest);
        let (count, _) = r
            .report("", "d", "listed", at(6), at(40), "x", at(6))
            .unwrap();
        assert_eq!(
            count, 2,
            "probing (in its grace) and listed stand; deleted is gone"
        );
        r.retain_seen(&seen, at(16), grace, longest);
        let (count, _) = r
            .report("", "d", "listed", at(16), at(40), "x", at(16))
            .unwrap();
        assert_eq!(count, 1, "past its grace");
        assert_eq!(
            r.clear("", "d"),
            vec!["listed".to_owned()],
            "the open by hand went"
        );
    }
}
