//! How a [`WriteOp`] is written in a Raft entry (in the WAL, in
//! AppendEntries, in snapshots' logs) and in a forwarded write: postcard
//! over the private mirror types below. The engine has no serde (it owns
//! the on-disk format of its segments, not the cluster's), so the mirror
//! is the op's wire layout, and nothing else in the crate sees it: the
//! rest handles `WriteOp`s. The layout is fixed — variants, fields and
//! their order are what WALs written by every earlier version hold (the
//! golden bytes in the tests below pin it) — so a new variant goes last.
//!
//! Also [`CursorView`], the serialisable form of a cursor apply answers
//! ([`super::types::OpResult`]).

use bytes::Bytes;
use fencelog_engine::{
    AppendOptions, BatchAction, BatchOp, CursorEntry, Header, ProducerSeq, Retention, StreamConfig,
    WriteOp,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `WriteOp` as written: borrowed from the op.
#[derive(Serialize)]
enum OpRef<'a> {
    Append {
        stream: &'a str,
        token: u64,
        match_seq: Option<u64>,
        records: &'a [Bytes],
        /// Empty when no record has headers; else one list per record.
        headers: HeadersRef<'a>,
        producer: Option<(&'a str, u64)>,
        not_after_ms: Option<u64>,
    },
    Fence {
        stream: &'a str,
        token: u64,
        not_after_ms: Option<u64>,
    },
    Trim {
        stream: &'a str,
        token: u64,
        trim_seq: u64,
        not_after_ms: Option<u64>,
    },
    Seal {
        stream: &'a str,
        token: u64,
        not_after_ms: Option<u64>,
    },
    Delete {
        stream: &'a str,
        token: u64,
    },
    Config {
        stream: &'a str,
        token: Option<u64>,
        config: ConfigWire,
    },
    Cursor {
        stream: &'a str,
        name: &'a str,
        token: u64,
        seq: u64,
    },
    Batch {
        ops: Vec<BatchOpRef<'a>>,
        not_after_ms: Option<u64>,
    },
    Retain {
        stream: &'a str,
        first_seq: u64,
    },
}

/// `WriteOp` as read: owned, the same layout as [`OpRef`].
#[derive(Deserialize)]
enum OpOwned {
    Append {
        stream: String,
        token: u64,
        match_seq: Option<u64>,
        records: Vec<Bytes>,
        headers: Vec<Vec<(Bytes, Bytes)>>,
        producer: Option<(String, u64)>,
        not_after_ms: Option<u64>,
    },
    Fence {
        stream: String,
        token: u64,
        not_after_ms: Option<u64>,
    },
    Trim {
        stream: String,
        token: u64,
        trim_seq: u64,
        not_after_ms: Option<u64>,
    },
    Seal {
        stream: String,
        token: u64,
        not_after_ms: Option<u64>,
    },
    Delete {
        stream: String,
        token: u64,
    },
    Config {
        stream: String,
        token: Option<u64>,
        config: ConfigWire,
    },
    Cursor {
        stream: String,
        name: String,
        token: u64,
        seq: u64,
    },
    Batch {
        ops: Vec<BatchOpOwned>,
        not_after_ms: Option<u64>,
    },
    Retain {
        stream: String,
        first_seq: u64,
    },
}

/// Per record, its headers as (name, value) pairs.
struct HeadersRef<'a>(&'a [Vec<Header>]);

impl Serialize for HeadersRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|h| {
            h.iter()
                .map(|h| (h.name.as_ref(), h.value.as_ref()))
                .collect::<Vec<(&[u8], &[u8])>>()
        }))
    }
}

/// [`Retention`]: not set (the server's default), unlimited, or a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum RetentionWire {
    Default,
    Unlimited,
    Limit(u64),
}

/// [`StreamConfig`]: a stream's retention settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct ConfigWire {
    retention_age_s: RetentionWire,
    retention_bytes: RetentionWire,
    respect_cursors: bool,
}

/// One op of a multi-stream batch; `records: None` is a fence.
#[derive(Serialize)]
struct BatchOpRef<'a> {
    stream: &'a str,
    token: u64,
    records: Option<&'a [Bytes]>,
    match_seq: Option<u64>,
}

#[derive(Deserialize)]
struct BatchOpOwned {
    stream: String,
    token: u64,
    records: Option<Vec<Bytes>>,
    match_seq: Option<u64>,
}

impl RetentionWire {
    fn of(r: Retention) -> Self {
        match r {
            Retention::Default => RetentionWire::Default,
            Retention::Unlimited => RetentionWire::Unlimited,
            Retention::Limit(n) => RetentionWire::Limit(n),
        }
    }

    fn to_engine(self) -> Retention {
        match self {
            RetentionWire::Default => Retention::Default,
            RetentionWire::Unlimited => Retention::Unlimited,
            RetentionWire::Limit(n) => Retention::Limit(n),
        }
    }
}

impl ConfigWire {
    fn of(c: &StreamConfig) -> Self {
        ConfigWire {
            retention_age_s: RetentionWire::of(c.retention_age_s),
            retention_bytes: RetentionWire::of(c.retention_bytes),
            respect_cursors: c.respect_cursors,
        }
    }

    fn to_engine(self) -> StreamConfig {
        StreamConfig {
            retention_age_s: self.retention_age_s.to_engine(),
            retention_bytes: self.retention_bytes.to_engine(),
            respect_cursors: self.respect_cursors,
        }
    }
}

impl<'a> BatchOpRef<'a> {
    fn of(op: &'a BatchOp) -> Self {
        let (records, match_seq) = match &op.action {
            BatchAction::Append {
                records,
                match_seq_num,
            } => (Some(records.as_slice()), *match_seq_num),
            BatchAction::Fence => (None, None),
        };
        BatchOpRef {
            stream: &op.stream,
            token: op.fencing_token,
            records,
            match_seq,
        }
    }
}

impl BatchOpOwned {
    fn into_engine(self) -> BatchOp {
        let action = match self.records {
            Some(records) => BatchAction::Append {
                records,
                match_seq_num: self.match_seq,
            },
            None => BatchAction::Fence,
        };
        BatchOp {
            stream: self.stream,
            fencing_token: self.token,
            action,
        }
    }
}

impl<'a> OpRef<'a> {
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per WriteOp variant, each a field-for-field copy: a table that reads best whole"
    )]
    fn of(op: &'a WriteOp) -> Self {
        use WriteOp as W;
        match op {
            W::Append {
                stream,
                token,
                records,
                headers,
                options: o,
            } => OpRef::Append {
                stream,
                token: *token,
                match_seq: o.match_seq_num,
                records,
                headers: HeadersRef(headers),
                producer: o.producer.as_ref().map(|p| (p.id.as_str(), p.seq)),
                not_after_ms: o.not_after_ms,
            },
            &W::Fence {
                ref stream,
                token,
                not_after_ms,
            } => OpRef::Fence {
                stream,
                token,
                not_after_ms,
            },
            &W::Trim {
                ref stream,
                token,
                trim_seq,
                not_after_ms,
            } => OpRef::Trim {
                stream,
                token,
                trim_seq,
                not_after_ms,
            },
            &W::Seal {
                ref stream,
                token,
                not_after_ms,
            } => OpRef::Seal {
                stream,
                token,
                not_after_ms,
            },
            &W::Delete { ref stream, token } => OpRef::Delete { stream, token },
            W::Config {
                stream,
                token,
                config,
            } => OpRef::Config {
                stream,
                token: *token,
                config: ConfigWire::of(config),
            },
            &W::Cursor {
                ref stream,
                ref name,
                token,
                seq,
            } => OpRef::Cursor {
                stream,
                name,
                token,
                seq,
            },
            W::Batch { ops, not_after_ms } => OpRef::Batch {
                ops: ops.iter().map(BatchOpRef::of).collect(),
                not_after_ms: *not_after_ms,
            },
            &W::Retain {
                ref stream,
                first_seq,
            } => OpRef::Retain { stream, first_seq },
        }
    }
}

impl OpOwned {
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per WriteOp variant, each a field-for-field copy: a table that reads best whole"
    )]
    fn into_engine(self) -> WriteOp {
        use OpOwned as O;
        match self {
            O::Append {
                stream,
                token,
                match_seq,
                records,
                headers,
                producer,
                not_after_ms,
            } => WriteOp::Append {
                stream,
                token,
                records,
                headers: headers
                    .into_iter()
                    .map(|h| h.into_iter().map(|(n, v)| Header::new(n, v)).collect())
                    .collect(),
                options: AppendOptions {
                    match_seq_num: match_seq,
                    producer: producer.map(|(id, seq)| ProducerSeq { id, seq }),
                    not_after_ms,
                },
            },
            O::Fence {
                stream,
                token,
                not_after_ms,
            } => WriteOp::Fence {
                stream,
                token,
                not_after_ms,
            },
            O::Trim {
                stream,
                token,
                trim_seq,
                not_after_ms,
            } => WriteOp::Trim {
                stream,
                token,
                trim_seq,
                not_after_ms,
            },
            O::Seal {
                stream,
                token,
                not_after_ms,
            } => WriteOp::Seal {
                stream,
                token,
                not_after_ms,
            },
            O::Delete { stream, token } => WriteOp::Delete { stream, token },
            O::Config {
                stream,
                token,
                config,
            } => WriteOp::Config {
                stream,
                token,
                config: config.to_engine(),
            },
            O::Cursor {
                stream,
                name,
                token,
                seq,
            } => WriteOp::Cursor {
                stream,
                name,
                token,
                seq,
            },
            O::Batch { ops, not_after_ms } => WriteOp::Batch {
                ops: ops.into_iter().map(BatchOpOwned::into_engine).collect(),
                not_after_ms,
            },
            O::Retain { stream, first_seq } => WriteOp::Retain { stream, first_seq },
        }
    }
}

/// `op` as [`WireOp`] writes it, without taking it.
pub fn wire(op: &WriteOp) -> impl Serialize + '_ {
    OpRef::of(op)
}

/// One op on the wire: what a follower forwards to its shard's leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireOp(pub WriteOp);

impl Serialize for WireOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        OpRef::of(&self.0).serialize(s)
    }
}

impl<'de> Deserialize<'de> for WireOp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        OpOwned::deserialize(d).map(|op| WireOp(op.into_engine()))
    }
}

/// `#[serde(with = "ops")]` for a list of ops (a Raft entry's).
pub mod ops {
    use super::{OpOwned, OpRef};
    use fencelog_engine::WriteOp;
    use serde::{Deserialize, Deserializer, Serializer};

    /// The ops, each as [`OpRef`] writes it.
    pub fn serialize<S: Serializer>(ops: &[WriteOp], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(ops.iter().map(OpRef::of))
    }

    /// The ops [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<WriteOp>, D::Error> {
        let ops = Vec::<OpOwned>::deserialize(d)?;
        Ok(ops.into_iter().map(OpOwned::into_engine).collect())
    }
}

/// [`CursorEntry`]: a committed cursor, as apply answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorView {
    /// The cursor's name.
    pub name: String,
    /// Its highest token.
    pub token: u64,
    /// The seq it points at.
    pub seq: u64,
    /// When it was committed (the entry's timestamp, clamped).
    pub timestamp_ms: u64,
}

impl CursorView {
    /// The engine's answer, carried.
    pub fn of(c: &CursorEntry) -> Self {
        CursorView {
            name: c.name.clone(),
            token: c.token,
            seq: c.seq,
            timestamp_ms: c.timestamp_ms,
        }
    }

    /// Back to the engine's type.
    pub fn to_engine(&self) -> CursorEntry {
        CursorEntry {
            name: self.name.clone(),
            token: self.token,
            seq: self.seq,
            timestamp_ms: self.timestamp_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::types::Batch;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// One op of every kind, every optional field set in some.
    #[allow(
        clippy::too_many_lines,
        reason = "a literal with one op of every kind: test data that reads best whole"
    )]
    fn ops() -> Vec<WriteOp> {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let producer = Some(ProducerSeq {
            id: "p".into(),
            seq: 9,
        });
        let batch = vec![
            BatchOp {
                stream: "a".into(),
                fencing_token: 1,
                action: BatchAction::Append {
                    records: vec![b("r")],
                    match_seq_num: Some(0),
                },
            },
            BatchOp {
                stream: "b".into(),
                fencing_token: 2,
                action: BatchAction::Fence,
            },
        ];
        let config = StreamConfig {
            retention_age_s: Retention::Limit(60),
            retention_bytes: Retention::Unlimited,
            respect_cursors: true,
        };
        vec![
            WriteOp::Append {
                stream: "s".into(),
                token: 7,
                records: vec![b("ab"), b("")],
                headers: vec![vec![Header::new(b("k"), b("v"))], vec![]],
                options: AppendOptions {
                    match_seq_num: Some(3),
                    producer,
                    not_after_ms: Some(1000),
                },
            },
            WriteOp::Append {
                stream: "s".into(),
                token: 7,
                records: vec![b("x")],
                headers: vec![],
                options: AppendOptions::default(),
            },
            WriteOp::Fence {
                stream: "f".into(),
                token: 300,
                not_after_ms: None,
            },
            WriteOp::Trim {
                stream: "t".into(),
                token: 2,
                trim_seq: 5,
                not_after_ms: Some(1),
            },
            WriteOp::Seal {
                stream: "q".into(),
                token: 2,
                not_after_ms: None,
            },
            WriteOp::Delete {
                stream: "d".into(),
                token: 4,
            },
            WriteOp::Config {
                stream: "c".into(),
                token: Some(3),
                config,
            },
            WriteOp::Config {
                stream: "c".into(),
                token: None,
                config: StreamConfig::default(),
            },
            WriteOp::Cursor {
                stream: "s".into(),
                name: "n".into(),
                token: 5,
                seq: 6,
            },
            WriteOp::Batch {
                ops: batch,
                not_after_ms: Some(9),
            },
            WriteOp::Retain {
                stream: "r".into(),
                first_seq: 11,
            },
        ]
    }

    /// The bytes of each op as written by the version that first wrote
    /// Raft entries (a mirror enum of its own, `ClusterOp`): every WAL and
    /// every peer holds these, so they never change.
    const GOLDEN: [&str; 11] = [
        "00017307010302026162000201016b0176000101700901e807",
        "0001730700010178000000",
        "010166ac0200",
        "02017402050101",
        "0301710200",
        "04016404",
        "0501630103023c0101",
        "05016300000000",
        "060173016e0506",
        "070201610101010172010001620200000109",
        "0801720b",
    ];

    #[test]
    fn every_op_is_written_as_the_first_version_wrote_it_and_read_back() {
        for (op, golden) in ops().into_iter().zip(GOLDEN) {
            let bytes = postcard::to_allocvec(&WireOp(op.clone())).unwrap();
            assert_eq!(hex(&bytes), golden, "{op:?}");
            let WireOp(back) = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back, op);
        }
    }

    #[test]
    fn an_entry_is_its_timestamp_then_its_ops() {
        let batch = Batch {
            leader_ts_ms: 123_456,
            ops: ops(),
        };
        let bytes = postcard::to_allocvec(&batch).unwrap();
        let want = format!("c0c4070b{}", GOLDEN.concat());
        assert_eq!(hex(&bytes), want);
        assert_eq!(postcard::from_bytes::<Batch>(&bytes).unwrap(), batch);
    }
}
