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
    let threads = match config.server.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    // The main thread's runtime serves a share of the connections and runs
    // the gateway's own tasks: signals, reloads, the fleet's store.
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("levee-gateway: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run(config, args.config, threads))
}

/// One serving thread's runtime.
///
/// The gateway runs a single-threaded runtime per thread, each accepting
/// connections on a socket of its own (see [`listening_socket`]) and
/// keeping them for their lifetime
/// (the threading model of Envoy, and of Pingora's no-steal runtimes), not
/// one work-stealing runtime. A request's body is read by the task of its
/// connection, and hyper wakes that task while it runs; a work-stealing
/// scheduler answers such a wake by waking an idle thread to steal the
/// task, so on a quiet gateway every request crossed threads, twice:
/// measured, 200 µs a request at 25 requests a second. Here a request and
/// its upstream connection (each thread keeps its own pool) stay on the
/// thread that accepted it.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A listening socket on `addr` that other serving threads' sockets share
/// (`SO_REUSEPORT`): the kernel spreads new connections over them by their
/// addresses, whichever thread is busy. (One socket accepted from by every
/// thread would go mostly to the thread already awake: the busiest.)
fn listening_socket(addr: std::net::SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

async fn run(config: GatewayConfig, path: PathBuf, threads: usize) -> ExitCode {
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
    let listener = match listening_socket(listen) {
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
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let mut workers = Vec::with_capacity(threads - 1);
    for n in 1..threads {
        let spawned = listening_socket(bound).and_then(|listener| {
            let gateway = gateway.clone();
            let until = until_stopped(stopped.clone());
            std::thread::Builder::new()
                .name(format!("levee-gateway-{n}"))
                .spawn(move || -> Result<(), String> {
                    let runtime = runtime().map_err(|e| format!("cannot start a runtime: {e}"))?;
                    runtime.block_on(async move {
                        let listener = tokio::net::TcpListener::from_std(listener)
                            .map_err(|e| format!("cannot listen: {e}"))?;
                        gateway
                            .serve(listener, until)
                            .await
                            .map_err(|e| e.to_string())
                    })
                })
        });
        match spawned {
            Ok(worker) => workers.push(worker),
            Err(e) => {
                eprintln!("levee-gateway: cannot start serving thread {n}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("levee-gateway: cannot listen on {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    tracing::info!(target: "levee_gateway", %bound, routes, targets, threads, "listening");
    // `bound` is the line tests and scripts wait for: the port is real.
    println!("levee-gateway listening on {bound}");
    // A signal stops every thread's accept loop, this one's included;
    // each then lets its own requests in flight finish.
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        let _ = stop.send(true);
    });
    let served = gateway.serve(listener, until_stopped(stopped)).await;
    let mut code = ExitCode::SUCCESS;
    if let Err(e) = served {
        eprintln!("levee-gateway: {e}");
        code = ExitCode::from(1);
    }
    for worker in workers {
        let joined = tokio::task::spawn_blocking(move || worker.join()).await;
        if let Ok(Ok(Err(e))) = joined {
            eprintln!("levee-gateway: {e}");
            code = ExitCode::from(1);
        }
    }
    // The last requests' spans and metrics, before the process ends.
    let _ = tokio::task::spawn_blocking(move || gateway.flush_telemetry()).await;
    code
}
