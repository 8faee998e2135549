//! One operation's record, from its request to its answer's end: the span,
//! what the answer said, and the metrics it ends with.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use levee_core::answer::{AnswerFacts, AnswerScanner};
use levee_core::classify::{Classification, Verdict};
use opentelemetry::global::BoxedTracer;
use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use tokio::time::Instant;

use super::names::{self, SECONDS_BUCKETS, TOKEN_BUCKETS, attr, metric};
use crate::breaker::{RequestHead, default_scope};
use crate::error::{BoxError, Rejection};
use crate::failover::ServedBy;
use crate::failover::future::error_verdict;

use super::names::UNKNOWN_PROVIDER;

/// The four histograms of the conventions' client metrics.
#[derive(Clone, Debug)]
pub(crate) struct Instruments {
    duration: Histogram<f64>,
    tokens: Histogram<u64>,
    first_chunk: Histogram<f64>,
    per_chunk: Histogram<f64>,
}

impl Instruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        let seconds = |name: &'static str, what: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(what)
                .with_boundaries(SECONDS_BUCKETS.to_vec())
                .build()
        };
        Instruments {
            duration: seconds(metric::OPERATION_DURATION, "GenAI operation duration."),
            tokens: meter
                .u64_histogram(metric::TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Measures number of input and output tokens used.")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            first_chunk: seconds(
                metric::TIME_TO_FIRST_CHUNK,
                "Time to receive the first chunk in a streaming operation.",
            ),
            per_chunk: seconds(
                metric::TIME_PER_OUTPUT_CHUNK,
                "Time per output chunk, after the first, in a streaming operation.",
            ),
        }
    }
}

/// What a layer shares with every operation it records.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) tracer: Arc<BoxedTracer>,
    pub(crate) instruments: Instruments,
    /// The provider's name when the layer was given one.
    pub(crate) provider: Option<Cow<'static, str>>,
}

/// Where a request was sent: the provider's name, host and port.
#[derive(Clone, Debug, Default)]
pub(crate) struct Endpoint {
    pub(crate) provider: Option<Cow<'static, str>>,
    /// Shared by the span and every metric point (a clone is a count).
    pub(crate) address: Option<StringValue>,
    pub(crate) port: Option<u16>,
}

impl Endpoint {
    /// The endpoint of `req`: its host and port, the provider its host
    /// names, else `provider` (the layer's, for a host that names none).
    pub(crate) fn of<B>(req: &Request<B>, provider: Option<&Cow<'static, str>>) -> Self {
        let uri = req.uri();
        // Parsed once: each `host()` reads the authority again.
        let Some(authority) = uri.authority() else {
            return Endpoint {
                provider: provider.cloned(),
                ..Endpoint::default()
            };
        };
        let host = authority.host();
        let port = authority.port_u16().or(match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        let provider = names::provider_of_host(host)
            .map(Cow::Borrowed)
            .or_else(|| provider.cloned());
        Endpoint {
            provider,
            address: Some(StringValue::from(Arc::<str>::from(host))),
            port,
        }
    }

    /// Its attributes: the provider's name (`_OTHER` where none is known),
    /// and the server's address and port where known.
    pub(crate) fn push_attributes(&self, attributes: &mut Vec<KeyValue>) {
        let provider = self
            .provider
            .clone()
            .unwrap_or(Cow::Borrowed(UNKNOWN_PROVIDER));
        attributes.push(KeyValue::new(attr::PROVIDER_NAME, provider));
        if let Some(address) = &self.address {
            attributes.push(KeyValue::new(attr::SERVER_ADDRESS, address.clone()));
            if let Some(port) = self.port {
                attributes.push(KeyValue::new(attr::SERVER_PORT, i64::from(port)));
            }
        }
    }

    /// This endpoint, each field it lacks taken from `other`.
    fn or(self, other: Endpoint) -> Endpoint {
        let (address, port) = match self.address {
            Some(address) => (Some(address), self.port),
            None => (other.address, other.port),
        };
        Endpoint {
            provider: self.provider.or(other.provider),
            address,
            port,
        }
    }
}

/// What the attempts below an operation tell it, carried in the request's
/// extensions (a failover clones them into every attempt).
#[derive(Clone, Debug)]
pub(crate) struct Trail(Arc<TrailInner>);

#[derive(Debug)]
struct TrailInner {
    /// The operation's tracer: its attempts' spans go to the same place.
    tracer: Arc<BoxedTracer>,
    /// The operation's span, its attempts' parent.
    cx: Context,
    attempts: AtomicU32,
    /// The attempts that answered, each with where it was sent.
    answers: Mutex<Vec<Served>>,
}

/// An attempt that answered.
#[derive(Clone, Debug)]
pub(crate) struct Served {
    pub(crate) attempt: u32,
    pub(crate) target: Option<Cow<'static, str>>,
    pub(crate) endpoint: Endpoint,
}

/// The number of the attempt an answer came from, in the answer's
/// extensions: the operation finds its target by it (a failover may have
/// had other answers, refused or raced).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AnswerOf(pub(crate) u32);

/// The most answers a trail keeps (a failover calls at most 64 targets).
const MAX_ANSWERS: usize = 64;

impl Trail {
    fn new(tracer: Arc<BoxedTracer>, cx: Context) -> Self {
        Trail(Arc::new(TrailInner {
            tracer,
            cx,
            attempts: AtomicU32::new(0),
            answers: Mutex::new(Vec::new()),
        }))
    }

    /// The operation's tracer.
    pub(crate) fn tracer(&self) -> &BoxedTracer {
        &self.0.tracer
    }

    /// The operation's span, as its attempts' parent.
    pub(crate) fn parent(&self) -> &Context {
        &self.0.cx
    }

    /// The next attempt's number, from 1.
    pub(crate) fn next_attempt(&self) -> u32 {
        self.0
            .attempts
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1)
    }

    /// Notes an attempt that answered.
    pub(crate) fn answered(&self, served: Served) {
        let mut answers = self.0.answers.lock().unwrap_or_else(|p| p.into_inner());
        if answers.len() < MAX_ANSWERS {
            answers.push(served);
        }
    }

    fn attempts(&self) -> u32 {
        self.0.attempts.load(Ordering::Relaxed)
    }

    /// The answer of attempt `n`.
    fn answer(&self, n: u32) -> Option<Served> {
        let answers = self.0.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers.iter().find(|s| s.attempt == n).cloned()
    }
}

/// How an operation ended.
pub(crate) enum End<'a> {
    /// Its answer ended (or, for an answer with no body to read, arrived).
    Answered,
    /// It failed with this error, before or during its answer.
    Failed(&'a BoxError),
    /// Its caller dropped it before the end.
    Cancelled,
}

/// One operation, from its request to its answer's end.
#[derive(Debug)]
pub(crate) struct Operation {
    shared: Arc<Shared>,
    /// The operation's span, as the context its attempts start under.
    pub(crate) cx: Context,
    /// Whether the span records (a tracer provider is installed and
    /// sampled it): attributes are only built for one that does.
    pub(crate) recording: bool,
    started: Instant,
    operation: &'static str,
    model: Option<StringValue>,
    endpoint: Endpoint,
    trail: Trail,
    /// The answer's HTTP status, once it came.
    status: Option<StatusCode>,
    /// The answer's verdict, once it came.
    verdict: &'static str,
    /// The failover's record of the target that answered, where the answer
    /// carries it.
    served_by: Option<ServedBy>,
    /// The target that answered, as its attempt named it.
    served_target: Option<Cow<'static, str>>,
    scanner: Option<AnswerScanner>,
    /// A stream's chunk metrics: their attributes (built at the first
    /// chunk) and when the last chunk came.
    chunks: Option<(Vec<KeyValue>, Instant)>,
    ended: bool,
}

impl Operation {
    /// Starts recording `req`; its extensions get the trail its attempts
    /// write to.
    pub(crate) fn start<B>(shared: &Arc<Shared>, req: &mut Request<B>) -> Box<Self> {
        let operation = names::operation_of(req.uri().path());
        let model = default_scope(&RequestHead::of(req))
            .model
            .filter(|m| !m.is_empty())
            .map(|m| StringValue::from(Arc::<str>::from(m)));
        let endpoint = Endpoint::of(req, shared.provider.as_ref());
        // The attributes sampling may read are given at the start; the
        // provider and server are the target's that serves, known at the
        // end (a failover may not serve from the URI the request named).
        let name: Cow<'static, str> = match &model {
            Some(model) => Cow::Owned(format!("{operation} {}", model.as_str())),
            None => Cow::Borrowed(operation),
        };
        let mut attributes = Vec::with_capacity(2);
        attributes.push(KeyValue::new(attr::OPERATION_NAME, operation));
        if let Some(model) = &model {
            attributes.push(KeyValue::new(attr::REQUEST_MODEL, model.clone()));
        }
        let span = shared
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start(&*shared.tracer);
        let cx = Context::current_with_span(span);
        let recording = cx.span().is_recording();
        let trail = Trail::new(Arc::clone(&shared.tracer), cx.clone());
        req.extensions_mut().insert(trail.clone());
        Box::new(Operation {
            shared: Arc::clone(shared),
            cx,
            recording,
            started: Instant::now(),
            operation,
            model,
            endpoint,
            trail,
            status: None,
            verdict: Verdict::Success.as_str(),
            served_by: None,
            served_target: None,
            scanner: None,
            chunks: None,
            ended: false,
        })
    }

    /// Reads an answer's head: its status, verdict and target; a body to
    /// read comes back `true`.
    pub(crate) fn answered<RB>(&mut self, response: &Response<RB>) -> bool {
        let status = response.status();
        self.status = Some(status);
        self.served_by = response.extensions().get::<ServedBy>().copied();
        // Where it was served: the attempt the answer came from, each field
        // it does not know from the request's own.
        if let Some(AnswerOf(n)) = response.extensions().get::<AnswerOf>().copied()
            && let Some(served) = self.trail.answer(n)
        {
            self.endpoint = served.endpoint.or(std::mem::take(&mut self.endpoint));
            self.served_target = served.target;
        }
        let classification = response.extensions().get::<Classification>();
        let verdict = classification.map_or(Verdict::Success, |c| c.verdict);
        let headers = response.headers();
        // A compressed body is not read (its bytes are not JSON).
        let encoded = headers
            .get(http::header::CONTENT_ENCODING)
            .is_some_and(|e| !e.as_bytes().eq_ignore_ascii_case(b"identity"));
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.as_bytes())
            .filter(|_| !encoded);
        let scanner = AnswerScanner::new(content_type);
        if self.recording {
            let span = self.cx.span();
            if let Some(c) = classification {
                span.set_attribute(KeyValue::new(
                    attr::LEVEE_REASON,
                    c.reason.as_str().to_owned(),
                ));
            }
            if scanner.is_stream() {
                // Set if and only if the request streams.
                span.set_attribute(KeyValue::new(attr::REQUEST_STREAM, true));
            }
        }
        self.verdict = verdict.as_str();
        let read = status.is_success();
        if read {
            self.scanner = Some(scanner);
        }
        read
    }

    /// Reads the next bytes of the answer.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let Some(scanner) = &mut self.scanner else {
            return;
        };
        let chunks = scanner.feed(bytes);
        let scanner = &*scanner;
        if chunks == 0 {
            return;
        }
        let now = Instant::now();
        match &mut self.chunks {
            None => {
                let first = now.saturating_duration_since(self.started).as_secs_f64();
                let attrs = metric_attributes(
                    self.operation,
                    self.model.as_ref(),
                    &self.endpoint,
                    scanner.facts(),
                    None,
                );
                self.shared.instruments.first_chunk.record(first, &attrs);
                if self.recording {
                    self.cx
                        .span()
                        .set_attribute(KeyValue::new(attr::RESPONSE_TIME_TO_FIRST_CHUNK, first));
                }
                // A frame's later chunks came with its first: no time between.
                for _ in 1..chunks {
                    self.shared.instruments.per_chunk.record(0.0, &attrs);
                }
                self.chunks = Some((attrs, now));
            }
            Some((attrs, last)) => {
                let since = now.saturating_duration_since(*last).as_secs_f64();
                self.shared.instruments.per_chunk.record(since, attrs);
                for _ in 1..chunks {
                    self.shared.instruments.per_chunk.record(0.0, attrs);
                }
                *last = now;
            }
        }
    }

    /// Stops reading the answer: bytes were missed, and a fact read past
    /// them could be wrong.
    pub(crate) fn unread(&mut self) {
        self.scanner = None;
    }

    /// Ends the operation: the span's last attributes and its status, and
    /// the metrics. Once; later calls do nothing.
    pub(crate) fn end(&mut self, end: End<'_>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let duration = self.started.elapsed().as_secs_f64();
        let facts = self
            .scanner
            .as_mut()
            .map(|s| s.finish().clone())
            .unwrap_or_default();
        // Who served: the failover's own record where the answer carries
        // it, else the attempt the answer came from; and how many calls
        // the request made.
        let served_by = match self.served_by {
            Some(s) => Some(Cow::Borrowed(s.target)),
            None => self.served_target.take(),
        };
        let attempts = self.trail.attempts();
        let mut levee = Vec::new();
        if self.recording {
            if let Some(target) = served_by {
                levee.push(KeyValue::new(attr::LEVEE_SERVED_BY, target));
            }
            if attempts > 0 {
                levee.push(KeyValue::new(attr::LEVEE_ATTEMPTS, i64::from(attempts)));
            }
            if let Some(served) = self.served_by {
                levee.push(KeyValue::new(attr::LEVEE_FALLBACK, served.fallback));
            }
        }
        let error_type: Option<Cow<'static, str>> = match end {
            End::Failed(err) => Some(Cow::Borrowed(names::error_type(&**err))),
            End::Cancelled => Some(Cow::Borrowed("cancelled")),
            End::Answered => self
                .status
                .filter(|s| !s.is_success())
                .map(|s| Cow::Owned(s.as_str().to_owned())),
        };
        if self.recording {
            self.record_span(levee, &facts, error_type.as_ref(), &end);
        }
        self.cx.span().end();
        let attrs = self.attributes(&facts, error_type);
        let instruments = &self.shared.instruments;
        instruments.duration.record(duration, &attrs);
        if let Some(usage) = facts.usage {
            // No error.type on token counts: the conventions list none.
            let mut attrs = self.attributes(&facts, None);
            attrs.push(KeyValue::new(attr::TOKEN_TYPE, "input"));
            instruments.tokens.record(usage.input, &attrs);
            if let Some(last) = attrs.last_mut() {
                *last = KeyValue::new(attr::TOKEN_TYPE, "output");
            }
            instruments.tokens.record(usage.output, &attrs);
        }
    }

    fn record_span(
        &self,
        mut attributes: Vec<KeyValue>,
        facts: &AnswerFacts,
        error_type: Option<&Cow<'static, str>>,
        end: &End<'_>,
    ) {
        self.endpoint.push_attributes(&mut attributes);
        if let Some(model) = &facts.model {
            attributes.push(KeyValue::new(attr::RESPONSE_MODEL, model.clone()));
        }
        if let Some(id) = &facts.id {
            attributes.push(KeyValue::new(attr::RESPONSE_ID, id.clone()));
        }
        if !facts.finish_reasons.is_empty() {
            let reasons: Vec<StringValue> = facts
                .finish_reasons
                .iter()
                .map(|r| StringValue::from(r.clone()))
                .collect();
            attributes.push(KeyValue::new(
                attr::RESPONSE_FINISH_REASONS,
                Value::Array(reasons.into()),
            ));
        }
        if let Some(usage) = facts.usage {
            attributes.push(KeyValue::new(attr::USAGE_INPUT_TOKENS, signed(usage.input)));
            attributes.push(KeyValue::new(
                attr::USAGE_OUTPUT_TOKENS,
                signed(usage.output),
            ));
            if let Some(n) = usage.cache_read {
                attributes.push(KeyValue::new(
                    attr::USAGE_CACHE_READ_INPUT_TOKENS,
                    signed(n),
                ));
            }
            if let Some(n) = usage.cache_creation {
                attributes.push(KeyValue::new(
                    attr::USAGE_CACHE_CREATION_INPUT_TOKENS,
                    signed(n),
                ));
            }
        }
        if let Some(error_type) = error_type {
            attributes.push(KeyValue::new(attr::ERROR_TYPE, error_type.clone()));
        }
        // The code is in error.type; a description only where Levee wrote
        // the message (another error's, a client's say, may quote a URL
        // and its `?key=`).
        let mut status = error_type.map(|_| Status::error(""));
        if let End::Failed(err) = end {
            if let Some(rejection) = Rejection::find(&***err) {
                attributes.push(KeyValue::new(
                    attr::LEVEE_REFUSAL,
                    rejection.kind().as_str(),
                ));
                attributes.push(KeyValue::new(
                    attr::LEVEE_RETRY_AFTER,
                    rejection.retry_after().as_secs_f64(),
                ));
                status = Some(Status::error(rejection.error().to_string()));
            }
            attributes.push(KeyValue::new(attr::LEVEE_VERDICT, error_verdict(&***err)));
        } else if self.status.is_some() {
            attributes.push(KeyValue::new(attr::LEVEE_VERDICT, self.verdict));
        }
        let span = self.cx.span();
        span.set_attributes(attributes);
        if let Some(status) = status {
            span.set_status(status);
        }
    }

    /// The metrics' attributes: the operation, provider, models and server,
    /// and `error.type` where one is given.
    fn attributes(
        &self,
        facts: &AnswerFacts,
        error_type: Option<Cow<'static, str>>,
    ) -> Vec<KeyValue> {
        metric_attributes(
            self.operation,
            self.model.as_ref(),
            &self.endpoint,
            facts,
            error_type,
        )
    }
}

/// The metrics' attributes: the operation, provider, models and server,
/// and `error.type` where one is given.
fn metric_attributes(
    operation: &'static str,
    model: Option<&StringValue>,
    endpoint: &Endpoint,
    facts: &AnswerFacts,
    error_type: Option<Cow<'static, str>>,
) -> Vec<KeyValue> {
    let mut attrs = Vec::with_capacity(8);
    attrs.push(KeyValue::new(attr::OPERATION_NAME, operation));
    endpoint.push_attributes(&mut attrs);
    if let Some(model) = model {
        attrs.push(KeyValue::new(attr::REQUEST_MODEL, model.to_owned()));
    }
    if let Some(model) = &facts.model {
        attrs.push(KeyValue::new(attr::RESPONSE_MODEL, model.clone()));
    }
    if let Some(error_type) = error_type {
        attrs.push(KeyValue::new(attr::ERROR_TYPE, error_type));
    }
    attrs
}

/// A count as an attribute: OpenTelemetry's integers are signed.
pub(crate) fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Drop for Operation {
    fn drop(&mut self) {
        // A caller that drops the answer before its end cancelled it.
        self.end(End::Cancelled);
    }
}
