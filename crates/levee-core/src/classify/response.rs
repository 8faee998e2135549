//! How a response is read: the [`ResponseView`] a classifier sees, the
//! [`Classify`] trait, and the one decision a layer takes on a response's
//! head ([`HeadDecision`]: classified now, the body first, or a stream to
//! watch).

use std::cell::OnceCell;
use std::time::SystemTime;

use http::{HeaderMap, StatusCode};

use super::body;
use super::custom::{Answer, Seen};
use super::dialect::Dialect;
use super::headers::HeaderFacts;
use super::hints;
use super::provider::ProviderClassifier;
use super::rules;
use super::stream::StreamScanner;
use super::text::Lower;
use super::verdict::{Classification, TransportFailure, Verdict};

/// A response as the classifier sees it: status, headers and a bounded peek of
/// the body (empty for a 2xx that was not peeked).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ResponseView<'a> {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: &'a HeaderMap,
    /// The first bytes of the body (up to the peek bound); may be truncated,
    /// non-UTF-8 or empty.
    pub body: &'a [u8],
    /// The provider dialect, if the caller knows it. Detected from the
    /// response when `None`.
    pub dialect: Option<Dialect>,
    /// Wall-clock now, for hints given as dates when the response carries no
    /// `Date` header. `None` means `SystemTime::now()`.
    pub now: Option<SystemTime>,
}

impl<'a> ResponseView<'a> {
    /// A view with no dialect hint, using the system's wall clock.
    pub fn new(status: StatusCode, headers: &'a HeaderMap, body: &'a [u8]) -> Self {
        ResponseView {
            status,
            headers,
            body,
            dialect: None,
            now: None,
        }
    }

    /// Sets the dialect hint.
    pub fn with_dialect(mut self, dialect: Option<Dialect>) -> Self {
        self.dialect = dialect;
        self
    }

    /// Sets the wall-clock time used for date hints when there is no `Date` header.
    pub fn with_now(mut self, now: SystemTime) -> Self {
        self.now = Some(now);
        self
    }
}

// === HeadDecision ===

/// What a layer does with a response once its head (status and headers)
/// has arrived, decided in one call ([`Classify::classify_head`]), as
/// tower-http's `ClassifyResponse` answers `Ready` or `RequiresEos`.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // returned once per response and moved once
#[non_exhaustive]
pub enum HeadDecision {
    /// The head decides: here is the classification. The body goes to the
    /// caller untouched.
    Ready(Classification),
    /// The body decides: read its first bytes (bounded), then call
    /// [`Classify::classify_response`] with them, and give the caller the
    /// whole body.
    PeekBody,
    /// A stream: watch its chunks as they pass with this scanner; its
    /// verdict comes when it decides or ends.
    WatchStream(StreamScanner),
}

// === Classify ===

/// Turns provider responses and transport failures into [`Classification`]s.
///
/// [`ProviderClassifier`] is the default. Implement this trait to replace or
/// wrap it, e.g. for a private gateway's error codes.
pub trait Classify: Send + Sync {
    /// Whether the layer should peek at this response's body before
    /// classifying it. The default peeks every non-2xx response.
    fn wants_body(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        let _ = headers;
        !status.is_success()
    }

    /// Classifies a response.
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification;

    /// The one decision a layer takes on a response's head. The default
    /// combines the other methods: [`wants_body`](Self::wants_body) →
    /// [`HeadDecision::PeekBody`]; else a [`stream_scanner`](Self::stream_scanner)
    /// → [`HeadDecision::WatchStream`]; else
    /// [`classify_response`](Self::classify_response) with an empty body →
    /// [`HeadDecision::Ready`]. Implement those; override this only to decide
    /// faster.
    fn classify_head(&self, status: StatusCode, headers: &HeaderMap) -> HeadDecision {
        if self.wants_body(status, headers) {
            return HeadDecision::PeekBody;
        }
        if let Some(scanner) = self.stream_scanner(status, headers) {
            return HeadDecision::WatchStream(scanner);
        }
        HeadDecision::Ready(self.classify_response(&ResponseView::new(status, headers, &[])))
    }

    /// Classifies a transport failure.
    fn classify_transport(&self, failure: TransportFailure) -> Classification {
        Classification::new(Verdict::Availability, failure.reason())
    }

    /// A scanner for the body of a 2xx streaming response (`text/event-stream`,
    /// `application/vnd.amazon.eventstream`, NDJSON), `None` for any other
    /// response. The default is [`StreamScanner::for_response`].
    fn stream_scanner(&self, status: StatusCode, headers: &HeaderMap) -> Option<StreamScanner> {
        StreamScanner::for_response(status, headers)
    }
}

impl<C: Classify + ?Sized> Classify for std::sync::Arc<C> {
    fn wants_body(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        (**self).wants_body(status, headers)
    }
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification {
        (**self).classify_response(response)
    }
    fn classify_head(&self, status: StatusCode, headers: &HeaderMap) -> HeadDecision {
        (**self).classify_head(status, headers)
    }
    fn classify_transport(&self, failure: TransportFailure) -> Classification {
        (**self).classify_transport(failure)
    }
    fn stream_scanner(&self, status: StatusCode, headers: &HeaderMap) -> Option<StreamScanner> {
        (**self).stream_scanner(status, headers)
    }
}

// === The provider classifier ===

impl ProviderClassifier {
    /// [`Classify::classify_response`] of a status of 400 or more: out of
    /// line, so that a success inlines to a comparison.
    #[inline(never)]
    fn classify_failure(&self, response: &ResponseView<'_>) -> Classification {
        let status = response.status.as_u16();
        let headers = response.headers;
        let h = HeaderFacts::scan(headers);
        // Parsing `Date` costs more than the rest of the header work: only a
        // date-form hint asks for it.
        let date = OnceCell::new();
        let reference = &|| {
            *date.get_or_init(|| {
                h.date
                    .and_then(hints::http_date)
                    .or(response.now)
                    .unwrap_or_else(SystemTime::now)
            })
        };
        let header_wait = hints::explicit_wait(
            [h.retry_after_ms, h.x_ms_retry_after_ms, h.retry_after],
            reference,
        );
        let dialect = response.dialect.or(h.dialect);
        let should_retry = h.should_retry.and_then(hints::should_retry_value);
        let quota_after = self.limits.quota_after();
        let seen = Seen {
            status,
            error: true,
            headers: Some(headers),
            body: response.body,
            aws: h.aws_error_type,
        };
        body::read(response.body, |facts| {
            let aws = h.aws_error_type.or(facts.aws_type);
            let mut c = self.classify_facts(
                facts,
                seen,
                header_wait,
                reference,
                dialect,
                |lower, wait| rules::decide(status, facts, aws, lower, wait, quota_after),
            );
            c.should_retry = should_retry;
            c
        })
    }

    /// Whether the bodies of answers with this 2xx status are read: asked
    /// for with `peek_success`, or by a rule for the status.
    #[inline]
    fn reads_success(&self, status: StatusCode) -> bool {
        (self.peek_success && status.as_u16() < 300)
            || self
                .rules
                .as_ref()
                .is_some_and(|r| r.reads_success(status.as_u16()))
    }

    /// A 2xx body that was read: a success, unless it carries an error
    /// object in place of the completion (Baidu's `error_code`, MiniMax's
    /// non-zero `base_resp.status_code`, Tencent Cloud's `Response.Error`;
    /// and when a rule or [`peek_success`] `asked` for the read, a bare
    /// `{"error": ..}`), which is classified as an error inside a stream
    /// is, or a user's rule for this status matches.
    ///
    /// [`peek_success`]: super::ProviderClassifierBuilder::peek_success
    #[inline(never)]
    fn classify_success_body(&self, response: &ResponseView<'_>, asked: bool) -> Classification {
        let seen = Seen {
            status: response.status.as_u16(),
            error: true,
            headers: Some(response.headers),
            body: response.body,
            aws: None,
        };
        body::read(response.body, |facts| {
            // A cut or non-JSON 2xx body is read as text, and its text is
            // the model's output: only a parsed error object is an error.
            if facts.parsed && facts.has_error && (asked || facts.beside_payload) {
                let reference = &|| response.now.unwrap_or_else(SystemTime::now);
                let quota_after = self.limits.quota_after();
                let aws = facts.aws_type;
                return self.classify_facts(
                    facts,
                    seen,
                    None,
                    reference,
                    response.dialect,
                    |lower, wait| rules::decide_in_band(facts, aws, lower, wait, quota_after),
                );
            }
            let Some(rules) = &self.rules else {
                return Classification::success();
            };
            let message = if facts.parsed { facts.message } else { "" };
            let lower = Lower::new(message, facts.upstream);
            let answer = Answer {
                seen: Seen {
                    error: false,
                    ..seen
                },
                facts,
                lower: &lower,
            };
            rules
                .classify(&answer, || None, |w| self.limits.finish_wait(w))
                .unwrap_or_else(Classification::success)
        })
    }
}

impl Classify for ProviderClassifier {
    // Inlined where it is called: a success reads nothing, allocates
    // nothing and costs a comparison.
    #[inline]
    fn classify_response(&self, response: &ResponseView<'_>) -> Classification {
        if response.status.as_u16() < 400 {
            // A 2xx body handed over unasked (the layers hand one over only
            // when `wants_body` asked) is read for the envelopes of the
            // providers known to answer `200` with an error, never for a
            // bare `{"error": ..}`.
            // An empty body (a 2xx the layers did not peek) is a success
            // without looking further.
            if response.body.is_empty() {
                return Classification::success();
            }
            return self.classify_success_body(response, self.reads_success(response.status));
        }
        self.classify_failure(response)
    }

    #[inline]
    fn wants_body(&self, status: StatusCode, _: &HeaderMap) -> bool {
        !status.is_success() || self.reads_success(status)
    }

    #[inline]
    fn stream_scanner(&self, status: StatusCode, headers: &HeaderMap) -> Option<StreamScanner> {
        Some(StreamScanner::for_response(status, headers)?.with_classifier(self))
    }

    // The default's decision, without classifying a 2xx body it already
    // knows is a success: the hot path of every call.
    #[inline]
    fn classify_head(&self, status: StatusCode, headers: &HeaderMap) -> HeadDecision {
        if !status.is_success() {
            return HeadDecision::PeekBody;
        }
        let scanner = self.stream_scanner(status, headers);
        if scanner.is_none() && self.reads_success(status) {
            return HeadDecision::PeekBody;
        }
        match scanner {
            Some(scanner) => HeadDecision::WatchStream(scanner),
            None => HeadDecision::Ready(Classification::success()),
        }
    }
}
