//! Redis doing the fenced append: a Lua script compares the presented token
//! with the stored one and, only if it is not older, raises it and XADDs
//! the records. Scripts run atomically, and with `appendfsync always` the
//! reply is sent only after the AOF write is fsynced.

use super::{BenchError, Outcome, StreamDump, Workload};
use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

/// KEYS[1] the stream's meta hash (token, next), KEYS[2] the Redis stream.
/// ARGV[1] the token, ARGV[2..] the bodies. Returns the first seq, or -1
/// when stale. Each entry carries its seq and token so verification can
/// read them back; tokens stay below 2^53 so Lua numbers hold them exactly.
const APPEND_LUA: &str = r"
local token = tonumber(ARGV[1])
local meta = redis.call('HMGET', KEYS[1], 'token', 'next')
local highest = tonumber(meta[1] or '0')
if token < highest then return -1 end
local first = tonumber(meta[2] or '0')
for i = 2, #ARGV do
  redis.call('XADD', KEYS[2], '*', 'seq', first + i - 2, 't', ARGV[1], 'b', ARGV[i])
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'next', first + #ARGV - 1)
return first
";

/// KEYS[1] meta, ARGV[1] token: raises the token unless it is older.
const FENCE_LUA: &str = r"
local highest = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < highest then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[1])
if redis.call('HEXISTS', KEYS[1], 'next') == 0 then redis.call('HSET', KEYS[1], 'next', 0) end
return 1
";

/// Bounds each XRANGE page while dumping a stream.
const PAGE_ENTRIES: usize = 10_000;

pub struct Backend {
    client: redis::Client,
}

impl Backend {
    pub fn new(url: &str) -> Result<Backend, BenchError> {
        let client =
            redis::Client::open(url).map_err(|e| BenchError::args(format!("--redis-url: {e}")))?;
        let loopback = match &client.get_connection_info().addr {
            redis::ConnectionAddr::Tcp(host, _) => {
                host == "localhost"
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
            redis::ConnectionAddr::Unix(_) => true,
            _ => false,
        };
        if !loopback {
            return Err(BenchError::args(
                "--redis-url must point at a loopback address; load is only sent to this machine",
            ));
        }
        Ok(Backend { client })
    }
}

impl super::Backend for Backend {
    type Conn = Conn;

    fn name(&self) -> &'static str {
        "redis"
    }

    async fn connect(&self) -> Result<Conn, BenchError> {
        let conn = self
            .client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| BenchError::target(format!("connecting to Redis: {e}")))?;
        Ok(Conn {
            conn,
            append: Script::new(APPEND_LUA),
            fence: Script::new(FENCE_LUA),
            loaded: false,
        })
    }

    fn supports(&self, workload: Workload) -> bool {
        !matches!(workload, Workload::Tail | Workload::Healthz)
    }
}

pub struct Conn {
    conn: MultiplexedConnection,
    append: Script,
    fence: Script,
    /// Whether `append` was loaded for pipelined EVALSHA.
    loaded: bool,
}

fn keys(stream: &str) -> (String, String) {
    (format!("fl:{stream}:meta"), format!("fl:{stream}:log"))
}

fn rd(what: &str) -> impl FnOnce(redis::RedisError) -> BenchError + '_ {
    move |e| BenchError::target(format!("Redis {what}: {e}"))
}

fn field<'a>(fields: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn as_bytes(v: &Value) -> Option<Bytes> {
    match v {
        Value::BulkString(b) => Some(Bytes::from(b.clone())),
        Value::SimpleString(s) => Some(Bytes::from(s.clone())),
        _ => None,
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    as_bytes(v).and_then(|b| std::str::from_utf8(&b).ok()?.parse().ok())
}

/// An XRANGE entry: its id and its fields.
type Entry = (String, Vec<(String, Value)>);

fn entries(v: Value) -> Result<Vec<Entry>, BenchError> {
    redis::from_redis_value(&v).map_err(rd("XRANGE reply"))
}

impl Conn {
    /// One append per body, all in one pipeline (one write, one read of
    /// every answer: `redis-benchmark -P`): the first seq of each, -1 for a
    /// stale one. The script is loaded first, so EVALSHA finds it.
    pub async fn append_pipelined(
        &mut self,
        stream: &str,
        token: u64,
        bodies: &[Bytes],
    ) -> Result<Vec<i64>, BenchError> {
        if !self.loaded {
            self.append
                .prepare_invoke()
                .load_async(&mut self.conn)
                .await
                .map_err(rd("SCRIPT LOAD"))?;
            self.loaded = true;
        }
        let (meta, log) = keys(stream);
        let mut pipe = redis::pipe();
        for b in bodies {
            pipe.cmd("EVALSHA")
                .arg(self.append.get_hash())
                .arg(2)
                .arg(&meta)
                .arg(&log)
                .arg(token)
                .arg(b.as_ref());
        }
        pipe.query_async(&mut self.conn)
            .await
            .map_err(rd("pipelined append"))
    }

    async fn entries_from(
        &mut self,
        log: &str,
        start: &str,
        count: usize,
    ) -> Result<Vec<Entry>, BenchError> {
        let v: Value = redis::cmd("XRANGE")
            .arg(log)
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn)
            .await
            .map_err(rd("XRANGE"))?;
        entries(v)
    }
}

impl super::Conn for Conn {
    async fn fence(&mut self, stream: &str, token: u64) -> Result<(), BenchError> {
        let (meta, _) = keys(stream);
        let ok: i64 = self
            .fence
            .key(meta)
            .arg(token)
            .invoke_async(&mut self.conn)
            .await
            .map_err(rd("fence"))?;
        if ok != 1 {
            return Err(BenchError::target(format!(
                "{stream}: fence with {token} was stale"
            )));
        }
        Ok(())
    }

    async fn append(
        &mut self,
        stream: &str,
        token: u64,
        records: &[Bytes],
    ) -> Result<Outcome, BenchError> {
        let (meta, log) = keys(stream);
        let mut inv = self.append.key(meta);
        inv.key(log).arg(token);
        for r in records {
            inv.arg(r.as_ref());
        }
        let first: i64 = inv
            .invoke_async(&mut self.conn)
            .await
            .map_err(rd("append"))?;
        if first < 0 {
            Ok(Outcome::Stale)
        } else {
            Ok(Outcome::Appended {
                first_seq: first as u64,
            })
        }
    }

    async fn read(
        &mut self,
        stream: &str,
        start_seq: u64,
        count: usize,
    ) -> Result<Vec<(u64, Bytes)>, BenchError> {
        // Redis addresses entries by id, not seq; scan from the start. Only
        // used for small fill sizes, so the cost stays bounded.
        let (_, log) = keys(stream);
        let got = self
            .entries_from(
                &log,
                "-",
                usize::try_from(start_seq).map_or(usize::MAX, |s| s.saturating_add(count)),
            )
            .await?;
        Ok(got
            .iter()
            .filter_map(|(_, f)| Some((as_u64(field(f, "seq")?)?, as_bytes(field(f, "b")?)?)))
            .filter(|(seq, _)| *seq >= start_seq)
            .collect())
    }

    async fn healthz(&mut self) -> Result<(), BenchError> {
        Err(BenchError::args("redis has no healthz"))
    }

    async fn dump(&mut self, stream: &str, _with_token: bool) -> Result<StreamDump, BenchError> {
        let (meta, log) = keys(stream);
        let mut dump = StreamDump::default();
        let (token, next): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
            .arg(&meta)
            .arg("token")
            .arg("next")
            .query_async(&mut self.conn)
            .await
            .map_err(rd("HMGET"))?;
        dump.highest_token = token;
        dump.next_seq = next.unwrap_or(0);
        let mut start = "-".to_string();
        // Each page starts after the last id seen, so the scan ends.
        loop {
            let page = self.entries_from(&log, &start, PAGE_ENTRIES).await?;
            let n = page.len();
            for (id, f) in page {
                let seq = field(&f, "seq").and_then(as_u64);
                let t = field(&f, "t").and_then(as_u64);
                let b = field(&f, "b").and_then(as_bytes);
                match (seq, t, b) {
                    (Some(seq), Some(t), Some(b)) => dump.records.push((seq, t, b)),
                    _ => {
                        return Err(BenchError::target(format!(
                            "{log} entry {id} lacks seq, t or b"
                        )))
                    }
                }
                start = format!("({id}");
            }
            if n < PAGE_ENTRIES {
                return Ok(dump);
            }
        }
    }
}
