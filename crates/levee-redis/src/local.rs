//! A `redis-server` of this process's own, for drills, examples and tests.

use std::fmt;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` started on a free loopback port, without persistence,
/// and killed when dropped: what `levee-drill run --live` runs a fleet
/// against, and what the fleet's tests run against. Needs `redis-server`
/// on the `PATH` (Debian: `apt-get install redis-server`).
pub struct LocalRedis {
    child: Option<Child>,
    port: u16,
    password: Option<String>,
}

impl LocalRedis {
    /// Starts a server, requiring `password` if given; waits until it
    /// accepts connections. An error of kind `NotFound` means there is no
    /// `redis-server` to start.
    pub fn start(password: Option<&str>) -> io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut server = LocalRedis {
            child: None,
            port,
            password: password.map(str::to_owned),
        };
        server.restart()?;
        Ok(server)
    }

    /// The server's URL, with its password if it has one.
    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}/0", self.port),
            None => format!("redis://127.0.0.1:{}/0", self.port),
        }
    }

    /// Kills the server; what it held is gone (no persistence).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server (again) on the same port, empty.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = &self.password {
            cmd.args(["--requirepass", p]);
        }
        self.child = Some(cmd.spawn()?);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                self.kill();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("redis-server did not listen on 127.0.0.1:{}", self.port),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

impl Drop for LocalRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

impl fmt::Debug for LocalRedis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalRedis")
            .field("port", &self.port)
            .field("running", &self.child.is_some())
            .finish()
    }
}
