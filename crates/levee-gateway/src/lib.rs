//! `levee-gateway`: Levee for every client, in any language.
//!
//! An OpenAI- and Anthropic-compatible HTTP gateway whose every route runs
//! over the Levee stack as `tower-levee` composes it: client limits → retry
//! budget → failover → per target (bulkhead → breaker, throttle gate, park
//! table, pacing, stream watch with pre-content failover → the call). A
//! client changes its base URL (`OPENAI_BASE_URL=http://127.0.0.1:4000/v1`)
//! and gets Levee's rule, **throttling is not failure**, without a line of
//! Rust: a `429` gates the account for the provider's wait and the next
//! request goes to the next target unsent; a spend cap parks the account;
//! an outage opens the breaker; a stream that fails before its first token
//! fails over unseen.
//!
//! The crate is thin on purpose: it reads its configuration
//! ([`config`]), builds the library's layers from it, and serves them. Every
//! mechanism it needs is in `tower-levee`, where a Rust service can use it
//! too: the per-client limits (`tower_levee::client_limit`), the answers in
//! each API's shape (`tower_levee::api`), the request's model read and
//! renamed in place (`levee_core::request`).
//!
//! ```no_run
//! use levee_gateway::{Gateway, config::GatewayConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let config = GatewayConfig::load(std::path::Path::new("gateway.toml"))?;
//! let gateway = Gateway::new(config, Some("gateway.toml".into()))?;
//! let listener = tokio::net::TcpListener::bind(gateway.listen_addr()).await?;
//! gateway.serve(listener, std::future::pending()).await?;
//! # Ok(())
//! # }
//! ```

mod access;
pub mod config;
mod events;
mod intern;
mod ops;
mod proxy;
mod secret;
mod serve;
mod spare;
mod table;
mod telemetry;
mod tls;
mod upstream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_levee::BoxError;

use crate::config::GatewayConfig;
use crate::events::Events;
pub use crate::secret::Secret;
use crate::table::Table;
use crate::telemetry::Telemetry;
use crate::tls::Acceptor;
use tower_levee::otel::GenAiLayer;

/// A gateway: its routing table (swapped whole on reload) and what the
/// operations endpoints read.
pub struct Gateway {
    table: ArcSwap<Table>,
    events: Arc<Events>,
    metrics: PrometheusHandle,
    tls: Option<Acceptor>,
    ready: AtomicBool,
    config_path: Option<PathBuf>,
    /// `[otel]`'s providers, as the gateway started with them.
    telemetry: Option<Telemetry>,
    genai: GenAiLayer,
}

impl Gateway {
    /// A gateway serving `config`; `config_path` is read again on reload.
    pub fn new(config: GatewayConfig, config_path: Option<PathBuf>) -> Result<Arc<Self>, BoxError> {
        let events = Arc::new(Events::default());
        let tls = config.tls.as_ref().map(Acceptor::load).transpose()?;
        let telemetry = config.otel.as_ref().map(Telemetry::new).transpose()?;
        let genai = telemetry
            .as_ref()
            .map_or_else(GenAiLayer::disabled, Telemetry::layer);
        let table = Table::build(config, None, &events, &genai, telemetry.is_some())?;
        Ok(Arc::new(Gateway {
            table: ArcSwap::from_pointee(table),
            events,
            metrics: ops::prometheus(),
            tls,
            ready: AtomicBool::new(true),
            config_path,
            telemetry,
            genai,
        }))
    }

    /// Exports the OpenTelemetry spans and metrics not yet sent, and stops
    /// the exporters (`[otel]`); nothing without it. Blocks: call it off
    /// the runtime, after serving ends.
    pub fn flush_telemetry(&self) {
        if let Some(telemetry) = &self.telemetry {
            telemetry.shutdown();
        }
    }

    /// The address the configuration says to listen on.
    pub fn listen_addr(&self) -> SocketAddr {
        self.table.load().config.listen
    }

    /// Reads the configuration file again and serves it: requests in flight
    /// finish on the table they started with; targets whose settings did
    /// not change keep their state; key files are read again. On an error
    /// the gateway keeps serving what it had, and says why.
    pub fn reload(&self) -> Result<(), BoxError> {
        let path = self
            .config_path
            .as_ref()
            .ok_or("this gateway was not started from a file")?;
        let config = GatewayConfig::load(path)?;
        let current = self.table.load_full();
        if config.listen != current.config.listen {
            tracing::warn!(
                target: "levee_gateway",
                listen = %config.listen,
                "`listen` changed; a restart applies it (still listening on {})",
                current.config.listen
            );
        }
        if let (Some(acceptor), Some(tls)) = (&self.tls, &config.tls) {
            acceptor.reload(tls)?;
        }
        if config.otel.as_ref() != self.telemetry.as_ref().map(|t| &t.config) {
            tracing::warn!(
                target: "levee_gateway",
                "`[otel]` changed; a restart applies it (still exporting as before)"
            );
        }
        let recorded = self.telemetry.is_some();
        let table = Table::build(config, Some(&current), &self.events, &self.genai, recorded)?;
        self.table.store(Arc::new(table));
        Ok(())
    }

    /// Serves on `listener` until `shutdown` completes, then stops
    /// accepting, answers `/readyz` with `503`, and lets requests in flight
    /// finish for `server.shutdown_timeout`.
    pub async fn serve(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), BoxError> {
        serve::serve(self.clone(), listener, shutdown).await
    }

    fn table(&self) -> Arc<Table> {
        self.table.load_full()
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    fn set_draining(&self) {
        self.ready.store(false, Ordering::Relaxed);
        // The console's event streams never end by themselves: ended here,
        // they do not hold the shutdown for its whole timeout.
        self.events.log().close();
    }
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("listen", &self.listen_addr())
            .finish_non_exhaustive()
    }
}
