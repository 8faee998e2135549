//! The `details` member: Anthropic's `{"error_code": ..}`, or Google's list
//! of typed details (`ErrorInfo`, `QuotaFailure`, `RetryInfo`).

use std::fmt;

use serde_core::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::json::{Key, Leaf, container, drain_seq, skip, tolerant};

/// What `details` says.
#[derive(Debug, Default)]
pub(crate) struct Details<'de> {
    /// Anthropic `details.error_code`.
    pub(crate) error_code: Leaf<'de>,
    /// Google `ErrorInfo.reason`.
    pub(crate) info_reason: Leaf<'de>,
    /// A Google `QuotaFailure` violation whose `quotaId` is per day.
    pub(crate) per_day: bool,
    /// The lowest per-minute request quota a `QuotaFailure` names.
    pub(crate) requests_per_minute: Option<u64>,
    /// Google `RetryInfo.retryDelay`.
    pub(crate) retry_delay: Leaf<'de>,
}

fn details_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<Details<'de>, A::Error> {
    let mut d = Details::default();
    while let Some(key) = m.next_key::<Key>()? {
        match key {
            Key::ErrorCode => d.error_code = m.next_value()?,
            _ => skip(&mut m)?,
        }
    }
    Ok(d)
}

fn details_seq<'de, A: SeqAccess<'de>>(mut s: A) -> Result<Details<'de>, A::Error> {
    let mut d = Details::default();
    while let Some(item) = s.next_element::<Item<'de>>()? {
        let ty = item.ty.as_str().unwrap_or_default();
        // A detail with a reason and no `@type` (a trimmed copy) is read as
        // the `ErrorInfo` it almost always is.
        let info = ty.ends_with("ErrorInfo") || (ty.is_empty() && item.reason.as_str().is_some());
        if info && d.info_reason.as_str().is_none() {
            d.info_reason = item.reason;
        } else if ty.ends_with("QuotaFailure") {
            d.per_day |= item.violations.per_day;
            d.requests_per_minute = d
                .requests_per_minute
                .or(item.violations.requests_per_minute);
        } else if ty.ends_with("RetryInfo") {
            d.retry_delay = item.retry_delay;
        }
    }
    Ok(d)
}

container!(Details<'de>, map: details_map, seq: details_seq);

/// One typed detail; its `@type` may come after its fields.
#[derive(Default)]
struct Item<'de> {
    ty: Leaf<'de>,
    reason: Leaf<'de>,
    retry_delay: Leaf<'de>,
    violations: Violations<'de>,
}

fn item_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<Item<'de>, A::Error> {
    let mut item = Item::default();
    while let Some(key) = m.next_key::<Key>()? {
        match key {
            Key::AtType => item.ty = m.next_value()?,
            Key::Reason => item.reason = m.next_value()?,
            Key::RetryDelay => item.retry_delay = m.next_value()?,
            Key::Violations => item.violations = m.next_value()?,
            _ => skip(&mut m)?,
        }
    }
    Ok(item)
}

container!(Item<'de>, map: item_map, seq: drain_seq);

/// What a `QuotaFailure`'s violations say: whether any quota is per day
/// (`quotaId` `…PerDay…`), and the value of the lowest per-minute request
/// quota among them (`quotaId` `…Requests…PerMinute…`, or a `quotaMetric`
/// of `…requests`, with its `quotaValue`).
#[derive(Default)]
struct Violations<'de> {
    per_day: bool,
    requests_per_minute: Option<u64>,
    _body: std::marker::PhantomData<&'de ()>,
}

fn violation_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<Violations<'de>, A::Error> {
    let (mut id, mut metric, mut value) = (Leaf::Other, Leaf::Other, Leaf::Other);
    while let Some(key) = m.next_key::<Key>()? {
        match key {
            Key::QuotaId => id = m.next_value()?,
            Key::QuotaMetric => metric = m.next_value()?,
            Key::QuotaValue => value = m.next_value()?,
            _ => skip(&mut m)?,
        }
    }
    let id = id.as_str().unwrap_or_default();
    let requests =
        id.contains("Requests") || metric.as_str().is_some_and(|m| m.ends_with("requests"));
    let value = match value {
        Leaf::Num(n) => Some(n),
        Leaf::Str(s) => s.trim().parse().ok(),
        Leaf::Other => None,
    };
    Ok(Violations {
        per_day: id.contains("PerDay"),
        requests_per_minute: value.filter(|&n| n > 0 && requests && id.contains("PerMinute")),
        _body: std::marker::PhantomData,
    })
}

fn violations_seq<'de, A: SeqAccess<'de>>(mut s: A) -> Result<Violations<'de>, A::Error> {
    let mut all = Violations::default();
    while let Some(v) = s.next_element::<Violations<'de>>()? {
        all.per_day |= v.per_day;
        all.requests_per_minute = match (all.requests_per_minute, v.requests_per_minute) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(all)
}

container!(Violations<'de>, map: violation_map, seq: violations_seq);
