//! Test support: fake providers on loopback that answer as scripted and
//! record what they were sent, the gateway binary started as a child
//! process on a free port, and a plain HTTP client.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

// === the fake provider ===

/// What a fake provider answers.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A whole answer.
    Full {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// A streamed 200: each chunk after its delay.
    Stream {
        headers: Vec<(&'static str, String)>,
        chunks: Vec<(Duration, String)>,
    },
    /// Closes the connection without an answer.
    Drop,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Reply {
        Reply::Full {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_owned(),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Reply {
        match &mut self {
            Reply::Full { headers, .. } | Reply::Stream { headers, .. } => {
                headers.push((name, value.to_owned()));
            }
            Reply::Drop => {}
        }
        self
    }

    /// An SSE stream of `events` (each a whole `data: ...\n\n` or
    /// `event: ...\ndata: ...\n\n` block), one every `gap`.
    pub fn sse(events: &[&str], gap: Duration) -> Reply {
        Reply::Stream {
            headers: vec![("content-type", "text/event-stream".into())],
            chunks: events.iter().map(|e| (gap, (*e).to_owned())).collect(),
        }
    }
}

/// A request a fake provider received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

type Script = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

/// A provider on a loopback port.
pub struct Provider {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    queue: Arc<Mutex<VecDeque<Reply>>>,
}

impl Provider {
    /// A provider that answers the `n`th request (from 0) with `script`'s
    /// reply, unless replies were queued with [`Provider::push`].
    pub async fn start(script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Provider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let queue: Arc<Mutex<VecDeque<Reply>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let (s, q) = (seen.clone(), queue.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (seen, queue, script) = (s.clone(), q.clone(), script.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (seen, queue, script) = (seen.clone(), queue.clone(), script.clone());
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let record = Seen {
                                method: parts.method.to_string(),
                                path_and_query: parts
                                    .uri
                                    .path_and_query()
                                    .map(|p| p.to_string())
                                    .unwrap_or_default(),
                                headers: parts.headers,
                                body,
                            };
                            let n = {
                                let mut seen = seen.lock().unwrap();
                                seen.push(record.clone());
                                seen.len() - 1
                            };
                            let queued = queue.lock().unwrap().pop_front();
                            let reply = queued.unwrap_or_else(|| script(&record, n));
                            answer(reply).await
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Provider { addr, seen, queue }
    }

    /// A provider that always answers `reply`.
    pub async fn always(reply: Reply) -> Provider {
        Provider::start(move |_, _| reply.clone()).await
    }

    /// Answers the next request with `reply`.
    pub fn push(&self, reply: Reply) {
        self.queue.lock().unwrap().push_back(reply);
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

async fn answer(reply: Reply) -> Result<Response<ReplyBody>, std::io::Error> {
    match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut res = Response::new(ReplyBody::full(body));
            *res.status_mut() = StatusCode::from_u16(status).unwrap();
            for (k, v) in headers {
                res.headers_mut().insert(k, v.parse().unwrap());
            }
            Ok(res)
        }
        Reply::Stream { headers, chunks } => {
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            tokio::spawn(async move {
                for (gap, chunk) in chunks {
                    tokio::time::sleep(gap).await;
                    if tx.send(Bytes::from(chunk)).await.is_err() {
                        return;
                    }
                }
            });
            let mut res = Response::new(ReplyBody::Stream(rx));
            for (k, v) in headers {
                res.headers_mut().insert(k, v.parse().unwrap());
            }
            Ok(res)
        }
        Reply::Drop => Err(std::io::Error::other("dropped")),
    }
}

/// A fake provider's body: whole, or chunks from a channel.
pub enum ReplyBody {
    Full(Option<Bytes>),
    Stream(tokio::sync::mpsc::Receiver<Bytes>),
}

impl ReplyBody {
    fn full(body: String) -> Self {
        ReplyBody::Full(Some(Bytes::from(body)))
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ReplyBody::Full(body) => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
            ReplyBody::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
        }
    }
}

// === the gateway ===

/// The gateway binary, running a configuration on a free loopback port.
pub struct Gateway {
    child: Child,
    pub addr: SocketAddr,
    pub config_path: PathBuf,
    log: Arc<Mutex<String>>,
    _dir: TempDir,
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "levee-gateway-test-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_levee-gateway")
}

impl Gateway {
    /// Starts the gateway on `config` (its `listen` is set here) with `env`.
    pub fn start(config: &str, env: &[(&str, &str)]) -> Gateway {
        let dir = TempDir::new();
        let config_path = dir.0.join("gateway.toml");
        std::fs::write(&config_path, format!("listen = \"127.0.0.1:0\"\n{config}")).unwrap();
        let mut command = Command::new(binary());
        command
            .arg("--config")
            .arg(&config_path)
            .env("LEVEE_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("the gateway starts");
        let log: Arc<Mutex<String>> = Arc::default();
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("levee-gateway listening on ")
            .unwrap_or_else(|| {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "the gateway did not start: {line:?}\n{}",
                    log.lock().unwrap()
                )
            })
            .parse()
            .unwrap();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stdout.read_to_string(&mut rest);
        });
        Gateway {
            child,
            addr,
            config_path,
            log,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Runs a client program (an SDK script, a browser test) against the
    /// gateway, its address in `LEVEE_URL`; prints what it printed, fails
    /// with its output and the gateway's log unless it exits 0, and returns
    /// its standard output.
    pub async fn run_client(&self, mut command: Command) -> String {
        command.env("LEVEE_URL", format!("http://{}", self.addr));
        let out = tokio::task::spawn_blocking(move || command.output().expect("the client runs"))
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{stdout}");
        assert!(
            out.status.success(),
            "the client failed:\n{stdout}\n{stderr}\n--- gateway log ---\n{}",
            self.log()
        );
        stdout
    }

    /// Everything the gateway logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Replaces the configuration file (its `listen` kept) and reloads.
    pub fn reload(&self, config: &str) {
        let listen = format!("listen = \"{}\"\n", self.addr);
        std::fs::write(&self.config_path, format!("{listen}{config}")).unwrap();
        self.signal("HUP");
    }

    /// Waits for the process to exit, up to `within`.
    pub fn wait(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the log holds `text`, up to `within`.
    pub async fn wait_for_log(&self, text: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if self.log().contains(text) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary on `config` (as written, `listen` included) and returns
/// its exit code and standard error.
pub fn check_config(config: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = TempDir::new();
    let path = dir.0.join("gateway.toml");
    std::fs::write(&path, config).unwrap();
    let mut command = Command::new(binary());
    command.arg("--config").arg(&path).arg("--check");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// === a client ===

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends `method url` with `headers` and `body`; reads the whole answer.
pub async fn send(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    let res = tokio::time::timeout(Duration::from_secs(30), client().request(req))
        .await
        .expect("answered within 30 s")
        .expect("a response");
    let (parts, body) = res.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// `POST url` with a JSON body and a bearer key.
pub async fn post(url: &str, key: &str, body: &str) -> Answer {
    send(
        "POST",
        url,
        &[
            ("authorization", &format!("Bearer {key}")),
            ("content-type", "application/json"),
        ],
        body,
    )
    .await
}
