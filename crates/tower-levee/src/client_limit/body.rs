//! The answer's body, read for its `usage` as it passes.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use levee_core::usage::UsageScanner;
use pin_project_lite::pin_project;

use super::state::{ClientState, Shared};

/// What a counted answer's body spends its tokens on.
pub(crate) struct Metering {
    client: Arc<ClientState>,
    shared: Arc<Shared>,
    scanner: UsageScanner,
    /// The prompt's tokens, by estimate, should the answer not say.
    prompt: u64,
}

impl Metering {
    pub(crate) fn new(client: Arc<ClientState>, shared: Arc<Shared>, prompt: u64) -> Self {
        Metering {
            client,
            shared,
            scanner: UsageScanner::new(),
            prompt,
        }
    }
}

impl Drop for Metering {
    // Spent once, when the body ends or is dropped unread to its end (a
    // caller that went away still used what was generated so far).
    fn drop(&mut self) {
        let tokens = self.scanner.tokens(self.prompt);
        self.client.spend(&self.shared.clock, tokens);
    }
}

pin_project! {
    /// The body of an answer through a [`ClientLimit`](super::ClientLimit):
    /// the inner body, unchanged, its bytes read for the tokens it reports
    /// when the caller is counted.
    pub struct ClientLimitBody<B> {
        #[pin]
        inner: B,
        metering: Option<Box<Metering>>,
    }
}

impl<B> ClientLimitBody<B> {
    pub(crate) fn new(inner: B, metering: Option<Box<Metering>>) -> Self {
        ClientLimitBody { inner, metering }
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }

    /// The inner body, mutably.
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// Consumes `self`, returning the inner body. Its tokens are spent now,
    /// as far as they were read.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B> Body for ClientLimitBody<B>
where
    B: Body,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        match (&frame, this.metering.as_mut()) {
            (Some(Ok(frame)), Some(metering)) => {
                if let Some(data) = frame.data_ref() {
                    metering.scanner.feed(data.chunk());
                }
            }
            // The end, or an error: spend now rather than at drop.
            (None | Some(Err(_)), Some(_)) => drop(this.metering.take()),
            _ => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> fmt::Debug for ClientLimitBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientLimitBody")
            .field("counted", &self.metering.is_some())
            .finish_non_exhaustive()
    }
}
