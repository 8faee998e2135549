//! A request's body, read whole within a cap.

use std::fmt;

use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::error::BoxError;

/// Why a request's body could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadBodyError {
    /// It is longer than the cap: its `Content-Length` says so (nothing was
    /// read), or the cap was reached (nothing past it was read).
    TooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
    /// The body failed as it was read (the caller went away, a read
    /// timed out).
    Failed(BoxError),
}

impl fmt::Display for ReadBodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadBodyError::TooLarge { limit } => {
                write!(f, "the request body is larger than {limit} bytes")
            }
            ReadBodyError::Failed(_) => f.write_str("the request body could not be read"),
        }
    }
}

impl std::error::Error for ReadBodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadBodyError::TooLarge { .. } => None,
            ReadBodyError::Failed(e) => Some(&**e),
        }
    }
}

/// Reads `body` whole, as the retry and failover layers need it (each
/// attempt sends a copy), refusing one longer than `limit` bytes without
/// reading past the limit: at once when its declared length is over.
///
/// ```
/// use http_body_util::Full;
/// use tower_levee::api::{ReadBodyError, read_body};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let ok = read_body(Full::new(bytes::Bytes::from_static(b"{}")), 16).await.unwrap();
/// assert_eq!(ok, "{}");
/// let big = read_body(Full::new(bytes::Bytes::from(vec![b'x'; 17])), 16).await;
/// assert!(matches!(big, Err(ReadBodyError::TooLarge { limit: 16 })));
/// # }
/// ```
pub async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, ReadBodyError>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    if body.size_hint().lower() > limit as u64 {
        return Err(ReadBodyError::TooLarge { limit });
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(ReadBodyError::TooLarge { limit }),
        Err(e) => Err(ReadBodyError::Failed(e)),
    }
}
