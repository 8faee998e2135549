//! The last state changes, kept for whoever asks and pushed to whoever
//! listens: the console's timeline, as Server-Sent Events.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};

use levee_core::transition::{Mechanism, State};

use crate::breaker::{Origin, ScopeEvent};

/// How many events an [`EventLog`] keeps unless told otherwise.
const DEFAULT_KEPT: usize = 512;

/// How many events a listener may fall behind before it is dropped (its
/// page reconnects and catches up from what is kept).
const LISTENER_BACKLOG: usize = 256;

/// How many streams may follow one log: past it, the oldest is ended (a
/// page reconnects, and catches up from what is kept).
const MAX_LISTENERS: usize = 256;

/// How often an idle event stream sends a comment, so that proxies and
/// browsers keep the connection open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One state change of one scope, as the console and the admin API list it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct EventRecord {
    /// Its place in the log: 1 for the first event recorded, and so on.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The target (or stack) whose breaker layer saw it.
    pub target: String,
    /// The scope's key.
    pub scope: String,
    /// The model of the call that caused the change; none for timed and
    /// manual changes.
    pub model: Option<String>,
    /// `breaker`, `gate` or `park`.
    pub mechanism: Mechanism,
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// Why, for a person.
    pub reason: String,
    /// `traffic`, `manual` or `fleet`.
    pub origin: Origin,
    /// Until the state ends, when it is a refusal with an end.
    pub remaining_ms: Option<u64>,
}

/// The last state changes of one or more breaker layers: kept (the last
/// 512 unless told otherwise) and pushed to every open event stream.
///
/// Hand [`EventLog::listener`] to a breaker layer's
/// [`on_event`](crate::breaker::BreakerLayerBuilder::on_event); serve the
/// log with [`Console`](super::Console). Recording takes one short lock
/// and never waits for a listener: one that falls behind is dropped, and
/// its page reconnects and catches up from what is kept.
#[derive(Clone)]
pub struct EventLog {
    shared: Arc<Mutex<Log>>,
}

/// An event as recorded, and as streams send it.
struct Kept {
    record: EventRecord,
    frame: Bytes,
}

struct Log {
    kept: VecDeque<Kept>,
    capacity: usize,
    next_seq: u64,
    listeners: Vec<mpsc::Sender<Bytes>>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::new()
    }
}

impl EventLog {
    /// A log that keeps the last 512 events.
    pub fn new() -> Self {
        EventLog::with_capacity(DEFAULT_KEPT)
    }

    /// A log that keeps the last `capacity` events (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        EventLog {
            shared: Arc::new(Mutex::new(Log {
                kept: VecDeque::with_capacity(capacity.min(DEFAULT_KEPT)),
                capacity,
                next_seq: 1,
                listeners: Vec::new(),
            })),
        }
    }

    /// A hook for [`on_event`](crate::breaker::BreakerLayerBuilder::on_event)
    /// that records each event under `target`.
    ///
    /// ```
    /// use tower_levee::BreakerLayer;
    /// use tower_levee::axum::EventLog;
    ///
    /// let log = EventLog::new();
    /// let breaker = BreakerLayer::builder()
    ///     .on_event(log.listener("openai"))
    ///     .build()
    ///     .expect("a valid configuration");
    /// # let _ = breaker;
    /// ```
    pub fn listener(
        &self,
        target: impl Into<String>,
    ) -> impl Fn(&ScopeEvent) + Send + Sync + 'static {
        let log = self.clone();
        let target: String = target.into();
        move |event| log.record(&target, event)
    }

    /// Records `event` of `target`, and pushes it to every open stream.
    pub fn record(&self, target: &str, event: &ScopeEvent) {
        let at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, millis);
        let mut log = self.lock();
        let record = EventRecord {
            seq: log.next_seq,
            at_ms,
            target: target.to_owned(),
            scope: event.scope().to_owned(),
            model: event.model().map(str::to_owned),
            mechanism: event.mechanism(),
            from: event.from(),
            to: event.to(),
            reason: event.reason().to_owned(),
            origin: event.origin(),
            remaining_ms: event.remaining().map(millis),
        };
        // Framed once, for every stream that follows or will replay it.
        let frame = frame(&record);
        log.next_seq += 1;
        if log.kept.len() == log.capacity {
            log.kept.pop_front();
        }
        // A listener that is gone or too far behind is dropped; its stream
        // ends, and the page reconnects from what is kept.
        log.listeners
            .retain(|tx| tx.try_send(frame.clone()).is_ok());
        log.kept.push_back(Kept { record, frame });
    }

    /// The last `n` events, oldest first.
    pub fn last(&self, n: usize) -> Vec<EventRecord> {
        let log = self.lock();
        log.kept
            .iter()
            .skip(log.kept.len().saturating_sub(n))
            .map(|k| k.record.clone())
            .collect()
    }

    /// A stream of the events after `after` (by [`seq`](EventRecord::seq);
    /// the last 100 kept when `None`) and then each new one as it is
    /// recorded, in Server-Sent Events framing: `id:` the sequence number,
    /// `data:` the record as JSON.
    pub(crate) fn stream(&self, after: Option<u64>) -> EventStream {
        let (tx, rx) = mpsc::channel(LISTENER_BACKLOG);
        let mut log = self.lock();
        // A reader gone since the last event is forgotten now, not at the
        // next event, which may be hours away.
        log.listeners.retain(|tx| !tx.is_closed());
        if log.listeners.len() >= MAX_LISTENERS {
            log.listeners.remove(0);
        }
        // An id from before a restart (at or past the next one) resumes
        // nothing: the stream starts from what is kept.
        let after = after.filter(|&after| after < log.next_seq);
        let from = match after {
            Some(after) => log.kept.partition_point(|k| k.record.seq <= after),
            None => log.kept.len().saturating_sub(100),
        };
        let replay: VecDeque<Bytes> = log.kept.range(from..).map(|k| k.frame.clone()).collect();
        log.listeners.push(tx);
        drop(log);
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        EventStream {
            // A comment first: the response's head and a first byte reach
            // the page at once, before any event.
            replay: std::iter::once(Bytes::from_static(b": levee events\n\n"))
                .chain(replay)
                .collect(),
            live: rx,
            keep_alive,
        }
    }

    /// Ends every open stream once it has sent what it holds (a server
    /// shutting down: a page's stream never ends by itself). Later
    /// streams follow the log as before.
    pub fn close(&self) {
        self.lock().listeners.clear();
    }

    /// How many streams follow the log.
    #[cfg(test)]
    pub(crate) fn listeners(&self) -> usize {
        self.lock().listeners.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for EventLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let log = self.lock();
        f.debug_struct("EventLog")
            .field("kept", &log.kept.len())
            .field("capacity", &log.capacity)
            .field("listeners", &log.listeners.len())
            .finish()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One event in Server-Sent Events framing. JSON has no raw newline, so
/// the record is one `data:` line.
fn frame(record: &EventRecord) -> Bytes {
    let json = serde_json::to_string(record).unwrap_or_else(|_| String::from("{}"));
    Bytes::from(format!("id: {}\ndata: {json}\n\n", record.seq))
}

pin_project! {
    /// The body of an event stream: what was kept, then each new event, and
    /// a comment every 15 s while nothing happens. It ends when the log
    /// drops it (the reader fell too far behind).
    pub(crate) struct EventStream {
        replay: VecDeque<Bytes>,
        live: mpsc::Receiver<Bytes>,
        keep_alive: Interval,
    }
}

impl Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.project();
        if let Some(bytes) = this.replay.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        match this.live.poll_recv(cx) {
            Poll::Ready(Some(frame)) => {
                this.keep_alive.reset();
                Poll::Ready(Some(Ok(Frame::data(frame))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.keep_alive.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                    b": keep-alive\n\n",
                ))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
