//! NATS JetStream doing the fenced append, with the official Rust client.
//!
//! JetStream has no token comparison, so the fence is its compare-and-set:
//! every publish carries `Nats-Expected-Last-Subject-Sequence`, the stream
//! sequence of the last message on the stream's subject as the writer last
//! saw it, and the server refuses the publish when another message has
//! landed since. Taking the lease with token t publishes a fence message
//! (chained the same way), so a writer holding an older lease presents a
//! sequence from before that fence and is refused by the server. Which
//! sequence a writer presents is the only thing decided here; the refusal
//! is the server's. With `sync_interval: always` (set by
//! `benches/peers/run.sh`) the publish ack comes after the fsync.
//!
//! One message is one append: its records are length-prefixed in the
//! payload, so a batch lands atomically, and the headers carry the token
//! and the first record's seq so verification can read both back.

use super::{BenchError, Outcome, StreamDump, Workload};
use async_nats::jetstream::{self, consumer::pull, context::PublishErrorKind, stream};
use async_nats::HeaderMap;
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The JetStream stream holding every bench stream, one subject each.
const STREAM: &str = "FENCELOG_BENCH";
const SUBJECT_PREFIX: &str = "fl.";
const TOKEN_HEADER: &str = "Fl-Token";
const SEQ_HEADER: &str = "Fl-Seq";
const FENCE_HEADER: &str = "Fl-Fence";
const EXPECTED_HEADER: &str = "Nats-Expected-Last-Subject-Sequence";

/// What the writers of one subject know: the owner's token, the stream
/// sequence of the subject's last message, the sequence just before the
/// owner's fence (all an older lease holder can have seen), and the next
/// record seq.
#[derive(Debug, Default)]
struct Lease {
    token: u64,
    last_seq: u64,
    before_fence: u64,
    next: u64,
}

type Leases = Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<Lease>>>>>;

pub struct Backend {
    url: String,
    leases: Leases,
}

fn nats<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> BenchError + '_ {
    move |e| BenchError::target(format!("NATS {what}: {e}"))
}

impl Backend {
    pub async fn new(url: &str) -> Result<Backend, BenchError> {
        let host = url
            .trim_start_matches("nats://")
            .rsplit_once(':')
            .map_or(url, |(h, _)| h);
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            return Err(BenchError::args(
                "--nats-url must point at a loopback address; load is only sent to this machine",
            ));
        }
        let client = async_nats::connect(url).await.map_err(nats("connect"))?;
        let js = jetstream::new(client);
        js.get_or_create_stream(stream::Config {
            name: STREAM.to_string(),
            subjects: vec![format!("{SUBJECT_PREFIX}>")],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(nats("creating the stream"))?;
        Ok(Backend {
            url: url.to_string(),
            leases: Leases::default(),
        })
    }
}

impl super::Backend for Backend {
    type Conn = Conn;

    fn name(&self) -> &'static str {
        "nats"
    }

    async fn connect(&self) -> Result<Conn, BenchError> {
        let client = async_nats::connect(&self.url)
            .await
            .map_err(nats("connect"))?;
        Ok(Conn {
            js: jetstream::new(client),
            leases: self.leases.clone(),
        })
    }

    fn supports(&self, workload: Workload) -> bool {
        matches!(
            workload,
            Workload::Append | Workload::Reject | Workload::Mixed | Workload::Fill
        )
    }
}

pub struct Conn {
    js: jetstream::Context,
    leases: Leases,
}

fn subject(stream: &str) -> String {
    format!("{SUBJECT_PREFIX}{stream}")
}

fn header_u64(headers: Option<&HeaderMap>, name: &str) -> Option<u64> {
    headers?.get(name)?.as_str().parse().ok()
}

/// Records as `u32 LE length, bytes`, one after another.
fn encode(records: &[Bytes]) -> Bytes {
    let mut out = BytesMut::with_capacity(records.iter().map(|r| 4 + r.len()).sum());
    for r in records {
        let len = u32::try_from(r.len()).expect("a record of 4 GiB or more has no u32 length");
        out.put_u32_le(len);
        out.put_slice(r);
    }
    out.freeze()
}

fn decode(mut payload: Bytes) -> Option<Vec<Bytes>> {
    let mut out = Vec::new();
    while !payload.is_empty() {
        let len = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
        let end = 4usize.checked_add(len)?;
        if payload.len() < end {
            return None;
        }
        out.push(payload.slice(4..end));
        payload = payload.slice(end..);
    }
    Some(out)
}

enum Published {
    At(u64),
    WrongLastSequence,
}

impl Conn {
    fn lease(&self, stream: &str) -> Arc<tokio::sync::Mutex<Lease>> {
        let mut all = self.leases.lock().expect("lease table poisoned");
        all.entry(stream.to_string()).or_default().clone()
    }

    async fn publish(
        &self,
        stream: &str,
        mut headers: HeaderMap,
        expected: u64,
        payload: Bytes,
    ) -> Result<Published, BenchError> {
        headers.insert(EXPECTED_HEADER, expected.to_string().as_str());
        let ack = self
            .js
            .publish_with_headers(subject(stream), headers, payload)
            .await
            .map_err(nats("publish"))?
            .await;
        match ack {
            Ok(ack) => Ok(Published::At(ack.sequence)),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                Ok(Published::WrongLastSequence)
            }
            Err(e) => Err(BenchError::target(format!("NATS publish ack: {e}"))),
        }
    }

    /// The subject's last message as the server has it: its stream
    /// sequence and the record seq that follows it.
    async fn last(&self, stream: &str) -> Result<(u64, u64), BenchError> {
        use async_nats::jetstream::stream::LastRawMessageErrorKind as Kind;
        let js_stream = self
            .js
            .get_stream_no_info(STREAM)
            .await
            .map_err(nats("stream"))?;
        match js_stream
            .get_last_raw_message_by_subject(&subject(stream))
            .await
        {
            Ok(m) => {
                let h = Some(&m.headers);
                let records = decode(m.payload.clone()).map_or(0, |r| r.len() as u64);
                // A fence message has no records, so this holds for both.
                let next = header_u64(h, SEQ_HEADER).map_or(0, |s| s + records);
                Ok((m.sequence, next))
            }
            Err(e) if e.kind() == Kind::NoMessageFound => Ok((0, 0)),
            Err(e) => Err(BenchError::target(format!("NATS last message: {e}"))),
        }
    }
}

impl super::Conn for Conn {
    async fn fence(&mut self, stream: &str, token: u64) -> Result<(), BenchError> {
        let lease = self.lease(stream);
        let mut lease = lease.lock().await;
        let (last_seq, next) = self.last(stream).await?;
        let mut headers = HeaderMap::new();
        headers.insert(FENCE_HEADER, token.to_string().as_str());
        headers.insert(TOKEN_HEADER, token.to_string().as_str());
        headers.insert(SEQ_HEADER, next.to_string().as_str());
        match self
            .publish(stream, headers, last_seq, Bytes::new())
            .await?
        {
            Published::At(seq) => {
                *lease = Lease {
                    token,
                    last_seq: seq,
                    before_fence: last_seq,
                    next,
                };
                Ok(())
            }
            Published::WrongLastSequence => Err(BenchError::target(format!(
                "{stream}: fence with {token} raced another writer"
            ))),
        }
    }

    async fn append(
        &mut self,
        stream: &str,
        token: u64,
        records: &[Bytes],
    ) -> Result<Outcome, BenchError> {
        let lease = self.lease(stream);
        // Held across the publish: one subject's writes are a chain of
        // compare-and-sets, so its owner's appends go one at a time.
        let mut lease = lease.lock().await;
        let owner = token >= lease.token;
        let expected = if owner {
            lease.last_seq
        } else {
            lease.before_fence
        };
        let mut headers = HeaderMap::new();
        headers.insert(TOKEN_HEADER, token.to_string().as_str());
        headers.insert(SEQ_HEADER, lease.next.to_string().as_str());
        match self
            .publish(stream, headers, expected, encode(records))
            .await?
        {
            Published::At(seq) => {
                let first_seq = lease.next;
                lease.last_seq = seq;
                lease.next += records.len() as u64;
                // A stale writer accepted here is the server's doing; the
                // run's ledger reports it as a failure.
                Ok(Outcome::Appended { first_seq })
            }
            Published::WrongLastSequence => Ok(Outcome::Stale),
        }
    }

    async fn read(
        &mut self,
        _stream: &str,
        _start_seq: u64,
        _count: usize,
    ) -> Result<Vec<(u64, Bytes)>, BenchError> {
        Err(BenchError::args(
            "the nats peer does not run the read workload",
        ))
    }

    async fn healthz(&mut self) -> Result<(), BenchError> {
        Err(BenchError::args("nats has no healthz"))
    }

    async fn dump(&mut self, stream: &str, _with_token: bool) -> Result<StreamDump, BenchError> {
        dump_subject(&self.js, stream).await
    }
}

/// Every message on the stream's subject, in order, through an ordered
/// consumer that stops at the last one.
async fn dump_subject(js: &jetstream::Context, stream: &str) -> Result<StreamDump, BenchError> {
    use futures_util::StreamExt;
    let mut dump = StreamDump::default();
    let js_stream = js
        .get_stream_no_info(STREAM)
        .await
        .map_err(nats("stream"))?;
    if let Err(e) = js_stream
        .get_last_raw_message_by_subject(&subject(stream))
        .await
    {
        use async_nats::jetstream::stream::LastRawMessageErrorKind as Kind;
        return match e.kind() {
            Kind::NoMessageFound => Ok(dump),
            _ => Err(BenchError::target(format!("NATS last message: {e}"))),
        };
    }
    let consumer = js_stream
        .create_consumer(pull::OrderedConfig {
            filter_subject: subject(stream),
            ..Default::default()
        })
        .await
        .map_err(nats("consumer"))?;
    let mut messages = consumer.messages().await.map_err(nats("messages"))?;
    while let Some(m) = messages.next().await {
        let m = m.map_err(nats("message"))?;
        let pending = m.info().map_err(nats("message info"))?.pending;
        let h = m.headers.as_ref();
        let token = header_u64(h, TOKEN_HEADER)
            .ok_or_else(|| BenchError::target(format!("{stream}: a message lacks its token")))?;
        dump.highest_token = dump.highest_token.max(Some(token));
        if h.and_then(|h| h.get(FENCE_HEADER)).is_none() {
            let first = header_u64(h, SEQ_HEADER)
                .ok_or_else(|| BenchError::target(format!("{stream}: a message lacks its seq")))?;
            let records = decode(m.payload.clone())
                .ok_or_else(|| BenchError::target(format!("{stream}: a torn payload")))?;
            for (i, r) in records.into_iter().enumerate() {
                dump.records.push((first + i as u64, token, r));
            }
        }
        if pending == 0 {
            break;
        }
    }
    dump.next_seq = dump.records.last().map_or(0, |(s, _, _)| s + 1);
    Ok(dump)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_torn_ones_are_refused() {
        let records = vec![
            Bytes::from_static(b"a"),
            Bytes::new(),
            Bytes::from(vec![7u8; 300]),
        ];
        let wire = encode(&records);
        assert_eq!(decode(wire.clone()), Some(records));
        assert_eq!(decode(wire.slice(..wire.len() - 1)), None);
        assert_eq!(decode(Bytes::new()), Some(vec![]));
    }
}
