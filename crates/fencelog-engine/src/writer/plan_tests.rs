use super::*;
use crate::codec::{decode_frame, FrameHeader, FORMAT_VERSION};
use crate::writer::group::plan;
use crate::writer::protocol::Request;
use fencelog_types::{BatchAck, Retention};
use std::collections::VecDeque;
use tokio::sync::oneshot::{self, Receiver};

type AppendRx = Receiver<Result<Ack, WriteError>>;
type StateRx = Receiver<Result<StreamState, WriteError>>;

const NOW_MS: u64 = 1_700_000_000_000;

fn append(stream: &str, token: u64, n: usize, m: Option<u64>) -> (Request, AppendRx) {
    let (reply, rx) = oneshot::channel();
    let records = (0..n)
        .map(|i| Bytes::from(format!("{stream}{i}")))
        .collect();
    let op = Op::Append {
        token,
        records,
        match_seq_num: m,
        extra: None,
        reply,
    };
    (
        Request {
            stream: stream.into(),
            op,
        },
        rx,
    )
}

fn state_op(
    stream: &str,
    make: impl FnOnce(crate::writer::protocol::Reply<StreamState>) -> Op,
) -> (Request, StateRx) {
    let (reply, rx) = oneshot::channel();
    (
        Request {
            stream: stream.into(),
            op: make(reply),
        },
        rx,
    )
}

fn fence(stream: &str, token: u64) -> (Request, StateRx) {
    state_op(stream, |reply| Op::Fence {
        token,
        not_after_ms: None,
        reply,
    })
}

fn trim(stream: &str, token: u64, trim_seq: u64) -> (Request, StateRx) {
    state_op(stream, |reply| Op::Trim {
        token,
        trim_seq,
        not_after_ms: None,
        reply,
    })
}

fn seal(stream: &str, token: u64) -> (Request, StateRx) {
    state_op(stream, |reply| Op::Seal {
        token,
        not_after_ms: None,
        reply,
    })
}

fn delete(stream: &str, token: u64) -> (Request, StateRx) {
    state_op(stream, |reply| Op::Delete { token, reply })
}

/// Durable streams: name → (fence state, last_timestamp_ms); and which
/// frames the durable index points where.
#[derive(Default)]
struct Disk {
    streams: HashMap<&'static str, (FenceState, u64)>,
    points: Vec<(&'static str, u64, (u64, u64))>,
    /// Durable retention settings; the default for a stream not here.
    configs: HashMap<&'static str, StreamConfig>,
}

impl Lookup<()> for Disk {
    fn stream(&mut self, name: &str) -> Option<Durable<()>> {
        self.streams.get(name).map(|&(fence, ts)| Durable {
            fence,
            last_timestamp_ms: ts,
            handle: (),
        })
    }
    fn points_at(&mut self, name: &str, first_seq: u64, at: (u64, u64)) -> bool {
        self.points.contains(&(name, first_seq, at))
    }
    fn carried(&mut self, _: &str) -> crate::carried::Carried {
        Default::default()
    }
    fn config(&mut self, name: &str) -> crate::StreamConfig {
        self.configs.get(name).copied().unwrap_or_default()
    }
}

fn live(highest_token: u64, next_seq: u64) -> FenceState {
    FenceState {
        exists: true,
        highest_token,
        next_seq,
        ..FenceState::default()
    }
}

fn disk(streams: &[(&'static str, FenceState, u64)]) -> Disk {
    Disk {
        streams: streams.iter().map(|&(n, f, t)| (n, (f, t))).collect(),
        points: Vec::new(),
        configs: HashMap::new(),
    }
}

fn ctx() -> Context {
    Context {
        group_id: 7,
        now_ms: NOW_MS,
        defaults: Defaults::default(),
        budget: None,
        producers_max: 2,
    }
}

/// Plans `requests` in `ctx` against `disk`, sends the answers, and returns
/// the plan and the decoded frames (name, header, payload kind) in buffer
/// order.
fn run_in(
    ctx: Context,
    disk: &mut Disk,
    requests: Vec<Request>,
) -> (Plan<()>, Vec<(String, FrameHeader)>) {
    let mut requests: VecDeque<Request> = requests.into();
    let mut answers = Vec::new();
    let mut buf = vec![0xAA; 3]; // stale bytes from a last group
    let plan = plan(&mut requests, &mut answers, &mut buf, ctx, disk);
    assert!(requests.is_empty());
    answers.into_iter().for_each(Answer::send);
    let mut frames = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let f = decode_frame(&buf[at..], FORMAT_VERSION).unwrap();
        assert_eq!(f.header.group_id, 7);
        assert_eq!(plan.frames[frames.len()].offset_in_buf, at);
        frames.push((f.name.to_string(), f.header));
        at += f.frame_len;
    }
    assert_eq!(frames.len(), plan.frames.len());
    (plan, frames)
}

fn run(disk: &mut Disk, requests: Vec<Request>) -> (Plan<()>, Vec<(String, FrameHeader)>) {
    run_in(ctx(), disk, requests)
}

fn last_flags(frames: &[(String, FrameHeader)]) -> Vec<bool> {
    frames.iter().map(|(_, h)| h.last_in_group()).collect()
}

fn stale(presented: u64, highest: u64, next_seq: u64) -> WriteError {
    WriteError::StaleToken {
        presented,
        highest,
        next_seq,
    }
}

#[test]
fn a_lower_token_after_an_accepted_higher_one_in_the_group_is_stale() {
    let mut d = disk(&[("s", live(1, 0), 0)]);
    let (a, mut a_rx) = append("s", 5, 2, None);
    let (b, mut b_rx) = append("s", 3, 1, None);
    let (c, mut c_rx) = fence("s", 4);
    let (e, mut e_rx) = append("s", 5, 1, None);
    let (plan, frames) = run(&mut d, vec![a, b, c, e]);
    assert_eq!(a_rx.try_recv().unwrap().unwrap().first_seq, 0);
    assert_eq!(b_rx.try_recv().unwrap(), Err(stale(3, 5, 2)));
    assert_eq!(c_rx.try_recv().unwrap(), Err(stale(4, 5, 2)));
    assert_eq!(e_rx.try_recv().unwrap().unwrap().first_seq, 2);
    assert_eq!(frames.len(), 2);
    assert_eq!(last_flags(&frames), vec![false, true]);
    assert_eq!(
        (plan.counts.stale, plan.counts.appends, plan.counts.records),
        (2, 2, 3)
    );
    let s = &plan.streams["s"];
    assert_eq!((s.fence.highest_token, s.fence.next_seq), (5, 3));
    // Token 5 took effect once, at seq 0, by the append.
    assert_eq!(s.events.len(), 1);
    assert_eq!(
        (s.events[0].token, s.events[0].first_seq, s.events[0].by),
        (5, 0, FenceBy::Append)
    );
}

#[test]
fn a_fence_writes_a_frame_only_when_it_changes_something() {
    let mut d = disk(&[("old", live(5, 3), 9)]);
    let (same, mut same_rx) = fence("old", 5);
    let (new, mut new_rx) = fence("new", 1);
    let (again, mut again_rx) = fence("new", 1);
    let (higher, mut higher_rx) = fence("old", 6);
    let (_, frames) = run(&mut d, vec![same, new, again, higher]);
    let got = |rx: &mut StateRx| {
        let s = rx.try_recv().unwrap().unwrap();
        (s.stream, s.highest_token, s.next_seq, s.last_timestamp_ms)
    };
    // Re-fencing an existing stream with its token: nothing to write.
    assert_eq!(got(&mut same_rx), ("old".into(), 5, 3, 9));
    // A fence creates a stream; once planned, the same token again is a
    // re-fence of a stream that exists.
    assert_eq!(got(&mut new_rx), ("new".into(), 1, 0, 0));
    assert_eq!(got(&mut again_rx), ("new".into(), 1, 0, 0));
    assert_eq!(got(&mut higher_rx), ("old".into(), 6, 3, 9));
    let written: Vec<(&str, u64, u64, u32)> = frames
        .iter()
        .map(|(n, h)| (n.as_str(), h.fencing_token, h.first_seq, h.record_count))
        .collect();
    assert_eq!(written, vec![("new", 1, 0, 0), ("old", 6, 3, 0)]);
    assert!(frames.iter().all(|(_, h)| h.kind == FrameKind::Fence));
    assert_eq!(last_flags(&frames), vec![false, true]);
}

#[test]
fn a_group_of_refusals_and_refences_plans_no_frame() {
    let mut d = disk(&[("s", live(5, 3), 9)]);
    let (a, mut a_rx) = append("s", 4, 1, None);
    let (b, mut b_rx) = append("s", 5, 1, Some(2));
    let (c, mut c_rx) = fence("s", 5);
    let (plan, frames) = run(&mut d, vec![a, b, c]);
    assert!(frames.is_empty() && plan.frames.is_empty());
    assert!(matches!(
        a_rx.try_recv().unwrap(),
        Err(WriteError::StaleToken { .. })
    ));
    assert!(matches!(
        b_rx.try_recv().unwrap(),
        Err(WriteError::SeqMismatch { .. })
    ));
    assert!(c_rx.try_recv().unwrap().is_ok());
    assert_eq!((plan.counts.stale, plan.counts.mismatched), (1, 1));
}

#[test]
fn match_seq_num_sees_the_seqs_planned_before_it() {
    let mut d = disk(&[("s", live(2, 3), 0)]);
    let (a, mut a_rx) = append("s", 2, 2, Some(3));
    let (b, mut b_rx) = append("s", 2, 1, Some(3));
    let (c, mut c_rx) = append("s", 2, 1, Some(5));
    // The token is checked first: a stale writer learns it lost
    // ownership, not that it raced.
    let (e, mut e_rx) = append("s", 1, 1, Some(6));
    let (plan, frames) = run(&mut d, vec![a, b, c, e]);
    assert_eq!(a_rx.try_recv().unwrap().unwrap().first_seq, 3);
    assert_eq!(
        b_rx.try_recv().unwrap(),
        Err(WriteError::SeqMismatch {
            expected: 3,
            next_seq: 5
        })
    );
    let c = c_rx.try_recv().unwrap().unwrap();
    assert_eq!((c.first_seq, c.last_seq, c.next_seq), (5, 5, 6));
    assert_eq!(e_rx.try_recv().unwrap(), Err(stale(1, 2, 6)));
    let firsts: Vec<u64> = frames.iter().map(|(_, h)| h.first_seq).collect();
    assert_eq!(firsts, vec![3, 5]);
    assert_eq!((plan.counts.mismatched, plan.counts.stale), (1, 1));
}

#[test]
fn timestamps_never_decrease_within_a_stream() {
    // "ahead" last wrote at a time this clock has not reached yet (the
    // clock stepped back); "fresh" has never written.
    let ahead_ms = NOW_MS + 60_000;
    let mut d = disk(&[("ahead", live(1, 1), ahead_ms)]);
    let (a, mut a_rx) = append("ahead", 1, 1, None);
    let (f, mut f_rx) = fence("ahead", 2);
    let (b, mut b_rx) = append("fresh", 1, 1, None);
    let (_, frames) = run(&mut d, vec![a, f, b]);
    assert_eq!(a_rx.try_recv().unwrap().unwrap().timestamp_ms, ahead_ms);
    assert_eq!(
        f_rx.try_recv().unwrap().unwrap().last_timestamp_ms,
        ahead_ms
    );
    assert_eq!(b_rx.try_recv().unwrap().unwrap().timestamp_ms, NOW_MS);
    let stamps: Vec<(&str, u64)> = frames
        .iter()
        .map(|(n, h)| (n.as_str(), h.timestamp_ms))
        .collect();
    assert_eq!(
        stamps,
        vec![("ahead", ahead_ms), ("ahead", ahead_ms), ("fresh", NOW_MS)]
    );
}

#[test]
fn trims_seals_and_deletes_follow_the_rule_against_pending_state() {
    let mut d = disk(&[("s", live(3, 10), 0)]);
    let (t1, mut t1_rx) = trim("s", 3, 4);
    let (t2, mut t2_rx) = trim("s", 3, 2); // below: a no-op
    let (t3, mut t3_rx) = trim("s", 2, 9); // stale
    let (s1, mut s1_rx) = seal("s", 3);
    let (a, mut a_rx) = append("s", 9, 1, None); // sealed, whatever the token
    let (s2, mut s2_rx) = seal("s", 3); // idempotent
    let (del, mut del_rx) = delete("s", 4);
    let (f, mut f_rx) = fence("s", 4); // equal on a tombstone: stale
    let (plan, frames) = run(&mut d, vec![t1, t2, t3, s1, a, s2, del, f]);
    let first = |rx: &mut StateRx| rx.try_recv().unwrap().unwrap().first_seq;
    assert_eq!(first(&mut t1_rx), 4);
    assert_eq!(first(&mut t2_rx), 4);
    assert_eq!(t3_rx.try_recv().unwrap(), Err(stale(2, 3, 10)));
    assert!(s1_rx.try_recv().unwrap().unwrap().sealed);
    match a_rx.try_recv().unwrap() {
        Err(WriteError::StreamSealed(s)) => {
            assert_eq!((s.sealed, s.next_seq, s.highest_token), (true, 10, 3))
        }
        other => panic!("{other:?}"),
    }
    assert!(s2_rx.try_recv().unwrap().unwrap().sealed);
    let t = del_rx.try_recv().unwrap().unwrap();
    assert_eq!(
        (
            t.deleted,
            t.sealed,
            t.first_seq,
            t.next_seq,
            t.highest_token
        ),
        (true, false, 10, 10, 4)
    );
    assert_eq!(f_rx.try_recv().unwrap(), Err(stale(4, 4, 10)));
    let kinds: Vec<(FrameKind, u64)> = frames.iter().map(|(_, h)| (h.kind, h.first_seq)).collect();
    assert_eq!(
        kinds,
        vec![
            (FrameKind::Trim, 4),
            (FrameKind::Seal, 10),
            (FrameKind::Delete, 10)
        ]
    );
    let c = &plan.counts;
    assert_eq!(
        (c.trims, c.seals, c.deletes, c.stale, c.sealed),
        (1, 1, 1, 2, 1)
    );
    let idx: Vec<IndexChange> = plan.frames.iter().map(|f| f.index).collect();
    assert_eq!(
        idx,
        vec![
            IndexChange::TrimTo(4),
            IndexChange::None,
            IndexChange::Clear
        ]
    );
    // Token 4 took effect by the delete.
    let ev = &plan.streams["s"].events;
    assert_eq!(
        ev.iter().map(|e| (e.token, e.by)).collect::<Vec<_>>(),
        vec![(4, FenceBy::Delete)]
    );
}

#[test]
fn a_config_without_a_token_carries_the_streams_and_passes_a_seal() {
    let sealed = FenceState {
        sealed: true,
        ..live(5, 2)
    };
    let mut d = disk(&[("s", sealed, 0)]);
    let config = StreamConfig {
        retention_age_s: Retention::Limit(60),
        retention_bytes: Retention::Default,
        respect_cursors: false,
    };
    let (c1, mut c1_rx) = state_op("s", |reply| Op::Config {
        token: None,
        config,
        reply,
    });
    let (c2, mut c2_rx) = state_op("s", |reply| Op::Config {
        token: Some(6),
        config,
        reply,
    });
    let (c3, mut c3_rx) = state_op("gone", |reply| Op::Config {
        token: None,
        config,
        reply,
    });
    let ctx = Context {
        defaults: Defaults {
            age_s: Some(1),
            bytes: Some(1000),
        },
        ..ctx()
    };
    let (_, frames) = run_in(ctx, &mut d, vec![c1, c2, c3]);
    let s = c1_rx.try_recv().unwrap().unwrap();
    assert_eq!(
        (s.retention_age_s, s.retention_bytes),
        (Some(60), Some(1000))
    );
    assert!(matches!(
        c2_rx.try_recv().unwrap(),
        Err(WriteError::StreamSealed(_))
    ));
    assert_eq!(c3_rx.try_recv().unwrap(), Err(WriteError::NotFound));
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].1.kind, frames[0].1.fencing_token),
        (FrameKind::Config, 5)
    );
}

#[test]
fn appends_past_the_budget_are_refused_and_state_frames_are_not() {
    let mut d = disk(&[("s", live(1, 0), 0)]);
    let one = crate::codec::frame_len("s", &[&b"s0"[..]]) as u64;
    let ctx = Context {
        budget: Some(Budget {
            limit: 1000,
            used: 900,
            room: one + 5,
        }),
        ..ctx()
    };
    let (a, mut a_rx) = append("s", 1, 1, None);
    let (b, mut b_rx) = append("s", 1, 1, None);
    let (f, mut f_rx) = fence("s", 2);
    let (plan, frames) = run_in(ctx, &mut d, vec![a, b, f]);
    assert!(a_rx.try_recv().unwrap().is_ok());
    assert_eq!(
        b_rx.try_recv().unwrap(),
        Err(WriteError::InsufficientStorage {
            limit: 1000,
            used: 900
        })
    );
    assert!(f_rx.try_recv().unwrap().is_ok());
    assert_eq!(frames.len(), 2);
    assert_eq!(plan.counts.over_budget, 1);
}

#[test]
fn retention_trims_carry_the_current_token_and_the_flag() {
    let mut d = disk(&[(
        "s",
        FenceState {
            sealed: true,
            ..live(7, 10)
        },
        0,
    )]);
    let (reply, mut rx) = oneshot::channel();
    let r = Request {
        stream: "s".into(),
        op: Op::Retain {
            first_seq: 6,
            reply,
        },
    };
    let (reply2, mut rx2) = oneshot::channel();
    let below = Request {
        stream: "s".into(),
        op: Op::Retain {
            first_seq: 3,
            reply: reply2,
        },
    };
    let (plan, frames) = run(&mut d, vec![r, below]);
    rx.try_recv().unwrap().unwrap();
    rx2.try_recv().unwrap().unwrap();
    assert_eq!(frames.len(), 1);
    let h = frames[0].1;
    assert_eq!(
        (h.kind, h.first_seq, h.fencing_token, h.retention()),
        (FrameKind::Trim, 6, 7, true)
    );
    assert_eq!(plan.counts.retention_trims, 1);
    assert!(
        plan.streams["s"].events.is_empty(),
        "retention raises no token"
    );
}

/// A copy compaction asked for is written only while its frame is live:
/// the durable index points at the copy the reclaimer read, and no trim or
/// delete before it (durable or in the group) killed it.
#[test]
fn relocations_dead_on_arrival_are_not_written() {
    let mut d = disk(&[("a", live(1, 10), 0), ("b", live(1, 10), 0)]);
    d.points = vec![("a", 0, (1, 40)), ("a", 5, (1, 200)), ("b", 0, (1, 400))];
    let mut frame = Vec::new();
    let spec = FrameSpec {
        kind: FrameKind::Records,
        flags: 0,
        group_id: 2,
        first_seq: 0,
        fencing_token: 1,
        timestamp_ms: 5,
        name: "a",
    };
    encode_frame(&mut frame, &spec, &[&b"x"[..]; 5]);
    let frame = Bytes::from(frame);
    let reloc = |stream: &str, first_seq, from| Relocation {
        stream: stream.into(),
        bytes: frame.clone(),
        first_seq,
        count: 5,
        from,
    };
    let (t, _t_rx) = trim("b", 1, 6); // kills b's frame 0..5 before the copy
    let (reply, mut rx) = oneshot::channel();
    let r = Request {
        stream: "".into(),
        op: Op::Relocate {
            frames: vec![
                reloc("a", 0, (1, 40)),  // live: copied
                reloc("a", 5, (2, 200)), // the index points elsewhere: dead
                reloc("b", 0, (1, 400)), // trimmed in this group: dead
            ],
            reply,
        },
    };
    let (plan, frames) = run(&mut d, vec![t, r]);
    let done = rx.try_recv().unwrap().unwrap();
    assert_eq!(
        (done.copied, done.dead, done.bytes),
        (1, 2, frame.len() as u64)
    );
    assert_eq!(frames.len(), 2);
    let copy = &frames[1].1;
    assert!(copy.relocated());
    assert_eq!(
        (copy.group_id, copy.first_seq, copy.timestamp_ms),
        (7, 0, 5)
    );
    assert_eq!(
        plan.frames[1].index,
        IndexChange::Repoint {
            first_seq: 0,
            from: (1, 40)
        }
    );
    assert_eq!(plan.counts.dead_on_arrival, 2);
}

type BatchRx = Receiver<Result<Vec<BatchAck>, WriteError>>;

fn batch(ops: Vec<crate::op::BatchOp>) -> (Request, BatchRx) {
    let (reply, rx) = oneshot::channel();
    let op = Op::Batch {
        ops,
        not_after_ms: None,
        reply,
    };
    (
        Request {
            stream: "ignored".into(),
            op,
        },
        rx,
    )
}

fn batch_append(stream: &str, token: u64) -> crate::op::BatchOp {
    crate::op::BatchOp {
        stream: stream.into(),
        fencing_token: token,
        action: crate::op::BatchAction::Append {
            records: vec![Bytes::from(format!("{stream}-b"))],
            match_seq_num: None,
        },
    }
}

/// A refused batch is planned away whole: the frames before it and after
/// it in the group are exactly those of the group without it, its streams'
/// pending state is as before it, and only its refusal is counted.
#[test]
fn a_refused_batch_leaves_the_group_as_if_it_never_came() {
    let mut d = disk(&[("a", live(1, 0), 0), ("z", live(9, 0), 0)]);
    let (first, _first_rx) = append("a", 1, 1, None);
    let (b, mut b_rx) = batch(vec![batch_append("a", 1), batch_append("z", 1)]);
    let (last, mut last_rx) = append("a", 1, 1, None);
    let (plan, frames) = run(&mut d, vec![first, b, last]);
    match b_rx.try_recv().unwrap() {
        Err(WriteError::BatchRefused(o)) => {
            assert!(o[0].is_ok());
            assert_eq!(o[1], Err(stale(1, 9, 0)));
        }
        other => panic!("{other:?}"),
    }
    // The append after the batch takes seq 1: the batch's op on a is gone.
    assert_eq!(last_rx.try_recv().unwrap().unwrap().first_seq, 1);
    let names: Vec<&str> = frames.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["a", "a"]);
    assert_eq!(last_flags(&frames), vec![false, true]);
    assert_eq!((plan.counts.appends, plan.counts.stale), (2, 1));
    assert_eq!(plan.counts.batches_refused, 1);
    assert_eq!(plan.streams["a"].fence.next_seq, 2);
    assert_eq!(plan.streams["z"].fence, live(9, 0));
}

/// An accepted batch's frames are consecutive in the one group, and only
/// the group's last frame is flagged last.
#[test]
fn an_accepted_batch_is_planned_into_the_one_group() {
    let mut d = disk(&[]);
    let (b, mut b_rx) = batch(vec![
        batch_append("a", 2),
        batch_append("b", 2),
        batch_append("a", 2),
    ]);
    let (plan, frames) = run(&mut d, vec![b]);
    assert_eq!(b_rx.try_recv().unwrap().unwrap().len(), 3);
    let names: Vec<&str> = frames.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["a", "b", "a"]);
    assert_eq!(last_flags(&frames), vec![false, false, true]);
    assert_eq!(plan.counts.batches, 1);
    assert_eq!(plan.streams["a"].fence.next_seq, 2);
}

fn apply(index: u64, membership: &[u8]) -> Request {
    let (reply, _rx) = oneshot::channel();
    let mark = AppliedState {
        term: 1,
        node_id: 1,
        index,
        membership: membership.to_vec(),
    };
    let entry = Box::new(crate::writer::ApplyEntry {
        ts_ms: NOW_MS,
        ops: Vec::new(),
        mark,
    });
    Request {
        stream: "".into(),
        op: Op::Apply { entry, reply },
    }
}

/// Entries applied in one group: the group's marker is the last entry's,
/// with the last membership any of them set (an empty one is "unchanged").
#[test]
fn a_group_of_entries_publishes_the_last_membership_any_of_them_set() {
    let mut d = disk(&[]);
    let (plan, frames) = run(&mut d, vec![apply(4, b"m4"), apply(5, b""), apply(6, b"")]);
    assert_eq!(frames.len(), 3);
    let a = plan.applied.unwrap();
    assert_eq!((a.index, a.membership), (6, b"m4".to_vec()));
    let (plan, _) = run(
        &mut d,
        vec![apply(7, b"m7"), apply(8, b"m8"), apply(9, b"")],
    );
    assert_eq!(plan.applied.unwrap().membership, b"m8".to_vec());
    // Nothing set in the group: empty, and publishing keeps the last one.
    let (plan, _) = run(&mut d, vec![apply(10, b""), apply(11, b"")]);
    assert_eq!(plan.applied.unwrap().membership, Vec::<u8>::new());
}

/// A state answer shows the retention settings as of its request: the
/// durable ones, or the ones an earlier request of the same group set,
/// never a later request's.
#[test]
fn a_state_answer_shows_the_retention_in_force_at_its_request() {
    let mut d = disk(&[("s", live(1, 0), 0)]);
    let limit = |age_s| StreamConfig {
        retention_age_s: Retention::Limit(age_s),
        ..StreamConfig::default()
    };
    d.configs.insert("s", limit(60));
    let (f1, mut f1_rx) = fence("s", 2);
    let (c, _c_rx) = state_op("s", |reply| Op::Config {
        token: None,
        config: limit(90),
        reply,
    });
    let (f2, mut f2_rx) = fence("s", 3);
    run(&mut d, vec![f1, c, f2]);
    assert_eq!(f1_rx.try_recv().unwrap().unwrap().retention_age_s, Some(60));
    assert_eq!(f2_rx.try_recv().unwrap().unwrap().retention_age_s, Some(90));
}
