//! Reporting one call's outcome, from its future or from its response body.

use std::borrow::Cow;

use levee_core::breaker::Permit;
use levee_core::classify::{Classification, StreamScanner, Verdict};
use tokio::time::Instant;

use super::scope::{KEY_SEPARATOR, ModelBuf};
use super::shared::{DomainHandle, Report};

/// What a call needs to report its outcome. No reference counts: the domain
/// is a `Copy` handle and the scope keys are held inline.
pub(crate) struct Tracker {
    pub(crate) domain: DomainHandle,
    pub(crate) permit: Permit,
    pub(crate) scopes: CallScopes,
    /// When the call becomes slow to answer (start + the slow-call
    /// threshold on time to first byte), if a threshold is configured.
    pub(crate) slow_after: Option<Instant>,
    /// When a stream becomes slow in total, if a threshold is configured.
    pub(crate) slow_total_after: Option<Instant>,
    pub(crate) settled: bool,
}

/// What a call must remember to name its quota and billing scopes on the
/// slow path. The failure domain's key is in the registry slot the tracker
/// already holds, so only the model (often none) is copied per call.
pub(crate) struct CallScopes {
    /// The model, when the request named one.
    pub(crate) model: Option<ModelBuf>,
    /// Whether the failure domain's key already ends with `/model`
    /// (`isolate_by_model`).
    pub(crate) isolated: bool,
    /// An explicit billing scope; `None` means the failure domain.
    pub(crate) billing: Option<Box<str>>,
}

impl CallScopes {
    /// The quota scope, `domain/model`, given the failure domain's key.
    pub(crate) fn quota<'a>(&self, domain_key: &'a str) -> Cow<'a, str> {
        match &self.model {
            Some(model) if !self.isolated => {
                Cow::Owned(format!("{domain_key}{KEY_SEPARATOR}{}", model.as_str()))
            }
            _ => Cow::Borrowed(domain_key),
        }
    }

    /// The billing scope, given the failure domain's key.
    pub(crate) fn billing<'a>(&'a self, domain_key: &'a str) -> &'a str {
        if let Some(b) = &self.billing {
            return b;
        }
        match &self.model {
            // `domain/model`: the billing scope is the account, `domain`.
            Some(model) if self.isolated => domain_key
                .strip_suffix(model.as_str())
                .and_then(|d| d.strip_suffix(KEY_SEPARATOR))
                .unwrap_or(domain_key),
            _ => domain_key,
        }
    }
}

impl Tracker {
    /// Whether the first byte came later than the slow-call threshold.
    pub(crate) fn is_slow(&self) -> bool {
        self.slow_after.is_some_and(|at| Instant::now() > at)
    }

    fn is_slow_in_total(&self) -> bool {
        self.slow_total_after.is_some_and(|at| Instant::now() > at)
    }

    /// Reports the outcome. A plain success on a closed, clean breaker
    /// writes nothing: it only reads the published status word.
    pub(crate) fn settle(&mut self, c: &Classification, slow: bool) {
        self.settled = true;
        if c.verdict == Verdict::Success && !slow && self.permit.probe.is_none() {
            match self.domain.hot() {
                Some(hot) if !hot.success_is_noop() => {}
                // Clean, or evicted (only idle entries are): nothing to tell.
                _ => return,
            }
        }
        let Some(cell) = self.domain.lock() else {
            return;
        };
        let Some(shared) = cell.shared.upgrade() else {
            return;
        };
        let domain_key = cell.key().to_owned();
        shared.record(
            cell,
            Report {
                handle: self.domain,
                permit: self.permit,
                classification: c,
                slow,
                domain_key: &domain_key,
                quota_key: &self.scopes.quota(&domain_key),
                billing_key: self.scopes.billing(&domain_key),
            },
        );
    }

    /// The call ended without an outcome that says anything (a Levee
    /// rejection from below): hand back a probe slot, count nothing.
    pub(crate) fn settle_neutral(&mut self) {
        self.settled = true;
        self.release();
    }

    fn release(&self) {
        if self.permit.probe.is_none() {
            return;
        }
        let Some(cell) = self.domain.lock() else {
            return;
        };
        if let Some(shared) = cell.shared.upgrade() {
            shared.release(cell, self.domain, self.permit);
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if !self.settled {
            // Cancelled (the caller dropped the future, or a streamed body
            // before its end): neutral, but a probe slot goes back.
            self.release();
        }
    }
}

// === Watch ===

/// A streamed 2xx response under watch: the scanner reads every frame as it
/// passes, and the outcome is reported when the stream decides or ends.
pub(crate) struct Watch {
    scanner: StreamScanner,
    tracker: Tracker,
    slow_first_byte: bool,
}

impl Watch {
    pub(crate) fn new(
        scanner: StreamScanner,
        tracker: Tracker,
        slow_first_byte: bool,
    ) -> Box<Self> {
        Box::new(Watch {
            scanner,
            tracker,
            slow_first_byte,
        })
    }

    fn slow(&self) -> bool {
        self.slow_first_byte || self.tracker.is_slow_in_total()
    }

    /// Feeds one data frame; `true` once the outcome is reported.
    pub(crate) fn feed(&mut self, data: &[u8]) -> bool {
        match self.scanner.feed(data) {
            Some(c) => {
                let slow = self.slow();
                self.tracker.settle(&c, slow);
                true
            }
            None => false,
        }
    }

    /// The stream ended (`None` from the body).
    pub(crate) fn finish(mut self: Box<Self>) {
        let c = self.scanner.finish();
        let slow = self.slow();
        self.tracker.settle(&c, slow);
    }

    /// The body failed mid-stream: the stream was cut.
    pub(crate) fn fail(mut self: Box<Self>) {
        let c = Classification::new(Verdict::Availability, "stream:body_error");
        self.tracker.settle(&c, false);
    }
}
