//! What one replica tells the others: a decision, encoded as a small JSON
//! object, and decoded with every field checked and bounded.
//!
//! A value read from Redis is input like any response body: another
//! version, a hand-written key or a corrupt write must give a typed error
//! and change nothing.
//!
//! # Replicas of two releases
//!
//! During a rolling upgrade the fleet holds replicas of the old release and
//! the new one, reading each other's notices:
//! - A release may add a field: older replicas read the notice and ignore
//!   the field, newer ones read an older notice without it (every added
//!   field has a default).
//! - A release may add a kind of decision: older replicas refuse that
//!   notice (counted as a decode error, never applied) and keep deciding
//!   for themselves, as a replica without the fleet does.
//! - A change that an older replica would misread (a field whose meaning
//!   changes) raises the format's version (`v`): replicas of the two then
//!   ignore each other's notices until the upgrade ends.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The format's version: a notice of any other is refused, so replicas of
/// two releases never misread each other.
pub(crate) const VERSION: u32 = 1;

/// The longest wait a notice may carry: a month, like a provider's reset
/// read from its headers. Gates and breakers are bounded further where
/// they are applied.
pub const MAX_WAIT: Duration = Duration::from_secs(31 * 24 * 3600);

/// The largest encoded notice read: far above any real one (a few hundred
/// bytes), far below what would cost memory.
pub const MAX_NOTICE_BYTES: usize = 4096;

const MAX_SCOPE: usize = 512;
const MAX_LAYER: usize = 128;
const MAX_REPLICA: usize = 128;
const MAX_REASON: usize = 512;

/// Which decision a notice carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Kind {
    /// A quota scope was throttled (a `429` with its wait).
    Gated,
    /// A billing scope's quota or spend cap ran out.
    Parked,
    /// A failure domain's breaker opened, on traffic or by hand.
    Opened,
    /// An operator isolated a failure domain.
    Isolated,
    /// A probe found a failure domain healthy again.
    Recovered,
    /// An operator closed a failure domain's breaker.
    Closed,
    /// An operator unparked a billing scope.
    Unparked,
    /// A replica's failures of a failure domain in a row (`count`; zero:
    /// its streak ended), counted with the other replicas' toward the
    /// breaker's threshold.
    Failing,
    /// A replica gave back a failure domain's probe lease unused (no call
    /// came to send the probe): a replica waiting on it asks for it now.
    LeaseFreed,
    /// A replica is alive (a heartbeat, stored for a few reads of the
    /// store): the fleet's members share the providers' limits.
    Member,
}

impl Kind {
    /// Whether the decision lasts a wait (and so needs one).
    pub(crate) fn has_wait(self) -> bool {
        matches!(
            self,
            Kind::Gated | Kind::Parked | Kind::Opened | Kind::Member
        )
    }

    /// Whether a notice of this kind carrying `count` lasts a wait: the
    /// kinds that always do, and a failure streak that has not ended.
    pub(crate) fn timed(self, count: u32) -> bool {
        self.has_wait() || (self == Kind::Failing && count > 0)
    }

    /// Whether the decision ends a failure domain's open (a probe found
    /// it healthy, or an operator closed it).
    pub(crate) fn ends_open(self) -> bool {
        matches!(self, Kind::Recovered | Kind::Closed)
    }

    /// `gated`, `parked`, … as in the encoding.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Gated => "gated",
            Kind::Parked => "parked",
            Kind::Opened => "opened",
            Kind::Isolated => "isolated",
            Kind::Recovered => "recovered",
            Kind::Closed => "closed",
            Kind::Unparked => "unparked",
            Kind::Failing => "failing",
            Kind::LeaseFreed => "lease_freed",
            Kind::Member => "member",
        }
    }
}

/// One replica's decision about one scope of one breaker layer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Notice {
    /// What was decided.
    pub kind: Kind,
    /// The name the layer was attached under (several layers, such as a
    /// failover's targets, share one fleet).
    pub layer: String,
    /// The scope's key: a failure domain, quota scope or billing scope.
    pub scope: String,
    /// The replica that decided.
    pub replica: String,
    /// How long the decision lasts from when it was sent (zero for those
    /// without a deadline).
    pub wait: Duration,
    /// Why, in the deciding replica's words (`status:429`).
    pub reason: String,
    /// Made by an operator rather than by traffic: adopted by every replica
    /// whatever the breaker policy.
    pub manual: bool,
    /// A number the kind carries: a [`Failing`](Kind::Failing) streak's
    /// failures, or for an [`Opened`](Kind::Opened) that a failed probe
    /// made, the fleet's failed probes since the domain last recovered (its
    /// cool-off growth). Zero otherwise, and left out of the encoding then.
    pub count: u32,
}

// Unknown fields are read and ignored: a later release may add one.
#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    v: u32,
    kind: Kind,
    #[serde(borrow)]
    layer: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    scope: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    replica: std::borrow::Cow<'a, str>,
    wait_ms: u64,
    #[serde(borrow, default)]
    reason: std::borrow::Cow<'a, str>,
    #[serde(default)]
    manual: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    count: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Notice {
    /// The notice a replica sends when it gives back a failure domain's
    /// probe lease unused: `layer` and `scope` name the domain.
    pub fn lease_freed(layer: &str, scope: &str, replica: &str) -> Notice {
        Notice {
            kind: Kind::LeaseFreed,
            layer: layer.to_owned(),
            scope: scope.to_owned(),
            replica: replica.to_owned(),
            wait: Duration::ZERO,
            reason: String::new(),
            manual: false,
            count: 0,
        }
    }

    /// The heartbeat of `replica`, living `ttl`.
    pub fn member(replica: &str, ttl: Duration) -> Notice {
        Notice {
            kind: Kind::Member,
            layer: String::new(),
            scope: "*".to_owned(),
            replica: replica.to_owned(),
            wait: ttl,
            reason: String::new(),
            manual: false,
            count: 0,
        }
    }

    /// The notice as sent: a JSON object of the format's version.
    pub fn encode(&self) -> Vec<u8> {
        let wire = Wire {
            v: VERSION,
            kind: self.kind,
            layer: self.layer.as_str().into(),
            scope: self.scope.as_str().into(),
            replica: self.replica.as_str().into(),
            wait_ms: u64::try_from(self.wait.as_millis()).unwrap_or(u64::MAX),
            reason: self.reason.as_str().into(),
            manual: self.manual,
            count: self.count,
        };
        serde_json::to_vec(&wire).expect("a notice always serializes")
    }

    /// Reads a notice, refusing anything it cannot apply: another version,
    /// an unknown kind, an empty or oversized name, a wait beyond
    /// [`MAX_WAIT`] or missing where the decision needs one. A field it does
    /// not know (a later release's) is ignored.
    pub fn decode(bytes: &[u8]) -> Result<Notice, DecodeError> {
        if bytes.len() > MAX_NOTICE_BYTES {
            return Err(DecodeError::new(format!(
                "{} bytes, more than {MAX_NOTICE_BYTES}",
                bytes.len()
            )));
        }
        let wire: Wire<'_> =
            serde_json::from_slice(bytes).map_err(|e| DecodeError::new(e.to_string()))?;
        if wire.v != VERSION {
            return Err(DecodeError::new(format!(
                "version {}, this replica reads {VERSION}",
                wire.v
            )));
        }
        bounded("scope", &wire.scope, MAX_SCOPE, false)?;
        bounded("layer", &wire.layer, MAX_LAYER, true)?;
        bounded("replica", &wire.replica, MAX_REPLICA, false)?;
        bounded("reason", &wire.reason, MAX_REASON, true)?;
        let wait = Duration::from_millis(wire.wait_ms);
        if wait > MAX_WAIT {
            return Err(DecodeError::new(format!(
                "wait of {} ms, more than a month",
                wire.wait_ms
            )));
        }
        let has_wait = wire.kind.timed(wire.count);
        if has_wait && wait.is_zero() {
            return Err(DecodeError::new(format!(
                "{} with no wait",
                wire.kind.as_str()
            )));
        }
        Ok(Notice {
            kind: wire.kind,
            layer: wire.layer.into_owned(),
            scope: wire.scope.into_owned(),
            replica: wire.replica.into_owned(),
            wait: if has_wait { wait } else { Duration::ZERO },
            reason: wire.reason.into_owned(),
            manual: wire.manual,
            count: wire.count,
        })
    }
}

fn bounded(field: &str, value: &str, max: usize, may_be_empty: bool) -> Result<(), DecodeError> {
    if value.is_empty() && !may_be_empty {
        return Err(DecodeError::new(format!("empty {field}")));
    }
    if value.len() > max {
        return Err(DecodeError::new(format!(
            "{field} of {} bytes, more than {max}",
            value.len()
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(DecodeError::new(format!(
            "{field} with a control character"
        )));
    }
    Ok(())
}

/// A value in the store that is not a notice this version wrote: logged and
/// counted, never applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    what: String,
}

impl DecodeError {
    fn new(what: String) -> Self {
        DecodeError { what }
    }

    /// A stored decision whose expiry contradicts its kind: a gate, park or
    /// open stored forever, an isolation that expires, or a one-off notice
    /// (recovered, closed, unparked) stored at all.
    pub(crate) fn expiry(kind: Kind, ttl: Option<Duration>) -> Self {
        DecodeError::new(match (kind, ttl) {
            (Kind::Recovered | Kind::Closed | Kind::Unparked | Kind::LeaseFreed, _) => {
                format!("{} is never stored", kind.as_str())
            }
            (_, None) => format!("{} stored with no expiry", kind.as_str()),
            (_, Some(_)) => format!("{} stored with an expiry", kind.as_str()),
        })
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a fleet notice: {}", self.what)
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn gated() -> Notice {
        Notice {
            kind: Kind::Gated,
            layer: String::new(),
            scope: "api.openai.com/gpt-4o".into(),
            replica: "web-1".into(),
            wait: Duration::from_millis(30_000),
            reason: "status:429".into(),
            manual: false,
            count: 0,
        }
    }

    #[test]
    fn a_notice_survives_its_encoding() {
        let n = gated();
        assert_eq!(Notice::decode(&n.encode()).unwrap(), n);
        let text = String::from_utf8(n.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"kind":"gated","layer":"","scope":"api.openai.com/gpt-4o","replica":"web-1","wait_ms":30000,"reason":"status:429","manual":false}"#
        );
    }

    #[test]
    fn garbage_and_other_versions_are_typed_errors() {
        for (bytes, says) in [
            (&b"hello"[..], "expected value"),
            (br#"{"v":2,"kind":"gated","layer":"","scope":"a","replica":"r","wait_ms":1}"#, "version 2"),
            (br#"{"v":1,"kind":"exploded","layer":"","scope":"a","replica":"r","wait_ms":1}"#, "unknown variant"),
            (br#"{"v":1,"kind":"gated","layer":"","scope":"","replica":"r","wait_ms":1}"#, "empty scope"),
            (br#"{"v":1,"kind":"gated","layer":"","scope":"a","replica":"r","wait_ms":0}"#, "gated with no wait"),
            (br#"{"v":1,"kind":"parked","layer":"","scope":"a","replica":"r","wait_ms":99999999999999}"#, "more than a month"),
            (br#"{"v":1,"kind":"gated","layer":"","scope":"a","replica":"r","wait_ms":-5}"#, "invalid value"),
            (br#"{"v":1,"kind":"gated","layer":"","scope":"a\nb","replica":"r","wait_ms":5}"#, "control character"),
        ] {
            let err = Notice::decode(bytes).unwrap_err().to_string();
            assert!(err.starts_with("not a fleet notice: "), "{err}");
            assert!(err.contains(says), "{err} should say {says}");
        }
        let huge = vec![b' '; MAX_NOTICE_BYTES + 1];
        assert!(
            Notice::decode(&huge)
                .unwrap_err()
                .to_string()
                .contains("more than 4096")
        );
    }

    #[test]
    fn replicas_of_two_releases_read_each_others_notices() {
        // As the first release wrote it, and as one without the fields
        // added since (`reason`, `manual`) would have.
        let first = br#"{"v":1,"kind":"gated","layer":"","scope":"api.openai.com/gpt-4o","replica":"web-1","wait_ms":30000,"reason":"status:429","manual":false}"#;
        assert_eq!(Notice::decode(first).unwrap(), gated());
        let fewer = br#"{"v":1,"kind":"gated","layer":"","scope":"api.openai.com/gpt-4o","replica":"web-1","wait_ms":30000}"#;
        let n = Notice::decode(fewer).unwrap();
        assert_eq!((n.reason.as_str(), n.manual), ("", false));
        // A later release's field is read past.
        let later = br#"{"v":1,"kind":"gated","layer":"","scope":"api.openai.com/gpt-4o","replica":"web-1","wait_ms":30000,"reason":"status:429","manual":false,"model":"gpt-4o","lease":{"ttl_ms":6000}}"#;
        assert_eq!(Notice::decode(later).unwrap(), gated());
        // What this release writes, an older reader of the fields it knew
        // reads the same: those fields are all still there, unchanged.
        let ours: serde_json::Value = serde_json::from_slice(&gated().encode()).unwrap();
        let theirs: serde_json::Value = serde_json::from_slice(first).unwrap();
        for field in ["v", "kind", "layer", "scope", "replica", "wait_ms"] {
            assert_eq!(ours[field], theirs[field], "{field}");
        }
        // A later release's kind of decision is refused, not misapplied.
        let err = Notice::decode(
            br#"{"v":1,"kind":"lease_stolen","layer":"","scope":"a","replica":"r","wait_ms":0}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown variant"), "{err}");
    }

    fn kinds() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::Gated),
            Just(Kind::Parked),
            Just(Kind::Opened),
            Just(Kind::Isolated),
            Just(Kind::Recovered),
            Just(Kind::Closed),
            Just(Kind::Unparked),
            Just(Kind::Failing),
            Just(Kind::LeaseFreed),
            Just(Kind::Member),
        ]
    }

    proptest! {
        #[test]
        fn any_bytes_decode_to_a_bounded_notice_or_a_typed_error(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(n) = Notice::decode(&bytes) {
                prop_assert!(n.wait <= MAX_WAIT);
                prop_assert!(!n.scope.is_empty() && n.scope.len() <= MAX_SCOPE);
                prop_assert!(!n.replica.is_empty());
            }
        }

        #[test]
        fn any_json_shaped_value_decodes_bounded_or_not_at_all(
            v in 0u32..3,
            kind in "[a-z_]{0,12}",
            scope in "\\PC{0,40}",
            replica in "[a-z0-9-]{0,8}",
            wait_ms in any::<u64>(),
            extra in proptest::option::of("[a-z]{1,6}"),
        ) {
            let mut text = format!(
                r#"{{"v":{v},"kind":{kind:?},"layer":"","scope":{scope:?},"replica":{replica:?},"wait_ms":{wait_ms}"#
            );
            if let Some(extra) = extra {
                text.push_str(&format!(r#","{extra}":1"#));
            }
            text.push('}');
            match Notice::decode(text.as_bytes()) {
                Ok(n) => {
                    prop_assert_eq!(v, VERSION);
                    prop_assert!(n.wait <= MAX_WAIT);
                    prop_assert!(!n.kind.has_wait() || !n.wait.is_zero());
                    prop_assert_eq!(&n.scope, &scope);
                }
                Err(e) => prop_assert!(e.to_string().starts_with("not a fleet notice: ")),
            }
        }

        #[test]
        fn every_notice_within_bounds_survives_its_encoding(
            kind in kinds(),
            layer in "[a-z0-9._-]{0,16}",
            scope in "[a-zA-Z0-9./:_-]{1,80}",
            replica in "[a-z0-9._-]{1,16}",
            wait_ms in 1u64..=MAX_WAIT.as_millis() as u64,
            reason in "[ -~]{0,64}",
            manual in any::<bool>(),
            count in prop_oneof![Just(0u32), any::<u32>()],
        ) {
            let timed = kind.timed(count);
            let n = Notice {
                kind,
                layer,
                scope,
                replica,
                wait: if timed { Duration::from_millis(wait_ms) } else { Duration::ZERO },
                reason,
                manual,
                count,
            };
            prop_assert_eq!(Notice::decode(&n.encode()).unwrap(), n);
        }
    }

    #[test]
    fn a_notice_carries_durations_only_so_clock_skew_never_enters_it() {
        // Every field a notice has: a wait from the moment it was sent, and
        // no instant of any replica's clock.
        let value: serde_json::Value = serde_json::from_slice(&gated().encode()).unwrap();
        let mut fields: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "kind", "layer", "manual", "reason", "replica", "scope", "v", "wait_ms"
            ]
        );
    }

    #[test]
    fn a_failing_streak_carries_its_count_and_its_memory_and_an_ended_one_neither() {
        let failing = Notice {
            kind: Kind::Failing,
            count: 3,
            wait: Duration::from_secs(30),
            ..gated()
        };
        let text = String::from_utf8(failing.encode()).unwrap();
        assert!(
            text.contains(r#""kind":"failing""#) && text.contains(r#""count":3"#),
            "{text}"
        );
        assert_eq!(Notice::decode(text.as_bytes()).unwrap(), failing);
        let no_wait = br#"{"v":1,"kind":"failing","layer":"","scope":"a","replica":"r","wait_ms":0,"count":2}"#;
        assert!(
            Notice::decode(no_wait)
                .unwrap_err()
                .to_string()
                .contains("failing with no wait")
        );
        let ended = br#"{"v":1,"kind":"failing","layer":"","scope":"a","replica":"r","wait_ms":0}"#;
        let n = Notice::decode(ended).unwrap();
        assert_eq!((n.count, n.wait), (0, Duration::ZERO));
    }

    #[test]
    fn decisions_without_a_deadline_carry_no_wait() {
        let bytes =
            br#"{"v":1,"kind":"recovered","layer":"x","scope":"a","replica":"r","wait_ms":5000}"#;
        assert_eq!(Notice::decode(bytes).unwrap().wait, Duration::ZERO);
    }
}
