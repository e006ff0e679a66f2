//! Idempotent producers in the client: a [`Producer`] that assigns
//! `producer_seq` itself and retries transport failures and unknown
//! outcomes with the same seq — so "outcome unknown" disappears for its
//! appends — plus "did my write land?", the fence history, cursors and
//! multi-stream batches.

use crate::request::Req;
use crate::{decode_response, escape_segment, AppendAck, Client, ClientError};
use bytes::Bytes;
use fencelog_api::{
    AppendRequest, BatchOpRequest, BatchRequest, BodyJson, CursorInfo, CursorList, CursorRequest,
    ErrorCode, FenceList, ProducerInfo, RecordInJson,
};
use serde_json::Value;
use std::time::Duration;

/// Retries of one producer append after a transport failure or an
/// unknown outcome, before the error is returned.
pub const PRODUCER_RETRIES_MAX: u32 = 5;
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(50);

/// One operation of [`Client::batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Append `records` to `stream` (only if its `next_seq` is
    /// `match_seq_num`, when given).
    Append {
        stream: String,
        fencing_token: u64,
        records: Vec<Bytes>,
        match_seq_num: Option<u64>,
    },
    /// Fence `stream`.
    Fence { stream: String, fencing_token: u64 },
}

impl Client {
    /// "Did my write land?": producer `id`'s last applied append on
    /// `stream`; `None` when the stream does not remember it. A read:
    /// retried on transport errors.
    pub async fn producer(
        &self,
        stream: &str,
        id: &str,
    ) -> Result<Option<ProducerInfo>, ClientError> {
        let url = self.stream_url(stream, &format!("/producers/{}", escape_segment(id)));
        let answer = self.send_idempotent_raw(Req::get(url)).await?;
        match decode_response(answer) {
            Ok(info) => Ok(Some(info)),
            Err(ClientError::Rejected { answer }) if answer.code == ErrorCode::ProducerNotFound => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The stream's fence history, newest first (at most `limit`).
    pub async fn fences(&self, stream: &str, limit: Option<u64>) -> Result<FenceList, ClientError> {
        let mut url = self.stream_url(stream, "/fences");
        if let Some(l) = limit {
            url.push_str(&format!("?limit={l}"));
        }
        self.send_idempotent(Req::get(url)).await
    }

    /// Commits cursor `name` at `seq` with `fencing_token`. Never retried.
    pub async fn commit_cursor(
        &self,
        stream: &str,
        name: &str,
        fencing_token: u64,
        seq: u64,
    ) -> Result<CursorInfo, ClientError> {
        let url = self.stream_url(stream, &format!("/cursors/{}", escape_segment(name)));
        let req = Req::put(url).json(&CursorRequest { fencing_token, seq });
        self.send_once(req).await
    }

    /// Cursor `name` of `stream` (`ClientError::Rejected` with `cursor_not_found` when there is none).
    pub async fn cursor(&self, stream: &str, name: &str) -> Result<CursorInfo, ClientError> {
        let url = self.stream_url(stream, &format!("/cursors/{}", escape_segment(name)));
        self.send_idempotent(Req::get(url)).await
    }

    /// Every cursor of `stream`, in name order.
    pub async fn cursors(&self, stream: &str) -> Result<CursorList, ClientError> {
        let url = self.stream_url(stream, "/cursors");
        self.send_idempotent(Req::get(url)).await
    }

    /// A multi-stream batch, all or nothing. The answer is one JSON ack per
    /// op (an append's ack or a fence's stream state). A refused batch is
    /// [`ClientError::BatchRefused`] with every op's outcome. Never
    /// retried.
    pub async fn batch(
        &self,
        ops: &[BatchOp],
        not_after_ms: Option<u64>,
    ) -> Result<Vec<Value>, ClientError> {
        let ops = ops
            .iter()
            .map(|op| match op {
                BatchOp::Append {
                    stream,
                    fencing_token,
                    records,
                    match_seq_num,
                } => BatchOpRequest {
                    stream: stream.clone(),
                    fencing_token: *fencing_token,
                    records: Some(records.iter().map(|r| BodyJson::encode(r)).collect()),
                    match_seq_num: *match_seq_num,
                    fence: false,
                },
                BatchOp::Fence {
                    stream,
                    fencing_token,
                } => BatchOpRequest {
                    stream: stream.clone(),
                    fencing_token: *fencing_token,
                    records: None,
                    match_seq_num: None,
                    fence: true,
                },
            })
            .collect();
        let body = BatchRequest { ops, not_after_ms };
        let req = Req::post(format!("{}/v1/batch", self.base)).json(&body);
        let answer: Value = self.send_once(req).await?;
        Ok(answer["ops"].as_array().cloned().unwrap_or_default())
    }

    /// One idempotent append, sent once.
    async fn append_as(
        &self,
        stream: &str,
        token: u64,
        id: &str,
        seq: u64,
        records: &[Bytes],
        not_after_ms: Option<u64>,
    ) -> Result<AppendAck, ClientError> {
        let body = AppendRequest {
            fencing_token: token,
            match_seq_num: None,
            not_after_ms,
            producer_id: Some(id.to_string()),
            producer_seq: Some(seq),
            records: records.iter().map(|r| RecordInJson::body(r)).collect(),
        };
        let req = Req::post(self.stream_url(stream, "/records")).json(&body);
        self.send_ack(req).await
    }
}

/// An idempotent producer on one stream with one fencing token. It numbers
/// its appends itself (`producer_seq`), and an append whose outcome is
/// unknown — the connection failed, or the server answered that the
/// request may or may not be durable — is sent again with the same seq:
/// the server applies it at most once and answers a retry of an applied
/// append with its original ack (`duplicate: true`). So an append either
/// returns its ack or an error that says it was not applied — or, after
/// [`PRODUCER_RETRIES_MAX`] retries, the last unknown outcome.
#[derive(Debug, Clone)]
pub struct Producer {
    client: Client,
    stream: String,
    id: String,
    token: u64,
    next_seq: u64,
    not_after_ms: Option<u64>,
}

impl Producer {
    /// A producer whose next append carries `next_producer_seq` (one that
    /// keeps its own count; [`Producer::start`] asks the server instead).
    pub fn new(
        client: Client,
        stream: &str,
        id: &str,
        fencing_token: u64,
        next_producer_seq: u64,
    ) -> Producer {
        Producer {
            client,
            stream: stream.to_string(),
            id: id.to_string(),
            token: fencing_token,
            next_seq: next_producer_seq,
            not_after_ms: None,
        }
    }

    /// A producer that continues where producer `id` left off on `stream`
    /// (its last applied seq + 1, from the server), or starts at 0.
    pub async fn start(
        client: Client,
        stream: &str,
        id: &str,
        fencing_token: u64,
    ) -> Result<Producer, ClientError> {
        let last = match client.producer(stream, id).await {
            Ok(last) => last,
            // A stream that does not exist yet knows no producer.
            Err(ClientError::StreamNotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let next_seq = last.map_or(0, |p| p.producer_seq + 1);
        Ok(Producer::new(client, stream, id, fencing_token, next_seq))
    }

    /// Appends from now on carry this deadline (Unix ms): the server
    /// accepts them only if its timestamp for them is at most this. A
    /// worker passes its lease's expiry minus its clock-skew margin.
    pub fn set_deadline(&mut self, not_after_ms: Option<u64>) {
        self.not_after_ms = not_after_ms;
    }

    /// The seq the next append will carry.
    pub fn next_producer_seq(&self) -> u64 {
        self.next_seq
    }

    /// Appends `records` with the next producer seq, retrying unknown
    /// outcomes with the same seq (see the type's comment).
    pub async fn append<I, B>(&mut self, records: I) -> Result<AppendAck, ClientError>
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        let records: Vec<Bytes> = records.into_iter().map(Into::into).collect();
        let seq = self.next_seq;
        let mut attempt = 0;
        loop {
            let r = self
                .client
                .append_as(
                    &self.stream,
                    self.token,
                    &self.id,
                    seq,
                    &records,
                    self.not_after_ms,
                )
                .await;
            match r {
                Ok(ack) => {
                    self.next_seq = seq + 1;
                    return Ok(ack);
                }
                Err(e) if attempt < PRODUCER_RETRIES_MAX && unknown_outcome(&e) => {
                    attempt += 1;
                    tokio::time::sleep(RETRY_BACKOFF_MIN * attempt).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether the append may or may not have been applied (or never left),
/// so a retry with the same producer seq is the way to find out.
fn unknown_outcome(e: &ClientError) -> bool {
    match e {
        ClientError::OutcomeUnknown { .. } | ClientError::Transport { .. } => true,
        ClientError::Unavailable { .. } | ClientError::InsufficientStorage { .. } => {
            // Retried whether or not this request reached the disk: the
            // server decides at most once, by producer seq.
            true
        }
        _ => false,
    }
}
