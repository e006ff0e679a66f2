//! An append's body as the decoders read it, whatever its encoding, and
//! how the encoding is told from `Content-Type`. A leaf: the JSON decoders
//! (`fast_json`, `json_append`) produce this, and the append route turns
//! it into the [`WriteOp`] it writes ([`AppendBody::into_op`]).

use crate::decode::header_view::{visible_ascii, HeaderView};
use axum::http::header;
use bytes::Bytes;
use fencelog_api::header as wire;
use fencelog_engine::{AppendOptions, Header, ProducerSeq, RecordIn, WriteOp};

/// A decoded append: token, records, and the optional `match_seq_num`,
/// idempotent producer (id, seq) and deadline.
#[derive(Debug, PartialEq, Eq)]
pub struct AppendBody {
    /// The fencing token.
    pub token: u64,
    /// The records, in order.
    pub records: Vec<Bytes>,
    /// Each record's headers, in record order, when any record has some;
    /// `None` keeps the common append free of a per-record list.
    pub headers: Option<Vec<Vec<Header>>>,
    /// The seq the batch must start at, if given.
    pub match_seq_num: Option<u64>,
    /// An idempotent producer's (id, seq), if given.
    pub producer: Option<(String, u64)>,
    /// The deadline (Unix ms), if given.
    pub not_after_ms: Option<u64>,
}

impl AppendBody {
    /// Records that carry headers, split into bodies and their headers.
    pub(crate) fn with_headers(
        token: u64,
        records: Vec<RecordIn>,
        match_seq_num: Option<u64>,
    ) -> Self {
        let any = records.iter().any(|r| !r.headers.is_empty());
        let (records, headers): (Vec<Bytes>, Vec<Vec<Header>>) =
            records.into_iter().map(|r| (r.body, r.headers)).unzip();
        AppendBody {
            token,
            records,
            headers: any.then_some(headers),
            match_seq_num,
            producer: None,
            not_after_ms: None,
        }
    }
}

impl AppendBody {
    /// The append of these records to `stream`.
    pub(crate) fn into_op(self, stream: &str) -> WriteOp {
        WriteOp::Append {
            stream: stream.into(),
            token: self.token,
            records: self.records,
            headers: self.headers.unwrap_or_default(),
            options: AppendOptions {
                match_seq_num: self.match_seq_num,
                producer: self.producer.map(|(id, seq)| ProducerSeq { id, seq }),
                not_after_ms: self.not_after_ms,
            },
        }
    }
}

/// How an append body is encoded, from its `Content-Type` essence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    Json,
    Batch,
    /// Anything else: the body is one record.
    Raw,
}

pub(crate) fn body_kind<H: HeaderView + ?Sized>(headers: &H) -> BodyKind {
    let Some(v) = headers.first(&header::CONTENT_TYPE).and_then(visible_ascii) else {
        return BodyKind::Raw;
    };
    let essence = v.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case(wire::JSON) {
        BodyKind::Json
    } else if essence.eq_ignore_ascii_case(wire::BATCH) {
        BodyKind::Batch
    } else {
        BodyKind::Raw
    }
}
