//! `levee-gateway --config gateway.toml`: serve the configured routes.
//!
//! Exits 2 when the configuration does not parse or validate (naming the
//! key, its line and column), 1 when the listener cannot be opened, and 0
//! after a graceful stop on `SIGTERM` or `SIGINT`. `SIGHUP` reloads the
//! configuration and the key files it names.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use levee_gateway::Gateway;
use levee_gateway::config::GatewayConfig;
use tracing_subscriber::EnvFilter;

/// An OpenAI- and Anthropic-compatible gateway over Levee's layers.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The configuration file (see examples/gateway.toml).
    #[arg(long, short)]
    config: PathBuf,
    /// Check the configuration and exit: 0 if it is good, 2 if not.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("LEVEE_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal: a log file or collector
        // would keep the escape codes, and writing them costs more than
        // the rest of the line.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = match GatewayConfig::load(&args.config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("levee-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!("{}: ok", args.config.display());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("levee-gateway: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run(config, args.config))
}

async fn run(config: GatewayConfig, path: PathBuf) -> ExitCode {
    let listen = config.listen;
    let routes = config.routes.len();
    let targets = config.targets.len();
    let open = config.clients.is_empty();
    let gateway = match Gateway::new(config, Some(path)) {
        Ok(gateway) => gateway,
        Err(e) => {
            eprintln!("levee-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("levee-gateway: cannot listen on {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    let bound = listener.local_addr().map_or(listen, |a| a);
    if open {
        tracing::warn!(
            target: "levee_gateway",
            "no [[client]] is configured: no key is asked of callers, so the gateway listens on loopback only"
        );
    }
    tracing::info!(target: "levee_gateway", %bound, routes, targets, "listening");
    // `bound` is the line tests and scripts wait for: the port is real.
    println!("levee-gateway listening on {bound}");
    let reloader = gateway.clone();
    tokio::spawn(async move {
        let Ok(mut hangups) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hangups.recv().await.is_some() {
            match reloader.reload() {
                Ok(()) => tracing::info!(target: "levee_gateway", "configuration reloaded"),
                Err(e) => tracing::error!(
                    target: "levee_gateway",
                    error = %e,
                    "reload refused; still serving the configuration before it"
                ),
            }
        }
    });
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    match gateway.serve(listener, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("levee-gateway: {e}");
            ExitCode::from(1)
        }
    }
}
