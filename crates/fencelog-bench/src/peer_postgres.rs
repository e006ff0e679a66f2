//! PostgreSQL doing what the seeds describe: a conditional update of the
//! stream's highest token and the insert of the records, atomically.
//!
//! Both happen in one statement (a data-modifying CTE), which PostgreSQL
//! runs as one transaction: one round trip per append, the cheapest way to
//! do this correctly in PostgreSQL, so the comparison does not handicap it.
//! A stale token matches no row, inserts nothing, and writes no WAL, so a
//! rejection costs no fsync, as in fencelog.

use super::{BenchError, Outcome, StreamDump, Workload};
use bytes::Bytes;
use tokio_postgres::{Client, NoTls, Statement};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS fencelog_streams (
    name text PRIMARY KEY,
    highest_token bigint NOT NULL,
    next_seq bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS fencelog_records (
    stream text NOT NULL,
    seq bigint NOT NULL,
    token bigint NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (stream, seq)
);";

/// `$1` stream, `$2` token, `$3` bodies. Returns the seqs written, none
/// when the token is stale.
const APPEND: &str = "
WITH s AS (
    UPDATE fencelog_streams
       SET highest_token = $2, next_seq = next_seq + cardinality($3::bytea[])
     WHERE name = $1 AND highest_token <= $2
 RETURNING next_seq - cardinality($3::bytea[]) AS first_seq
)
INSERT INTO fencelog_records (stream, seq, token, body)
SELECT $1, s.first_seq + b.ord - 1, $2, b.body
  FROM s, unnest($3::bytea[]) WITH ORDINALITY AS b(body, ord)
RETURNING seq";

const FENCE: &str = "
INSERT INTO fencelog_streams (name, highest_token, next_seq) VALUES ($1, $2, 0)
ON CONFLICT (name) DO UPDATE SET highest_token = excluded.highest_token
 WHERE fencelog_streams.highest_token <= excluded.highest_token";

pub struct Backend {
    config: tokio_postgres::Config,
}

impl Backend {
    pub async fn new(url: &str) -> Result<Backend, BenchError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| BenchError::args(format!("--pg-url: {e}")))?;
        for host in config.get_hosts() {
            if let tokio_postgres::config::Host::Tcp(h) = host {
                let loopback = tokio::net::lookup_host((h.as_str(), 0))
                    .await
                    .map(|mut a| a.all(|a| a.ip().is_loopback()))
                    .unwrap_or(false);
                if !loopback {
                    return Err(BenchError::args(format!(
                        "--pg-url host {h} is not loopback; load is only sent to this machine"
                    )));
                }
            }
        }
        let backend = Backend { config };
        let (client, _driver) = backend.client().await?;
        client
            .batch_execute(SCHEMA)
            .await
            .map_err(|e| BenchError::target(format!("creating tables: {e}")))?;
        Ok(backend)
    }

    async fn client(&self) -> Result<(Client, tokio::task::JoinHandle<()>), BenchError> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| BenchError::target(format!("connecting to PostgreSQL: {e}")))?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((client, driver))
    }
}

impl super::Backend for Backend {
    type Conn = Conn;

    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn connect(&self) -> Result<Conn, BenchError> {
        let (client, driver) = self.client().await?;
        let prep = |sql: &'static str| {
            let client = &client;
            async move {
                client
                    .prepare(sql)
                    .await
                    .map_err(|e| BenchError::target(format!("preparing: {e}")))
            }
        };
        let append = prep(APPEND).await?;
        let fence = prep(FENCE).await?;
        let read = prep(
            "SELECT seq, token, body FROM fencelog_records
              WHERE stream = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
        )
        .await?;
        let state =
            prep("SELECT highest_token, next_seq FROM fencelog_streams WHERE name = $1").await?;
        Ok(Conn {
            client,
            driver,
            append,
            fence,
            read,
            state,
        })
    }

    fn supports(&self, workload: Workload) -> bool {
        !matches!(workload, Workload::Tail | Workload::Healthz)
    }
}

pub struct Conn {
    client: Client,
    driver: tokio::task::JoinHandle<()>,
    append: Statement,
    fence: Statement,
    read: Statement,
    state: Statement,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn db(what: &str) -> impl FnOnce(tokio_postgres::Error) -> BenchError + '_ {
    move |e| BenchError::target(format!("PostgreSQL {what}: {e}"))
}

fn token_i64(token: u64) -> Result<i64, BenchError> {
    i64::try_from(token).map_err(|_| BenchError::args("PostgreSQL tokens must fit in bigint"))
}

impl super::Conn for Conn {
    async fn fence(&mut self, stream: &str, token: u64) -> Result<(), BenchError> {
        let n = self
            .client
            .execute(&self.fence, &[&stream, &token_i64(token)?])
            .await
            .map_err(db("fence"))?;
        if n != 1 {
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
        let bodies: Vec<&[u8]> = records.iter().map(|r| r.as_ref()).collect();
        let rows = self
            .client
            .query(&self.append, &[&stream, &token_i64(token)?, &bodies])
            .await
            .map_err(db("append"))?;
        match rows.iter().map(|r| r.get::<_, i64>(0)).min() {
            Some(first) => Ok(Outcome::Appended {
                first_seq: first as u64,
            }),
            None => Ok(Outcome::Stale),
        }
    }

    async fn read(
        &mut self,
        stream: &str,
        start_seq: u64,
        count: usize,
    ) -> Result<Vec<(u64, Bytes)>, BenchError> {
        let rows = self
            .client
            .query(&self.read, &[&stream, &(start_seq as i64), &(count as i64)])
            .await
            .map_err(db("read"))?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    r.get::<_, i64>(0) as u64,
                    Bytes::from(r.get::<_, Vec<u8>>(2)),
                )
            })
            .collect())
    }

    async fn healthz(&mut self) -> Result<(), BenchError> {
        Err(BenchError::args("postgres has no healthz"))
    }

    async fn dump(&mut self, stream: &str, _with_token: bool) -> Result<StreamDump, BenchError> {
        let mut dump = StreamDump::default();
        if let Some(row) = self
            .client
            .query_opt(&self.state, &[&stream])
            .await
            .map_err(db("stream state"))?
        {
            dump.highest_token = Some(row.get::<_, i64>(0) as u64);
            dump.next_seq = row.get::<_, i64>(1) as u64;
        }
        let rows = self
            .client
            .query(
                "SELECT seq, token, body FROM fencelog_records WHERE stream = $1 ORDER BY seq",
                &[&stream],
            )
            .await
            .map_err(db("dump"))?;
        dump.records = rows
            .iter()
            .map(|r| {
                (
                    r.get::<_, i64>(0) as u64,
                    r.get::<_, i64>(1) as u64,
                    Bytes::from(r.get::<_, Vec<u8>>(2)),
                )
            })
            .collect();
        Ok(dump)
    }
}
