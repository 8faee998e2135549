//! The answer's body, read as it passes for what it says about itself.

use std::fmt;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::record::{End, Operation};
use crate::error::BoxError;

pin_project! {
    /// The body of an answer recorded by a [`GenAiLayer`](super::GenAiLayer):
    /// the inner body, unchanged. The operation ends, and its span closes,
    /// when the body does (or is dropped).
    pub struct GenAiBody<B> {
        #[pin]
        inner: B,
        operation: Option<Box<Operation>>,
    }
}

impl<B> GenAiBody<B> {
    pub(crate) fn new(inner: B, operation: Option<Box<Operation>>) -> Self {
        GenAiBody { inner, operation }
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }

    /// The inner body, mutably.
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// The inner body, unwrapped: the operation ends here, as answered.
    pub fn into_inner(mut self) -> B {
        if let Some(operation) = &mut self.operation {
            operation.end(End::Answered);
        }
        self.inner
    }
}

impl<B> Body for GenAiBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let Some(operation) = this.operation else {
            return polled.map_err(Into::into);
        };
        let Poll::Ready(frame) = polled else {
            return Poll::Pending;
        };
        match frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    feed(operation, data);
                }
                if this.inner.is_end_stream() {
                    // Read to its end: a caller may stop polling here.
                    operation.end(End::Answered);
                    *this.operation = None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(err)) => {
                let err: BoxError = err.into();
                operation.end(End::Failed(&err));
                *this.operation = None;
                Poll::Ready(Some(Err(err)))
            }
            None => {
                operation.end(End::Answered);
                *this.operation = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Feeds a frame's bytes, slice by slice, without copying them.
fn feed<D: Buf>(operation: &mut Operation, data: &D) {
    let first = data.chunk();
    if first.len() == data.remaining() {
        // One slice (`Bytes`, the common case): no slice table to fill.
        operation.feed(first);
        return;
    }
    let mut slices = [IoSlice::new(&[]); 64];
    let n = data.chunks_vectored(&mut slices);
    let mut fed = 0;
    for slice in &slices[..n] {
        operation.feed(slice);
        fed += slice.len();
    }
    if fed < data.remaining() {
        // A frame of more slices than that (no body Levee knows sends
        // one): the rest cannot be read in place, and a fact read past a
        // gap could be wrong.
        operation.unread();
    }
}

impl<B: fmt::Debug> fmt::Debug for GenAiBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenAiBody")
            .field("inner", &self.inner)
            .field("recording", &self.operation.is_some())
            .finish()
    }
}
