//! Accepting connections: HTTP/1.1 and HTTP/2, with TLS when configured,
//! read timeouts on every connection, and a graceful stop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower_levee::BoxError;
use tower_levee::api::ApiDialect;

use crate::Gateway;
use crate::proxy::{api, own_error};

/// The gateway's routes.
pub(crate) fn router(gateway: Arc<Gateway>) -> Router {
    let admin = gateway.table().config.admin_key.is_some();
    let openai = post(|state, request| api(state, ApiDialect::OpenAi, request));
    let anthropic = post(|state, request| api(state, ApiDialect::Anthropic, request));
    Router::new()
        .route("/v1/chat/completions", openai.clone())
        .route("/v1/responses", openai.clone())
        .route("/v1/embeddings", openai.clone())
        .route("/v1/completions", openai)
        .route("/v1/messages", anthropic.clone())
        .route("/v1/messages/count_tokens", anthropic)
        .route("/v1/models", get(crate::proxy::models))
        .merge(crate::ops::routes(admin))
        .fallback(not_found)
        .with_state(gateway)
}

/// An unknown path, in the dialect its path or headers suggest.
async fn not_found(request: axum::extract::Request) -> axum::response::Response {
    let anthropic = request.uri().path().starts_with("/v1/messages")
        || request.headers().contains_key("anthropic-version");
    let dialect = if anthropic {
        ApiDialect::Anthropic
    } else {
        ApiDialect::OpenAi
    };
    let message = format!(
        "{} {} is not a route of this gateway",
        request.method(),
        request.uri().path()
    );
    own_error(
        dialect,
        http::StatusCode::NOT_FOUND,
        "unknown_url",
        &message,
    )
}

/// Serves until `shutdown`, then drains for the configured deadline.
pub(crate) async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BoxError> {
    let service = TowerToHyperService::new(router(gateway.clone()));
    let server = gateway.table().config.server.clone();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(server.header_read_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait, go on.
                    tracing::warn!(target: "levee_gateway", error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let builder = builder.clone();
        let service = service.clone();
        match &gateway.tls {
            None => {
                let conn = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .into_owned();
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
            Some(tls) => {
                let acceptor = tls.get();
                let watcher = graceful.watcher();
                let handshake_timeout = server.header_read_timeout;
                tokio::spawn(async move {
                    let stream = match tokio::time::timeout(
                        handshake_timeout,
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(stream)) => stream,
                        _ => return,
                    };
                    let conn = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .into_owned();
                    let _ = watcher.watch(conn).await;
                });
            }
        }
    }
    gateway.set_draining();
    drop(listener);
    tracing::info!(
        target: "levee_gateway",
        deadline = ?server.shutdown_timeout,
        "stopped accepting; finishing the requests in flight"
    );
    match tokio::time::timeout(server.shutdown_timeout, graceful.shutdown()).await {
        Ok(()) => tracing::info!(target: "levee_gateway", "every request finished"),
        Err(_) => tracing::warn!(
            target: "levee_gateway",
            "the shutdown deadline passed with requests in flight; they are cut"
        ),
    }
    Ok(())
}
