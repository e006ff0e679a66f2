//! What each client was told, and the check of the target's data against
//! it after the run.

use super::body::{self, BodyId};
use super::StreamDump;
use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

/// A client's index as a body names it.
#[allow(
    clippy::cast_possible_truncation,
    reason = "--clients is at most 4096 (`BenchArgs::validate`)"
)]
pub fn client_id(c: usize) -> u32 {
    c as u32
}

/// A stream's index as the ledger keeps it.
#[allow(
    clippy::cast_possible_truncation,
    reason = "a run holds every stream's name in memory before it starts: never 2^32 of them"
)]
pub fn stream_index(s: usize) -> u32 {
    s as u32
}

/// The records of one append, or an index among them.
#[allow(
    clippy::cast_possible_truncation,
    reason = "--batch is at most 4096 (`BenchArgs::validate`), a fill's batch at most 1000"
)]
pub fn batch_u16(n: usize) -> u16 {
    n as u16
}

/// An acknowledged append.
#[derive(Debug, Clone, Copy)]
pub struct Acked {
    pub stream: u32,
    pub first_seq: u64,
    /// The first record's writer; the rest follow with increasing index.
    pub id: BodyId,
    pub count: u16,
    /// When the answer arrived; kept for `tail` only.
    pub at: Option<Instant>,
}

/// An append whose answer never came: it may or may not have landed.
#[derive(Debug, Clone, Copy)]
pub struct Unknown {
    pub stream: u32,
    pub id: BodyId,
    pub count: u16,
}

#[derive(Debug, Default)]
pub struct ClientLog {
    pub acked: Vec<Acked>,
    pub unknown: Vec<Unknown>,
    /// Things the target did wrong while the run was going on.
    pub failures: Vec<String>,
}

/// Everything expected of one stream.
#[derive(Debug, Default)]
pub struct Expected {
    pub by_seq: BTreeMap<u64, BodyId>,
    pub maybe: HashSet<BodyId>,
}

/// Per-stream expectations from all clients' logs. Two acknowledgements
/// for one seq are a failure in themselves.
pub fn expectations(
    streams: usize,
    logs: &[ClientLog],
    failures: &mut Vec<String>,
) -> Vec<Expected> {
    let mut out: Vec<Expected> = (0..streams).map(|_| Expected::default()).collect();
    for log in logs {
        for a in &log.acked {
            let e = &mut out[a.stream as usize];
            for i in 0..a.count {
                let id = BodyId {
                    index: a.id.index + i,
                    ..a.id
                };
                let seq = a.first_seq + i as u64;
                if let Some(prev) = e.by_seq.insert(seq, id) {
                    failures.push(format!(
                        "stream #{}: seq {seq} acknowledged twice ({prev:?} and {id:?})",
                        a.stream
                    ));
                }
            }
        }
        for u in &log.unknown {
            let e = &mut out[u.stream as usize];
            for i in 0..u.count {
                e.maybe.insert(BodyId {
                    index: u.id.index + i,
                    ..u.id
                });
            }
        }
    }
    out
}

/// What a stream must look like after the run.
pub struct Rules {
    pub token: u64,
    pub record_bytes: usize,
    /// `reject`: the stream must be exactly as it was before the run.
    pub next_seq_before: Option<u64>,
}

/// Checks one stream; returns the records checked and pushes failures.
pub fn check(
    name: &str,
    dump: &StreamDump,
    expected: &Expected,
    rules: &Rules,
    failures: &mut Vec<String>,
) -> u64 {
    let mut fail = |m: String| failures.push(format!("{name}: {m}"));
    if let Some(before) = rules.next_seq_before {
        if dump.next_seq != before {
            fail(format!(
                "next_seq moved from {before} to {} although every append was stale",
                dump.next_seq
            ));
        }
    }
    if let Some(h) = dump.highest_token {
        if h != rules.token {
            fail(format!("highest token is {h}, expected {}", rules.token));
        }
    }
    if dump.records.len() as u64 != dump.next_seq {
        fail(format!(
            "holds {} records but next_seq is {}",
            dump.records.len(),
            dump.next_seq
        ));
    }
    let mut used_maybe = HashSet::new();
    for (i, (seq, token, got)) in dump.records.iter().enumerate() {
        if *seq != i as u64 {
            fail(format!("record {i} has seq {seq}: not contiguous from 0"));
            break;
        }
        if *token != rules.token {
            fail(format!(
                "seq {seq} carries token {token}: a stale append was accepted"
            ));
        }
        let want = match expected.by_seq.get(seq) {
            Some(id) => *id,
            None => match body::decode(got) {
                Some(id) if expected.maybe.contains(&id) && used_maybe.insert(id) => id,
                _ => {
                    fail(format!(
                        "seq {seq} holds a record nobody was told was written"
                    ));
                    continue;
                }
            },
        };
        if body::encode(want, rules.record_bytes) != *got {
            fail(format!(
                "seq {seq} differs from what was acknowledged ({want:?}): got {:?}",
                String::from_utf8_lossy(&got[..got.len().min(40)])
            ));
        }
    }
    if let Some((&last, _)) = expected.by_seq.iter().next_back() {
        if last >= dump.records.len() as u64 {
            let missing = expected.by_seq.range(dump.records.len() as u64..).count();
            fail(format!(
                "{missing} acknowledged records are missing (up to seq {last})"
            ));
        }
    }
    dump.records.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn id(counter: u64) -> BodyId {
        BodyId {
            client: 1,
            counter,
            index: 0,
        }
    }

    fn rules() -> Rules {
        Rules {
            token: 5,
            record_bytes: 40,
            next_seq_before: None,
        }
    }

    fn dump(ids: &[BodyId], token: u64) -> StreamDump {
        StreamDump {
            next_seq: ids.len() as u64,
            highest_token: Some(5),
            records: ids
                .iter()
                .enumerate()
                .map(|(i, b)| (i as u64, token, body::encode(*b, 40)))
                .collect(),
        }
    }

    fn expected(ids: &[BodyId]) -> Expected {
        Expected {
            by_seq: ids
                .iter()
                .enumerate()
                .map(|(i, b)| (i as u64, *b))
                .collect(),
            maybe: HashSet::new(),
        }
    }

    #[test]
    fn exact_content_passes() {
        let ids = [id(0), id(1), id(2)];
        let mut f = Vec::new();
        assert_eq!(
            check("s", &dump(&ids, 5), &expected(&ids), &rules(), &mut f),
            3
        );
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn swapped_missing_extra_and_stale_records_fail() {
        let ids = [id(0), id(1), id(2)];
        let cases = [
            dump(&[id(1), id(0), id(2)], 5),
            dump(&[id(0), id(1)], 5),
            dump(&[id(0), id(1), id(2), id(3)], 5),
            dump(&ids, 4),
        ];
        for d in cases {
            let mut f = Vec::new();
            check("s", &d, &expected(&ids), &rules(), &mut f);
            assert!(!f.is_empty());
        }
        let mut d = dump(&ids, 5);
        d.records[1].2 = Bytes::from(vec![b'x'; 40]);
        let mut f = Vec::new();
        check("s", &d, &expected(&ids), &rules(), &mut f);
        assert!(!f.is_empty());
    }

    #[test]
    fn unknown_outcomes_may_be_present_once() {
        let mut e = expected(&[id(0)]);
        e.maybe.insert(id(1));
        let mut f = Vec::new();
        check("s", &dump(&[id(0), id(1)], 5), &e, &rules(), &mut f);
        check("s", &dump(&[id(0)], 5), &e, &rules(), &mut f);
        assert!(f.is_empty(), "{f:?}");
        check("s", &dump(&[id(0), id(1), id(1)], 5), &e, &rules(), &mut f);
        assert!(!f.is_empty());
    }
}
