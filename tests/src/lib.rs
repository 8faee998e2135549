//! What the end-to-end tests share: the soak ([`soak`]), and a channel of
//! body frames as a `Stream` for hyper servers that send chunk by chunk
//! ([`ReceiverStream`]). The tests live in `tests/*.rs` of this package.

pub mod soak;

use bytes::Bytes;
use hyper::body::Frame;

/// A body frame or the error that cuts the body.
pub type Chunk = Result<Frame<Bytes>, std::io::Error>;

/// A receiver of frames as a `Stream` for `http_body_util::StreamBody`,
/// without a stream crate.
#[derive(Debug)]
pub struct ReceiverStream(pub tokio::sync::mpsc::Receiver<Chunk>);

impl futures_core::Stream for ReceiverStream {
    type Item = Chunk;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Chunk>> {
        self.0.poll_recv(cx)
    }
}
