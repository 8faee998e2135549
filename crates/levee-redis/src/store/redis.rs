//! The production store: Redis keys with a time to live, and pub/sub.

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::{OnceCell, mpsc};

use super::{LEASE_COOL_OFF, Lease, Notices, Space, Store, StoreError, Stored};

/// Stores `ARGV[1]` under `KEYS[1]` for `ARGV[2]` ms (`-1`: no expiry)
/// unless the key lives longer, indexes it in `KEYS[2]` by its expiry on
/// the server's clock, and publishes it on `ARGV[3]` if stored: one round
/// trip, atomic, so two replicas racing keep the longer wait.
const PUT: &str = r"
local held = redis.call('PTTL', KEYS[1])
local ttl = tonumber(ARGV[2])
if held == -1 then return 0 end
if held > 0 and ttl >= 0 and held >= ttl then return 0 end
if ttl < 0 then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], '+inf', KEYS[1])
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
";

/// Stores `ARGV[1]` under `KEYS[1]` for `ARGV[2]` ms whatever it held,
/// indexes it in `KEYS[2]`, and publishes it on `ARGV[3]`.
const REPLACE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
";

/// Takes (or renews) the lease `KEYS[1]` for holder `ARGV[1]` for `ARGV[2]`
/// ms unless another holder has it: `{1, '', 0}` taken, or `{0, holder, ttl}`. A
/// value with no expiry is no lease (a lease always expires): taken over.
const LEASE: &str = r"
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return {0, held, ttl} end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, '', 0}
";

/// Frees the lease `KEYS[1]` if `ARGV[1]` holds it: at once (`ARGV[2]` is
/// `-1`), or after `ARGV[2]` ms held by no replica (the value `ARGV[3]`).
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local keep = tonumber(ARGV[2])
if keep < 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', keep)
end
return 1
";

/// Every live value the index `KEYS[1]` lists (at most `ARGV[1]`), each
/// followed by its time to live in ms; drops what expired from the index.
/// One round trip that reads the fleet's keys only, however many others
/// the server holds.
const SCAN: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
local keys = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
local out = {}
for _, k in ipairs(keys) do
  local v = redis.call('GET', k)
  local ttl = redis.call('PTTL', k)
  if v and ttl ~= -2 then
    table.insert(out, v)
    table.insert(out, ttl)
  else
    redis.call('ZREM', KEYS[1], k)
  end
end
return out
";

/// The most decisions one read returns: far above any fleet's live
/// decisions, a bound on what a flooded index costs.
const MAX_SCAN: usize = 10_000;

/// A [`Store`] on a Redis server (or Valkey, or a managed Redis): one
/// reconnecting connection for commands (the `redis` crate's
/// `ConnectionManager`), one subscription for notices. Keys are read
/// through the fleet's index, never by walking the server's keys; the
/// scripts touch keys they are not given, so a Redis Cluster is not
/// supported (a standalone server or a replicated primary is).
///
/// The URL's password never appears in its `Debug`, in a
/// [`StoreError`] or in a log line. TLS (`rediss://`) needs one of the
/// `redis` crate's TLS features, which the application enables.
///
/// ```
/// use levee_redis::RedisStore;
///
/// let store = RedisStore::open("redis://:s3cret@cache.internal:6379/0").unwrap();
/// assert_eq!(format!("{store:?}"), r#"RedisStore { url: "redis://:***@cache.internal:6379/0" }"#);
/// assert!(RedisStore::open("http://nope").is_err());
/// ```
pub struct RedisStore {
    client: redis::Client,
    commands: OnceCell<ConnectionManager>,
    url: String,
    secret: Option<String>,
    timeout: Duration,
}

impl RedisStore {
    /// A store for the server at `url` (`redis://`, `rediss://`,
    /// `redis+unix://`), checked now; nothing connects until the fleet runs.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let (redacted, secret) = redact(url);
        let client = redis::Client::open(url).map_err(|e| {
            let message = scrub(&e.to_string(), secret.as_deref());
            StoreError::new(format!("invalid url {redacted}: {message}"))
        })?;
        Ok(RedisStore {
            client,
            commands: OnceCell::new(),
            url: redacted,
            secret,
            timeout: Duration::from_secs(2),
        })
    }

    /// How long one operation may take before it counts as failed (2 s by
    /// default).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The URL with its password masked.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn error(&self, what: &str, e: &redis::RedisError) -> StoreError {
        let message = scrub(&e.to_string(), self.secret.as_deref());
        StoreError::new(format!("{what} at {}: {message}", self.url))
    }

    async fn commands(&self) -> Result<ConnectionManager, StoreError> {
        let timeout = self.timeout;
        let manager = self
            .commands
            .get_or_try_init(|| async {
                // The fleet backs off and reconnects on its own: the manager
                // tries once per command, within the operation's timeout.
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(1)
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            })
            .await
            .map_err(|e| self.error("connecting", &e))?;
        Ok(manager.clone())
    }

    /// Runs `f` within the timeout.
    async fn timed<R>(
        &self,
        what: &str,
        f: impl Future<Output = Result<R, StoreError>>,
    ) -> Result<R, StoreError> {
        tokio::time::timeout(self.timeout, f)
            .await
            .map_err(|_| StoreError::new(format!("{what} at {}: timed out", self.url)))?
    }
}

impl RedisStore {
    /// Runs `script` (`PUT` or `REPLACE`) on `key`, the space's index and
    /// channel: one round trip that stores and notifies.
    async fn store_notice(
        &self,
        script: &str,
        space: &Space,
        key: &str,
        notice: &[u8],
        ttl_ms: i64,
    ) -> Result<(), StoreError> {
        self.timed("storing", async {
            let mut conn = self.commands().await?;
            redis::Script::new(script)
                .key(key)
                .key(&space.index)
                .arg(notice)
                .arg(ttl_ms)
                .arg(&space.channel)
                .invoke_async::<i64>(&mut conn)
                .await
                .map_err(|e| self.error("storing", &e))?;
            Ok(())
        })
        .await
    }
}

impl Store for RedisStore {
    async fn put(
        &self,
        space: &Space,
        key: &str,
        notice: &[u8],
        ttl: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.store_notice(PUT, space, key, notice, ttl.map_or(-1, millis))
            .await
    }

    async fn remove(
        &self,
        space: &Space,
        keys: &[String],
        notice: &[u8],
    ) -> Result<(), StoreError> {
        self.timed("removing", async {
            let mut conn = self.commands().await?;
            let mut pipe = redis::pipe();
            pipe.atomic();
            if !keys.is_empty() {
                pipe.del(keys).ignore();
                pipe.zrem(&space.index, keys).ignore();
            }
            pipe.publish(&space.channel, notice).ignore();
            pipe.query_async::<()>(&mut conn)
                .await
                .map_err(|e| self.error("removing", &e))
        })
        .await
    }

    async fn replace(
        &self,
        space: &Space,
        key: &str,
        notice: &[u8],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.store_notice(REPLACE, space, key, notice, millis(ttl))
            .await
    }

    async fn lease(&self, key: &str, holder: &str, ttl: Duration) -> Result<Lease, StoreError> {
        self.timed("leasing", async {
            let mut conn = self.commands().await?;
            let answer: redis::Value = redis::Script::new(LEASE)
                .key(key)
                .arg(holder)
                .arg(millis(ttl))
                .invoke_async(&mut conn)
                .await
                .map_err(|e| self.error("leasing", &e))?;
            let parsed: (i64, Option<String>, Option<i64>) = redis::from_redis_value(answer)
                .map_err(|e| StoreError::new(format!("leasing at {}: {e}", self.url)))?;
            Ok(match parsed {
                (1, _, _) => Lease::Taken,
                (_, holder, ttl) => Lease::Held {
                    holder: holder.unwrap_or_default(),
                    ttl: ttl
                        .filter(|ms| *ms > 0)
                        .map_or(Duration::from_millis(1), |ms| {
                            Duration::from_millis(ms.unsigned_abs())
                        }),
                },
            })
        })
        .await
    }

    async fn release(
        &self,
        key: &str,
        holder: &str,
        keep: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.timed("releasing", async {
            let mut conn = self.commands().await?;
            redis::Script::new(RELEASE)
                .key(key)
                .arg(holder)
                .arg(keep.map_or(-1, millis))
                .arg(LEASE_COOL_OFF)
                .invoke_async::<i64>(&mut conn)
                .await
                .map_err(|e| self.error("releasing", &e))?;
            Ok(())
        })
        .await
    }

    async fn scan(&self, space: &Space) -> Result<Vec<Stored>, StoreError> {
        self.timed("reading", async {
            let mut conn = self.commands().await?;
            let values: Vec<(Vec<u8>, i64)> = redis::Script::new(SCAN)
                .key(&space.index)
                .arg(MAX_SCAN)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| self.error("reading", &e))?;
            Ok(values
                .into_iter()
                .filter_map(|(value, ttl)| {
                    let ttl = match ttl {
                        -1 => None,
                        ms if ms > 0 => Some(Duration::from_millis(ms.unsigned_abs())),
                        _ => return None,
                    };
                    Some(Stored { value, ttl })
                })
                .collect())
        })
        .await
    }

    async fn listen(&self, space: &Space) -> Result<Notices, StoreError> {
        let channel = space.channel.as_str();
        let mut pubsub = self
            .timed("subscribing", async {
                let mut pubsub = self
                    .client
                    .get_async_pubsub()
                    .await
                    .map_err(|e| self.error("subscribing", &e))?;
                pubsub
                    .subscribe(channel)
                    .await
                    .map_err(|e| self.error("subscribing", &e))?;
                Ok(pubsub)
            })
            .await?
            .into_on_message();
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    message = pubsub.next() => {
                        let Some(message) = message else { break };
                        // A listener that falls behind loses notices, not
                        // memory: the periodic read makes up for them.
                        if let Err(mpsc::error::TrySendError::Closed(_)) =
                            tx.try_send(message.get_payload_bytes().to_vec())
                        {
                            break;
                        }
                    }
                    () = tx.closed() => break,
                }
            }
        });
        Ok(rx)
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .finish()
    }
}

/// A positive duration in whole milliseconds, as Redis takes expiries.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis().max(1)).unwrap_or(i64::MAX)
}

/// The URL with its password masked, and the password: the user info's
/// (`redis://user:pw@host`, and a lone `redis://pw@host`, which the
/// `redis` crate reads as a user name but people write as a password),
/// and a `pass` or `password` query parameter (`redis+unix:///s?pass=pw`).
pub(crate) fn redact(url: &str) -> (String, Option<String>) {
    let Some(scheme_end) = url.find("://") else {
        return (url.to_owned(), None);
    };
    let (mut masked, mut secret) = (url.to_owned(), None);
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..authority_end].rfind('@') {
        let userinfo = &rest[..at];
        let (user, password) = userinfo.split_once(':').unwrap_or(("", userinfo));
        if !password.is_empty() {
            secret = Some(password.to_owned());
            masked = format!("{}://{user}:***{}", &url[..scheme_end], &rest[at..]);
        }
    }
    if let Some(q) = masked.find('?') {
        let (head, query) = masked.split_at(q + 1);
        let mut parts = Vec::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some((name, value)) if matches!(name, "pass" | "password") && !value.is_empty() => {
                    secret.get_or_insert_with(|| value.to_owned());
                    parts.push(format!("{name}=***"));
                }
                _ => parts.push(pair.to_owned()),
            }
        }
        masked = format!("{head}{}", parts.join("&"));
    }
    (masked, secret)
}

/// `text` with every occurrence of `secret` masked.
fn scrub(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if !s.is_empty() => text.replace(s, "***"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_wherever_the_url_puts_them() {
        for (url, shown, secret) in [
            ("redis://:pw@h:6379/0", "redis://:***@h:6379/0", Some("pw")),
            ("redis://user:pw@h", "redis://user:***@h", Some("pw")),
            ("rediss://pw@h/1", "rediss://:***@h/1", Some("pw")),
            ("redis://h:6379", "redis://h:6379", None),
            ("redis://user:@h", "redis://user:@h", None),
            ("redis://:p@ss@h", "redis://:***@h", Some("p@ss")),
            (
                "redis+unix:///run/redis.sock",
                "redis+unix:///run/redis.sock",
                None,
            ),
        ] {
            let (masked, found) = redact(url);
            assert_eq!(masked, shown, "{url}");
            assert_eq!(found.as_deref(), secret, "{url}");
        }
    }

    #[test]
    fn an_invalid_url_is_refused_without_its_password() {
        let err = RedisStore::open("redis://:hunter2@")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
        let err = RedisStore::open("mysql://:hunter2@h")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.starts_with("fleet store: invalid url"), "{err}");
    }
}
