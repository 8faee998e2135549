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
            d.per_day |= item.per_day.0;
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
    per_day: PerDay<'de>,
}

fn item_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<Item<'de>, A::Error> {
    let mut item = Item::default();
    while let Some(key) = m.next_key::<Key>()? {
        match key {
            Key::AtType => item.ty = m.next_value()?,
            Key::Reason => item.reason = m.next_value()?,
            Key::RetryDelay => item.retry_delay = m.next_value()?,
            Key::Violations => item.per_day = m.next_value()?,
            _ => skip(&mut m)?,
        }
    }
    Ok(item)
}

container!(Item<'de>, map: item_map, seq: drain_seq);

/// Whether any violation has a per-day `quotaId` (`…PerDay…`).
#[derive(Default)]
struct PerDay<'de>(bool, std::marker::PhantomData<&'de ()>);

fn per_day_map<'de, A: MapAccess<'de>>(mut m: A) -> Result<PerDay<'de>, A::Error> {
    let mut per_day = PerDay::default();
    while let Some(key) = m.next_key::<Key>()? {
        if let Key::QuotaId = key {
            let id = m.next_value::<Leaf<'de>>()?;
            per_day.0 |= id.as_str().is_some_and(|id| id.contains("PerDay"));
        } else {
            skip(&mut m)?;
        }
    }
    Ok(per_day)
}

fn per_day_seq<'de, A: SeqAccess<'de>>(mut s: A) -> Result<PerDay<'de>, A::Error> {
    let mut per_day = PerDay::default();
    while let Some(v) = s.next_element::<PerDay<'de>>()? {
        per_day.0 |= v.0;
    }
    Ok(per_day)
}

container!(PerDay<'de>, map: per_day_map, seq: per_day_seq);
