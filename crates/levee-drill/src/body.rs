//! [`SimBody`]: the simulated provider's response body. A whole body, a
//! stream whose parts arrive at set times (a first token that is slow to
//! come), or, live, the loopback server's body as it streams.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;
use tower_levee::BoxError;

/// The response body of the simulated provider.
pub struct SimBody {
    kind: Kind,
}

enum Kind {
    /// Parts, each sent this long after the one before it.
    Parts {
        parts: VecDeque<(Duration, Bytes)>,
        sleep: Option<Pin<Box<Sleep>>>,
    },
    /// What a loopback server sends, as it arrives.
    Remote(hyper::body::Incoming),
}

impl SimBody {
    /// A body sent whole.
    pub fn full(bytes: Bytes) -> Self {
        SimBody::paced([(Duration::ZERO, bytes)])
    }

    /// A body sent in parts, each `delay` after the one before (the first
    /// `delay` after the head). Empty parts are left out.
    pub fn paced(parts: impl IntoIterator<Item = (Duration, Bytes)>) -> Self {
        SimBody {
            kind: Kind::Parts {
                parts: parts.into_iter().filter(|(_, b)| !b.is_empty()).collect(),
                sleep: None,
            },
        }
    }

    /// A loopback server's body, passed on as it streams.
    pub fn remote(body: hyper::body::Incoming) -> Self {
        SimBody {
            kind: Kind::Remote(body),
        }
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.kind {
            Kind::Parts { parts, sleep } => {
                let Some(&(delay, _)) = parts.front() else {
                    return Poll::Ready(None);
                };
                if !delay.is_zero() {
                    let s = sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
                    ready!(s.as_mut().poll(cx));
                    *sleep = None;
                }
                let (_, bytes) = parts.pop_front().expect("checked above");
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            // A body that breaks reads as the connection closing early.
            Kind::Remote(body) => Pin::new(body).poll_frame(cx).map_err(|e| -> BoxError {
                Box::new(io::Error::new(io::ErrorKind::UnexpectedEof, e))
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Parts { parts, .. } => parts.is_empty(),
            Kind::Remote(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Parts { parts, .. } => {
                SizeHint::with_exact(parts.iter().map(|(_, b)| b.len() as u64).sum())
            }
            Kind::Remote(body) => body.size_hint(),
        }
    }
}

impl fmt::Debug for SimBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Parts { parts, .. } => f
                .debug_struct("SimBody")
                .field("parts", &parts.len())
                .finish(),
            Kind::Remote(_) => f.debug_struct("SimBody").field("remote", &true).finish(),
        }
    }
}
