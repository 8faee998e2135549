//! A `redis-server` of its own for a test, on a free loopback port.
//!
//! Outside CI a machine without `redis-server` skips the test with a loud
//! message; in CI (`CI=true`) a missing server fails it.

#![allow(unreachable_pub, dead_code)]

use levee_redis::LocalRedis;

/// A server, or `None` (with a message) where there is none to start.
pub fn start(password: Option<&str>) -> Option<LocalRedis> {
    match LocalRedis::start(password) {
        Ok(server) => Some(server),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !ci,
                "redis-server is not installed, and CI needs it: apt-get install -y redis-server"
            );
            eprintln!(
                "\n*** SKIPPED: redis-server is not installed (apt-get install -y redis-server) ***\n"
            );
            None
        }
        Err(e) => panic!("redis-server did not start: {e}"),
    }
}
