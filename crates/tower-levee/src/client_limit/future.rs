//! The response future of [`ClientLimit`](super::ClientLimit).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;

use super::body::{ClientLimitBody, Metering};
use super::error::ClientLimited;
use crate::error::BoxError;

pin_project! {
    /// Response future of [`ClientLimit`](super::ClientLimit).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Called {
            #[pin]
            future: F,
            // Handed to the answer's body, which spends its tokens.
            metering: Option<Box<Metering>>,
        },
        Refused { error: Option<ClientLimited> },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn uncounted(future: F) -> Self {
        ResponseFuture {
            state: State::Called {
                future,
                metering: None,
            },
        }
    }

    pub(crate) fn counted(future: F, metering: Metering) -> Self {
        ResponseFuture {
            state: State::Called {
                future,
                metering: Some(Box::new(metering)),
            },
        }
    }

    pub(crate) fn refused(error: ClientLimited) -> Self {
        ResponseFuture {
            state: State::Refused { error: Some(error) },
        }
    }
}

impl<F, RB, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<ClientLimitBody<RB>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called { future, metering } => {
                let response = ready!(future.poll(cx)).map_err(Into::into)?;
                // Only a success spends tokens: providers bill nothing else.
                let metering = metering.take().filter(|_| response.status().is_success());
                Poll::Ready(Ok(response.map(|body| ClientLimitBody::new(body, metering))))
            }
            StateProj::Refused { error } => {
                Poll::Ready(Err(error.take().expect("polled after completion").into()))
            }
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
