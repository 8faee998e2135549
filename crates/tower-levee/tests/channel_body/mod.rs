//! A response body fed through a channel, so a test decides when each frame
//! (or the end, or an error) arrives.

#![allow(dead_code, unreachable_pub)]

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

/// The body: each `Ok` a data frame, an `Err` the body's error, the
/// sender's drop its end.
pub struct ChannelBody(pub mpsc::UnboundedReceiver<Result<Bytes, &'static str>>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = &'static str;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, &'static str>>> {
        self.0.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }
}

/// What feeds a [`ChannelBody`].
pub type Feed = mpsc::UnboundedSender<Result<Bytes, &'static str>>;

/// Sends each chunk as a frame.
pub fn send(feed: &Feed, chunks: &[&'static str]) {
    for c in chunks {
        feed.send(Ok(Bytes::from_static(c.as_bytes()))).unwrap();
    }
}
