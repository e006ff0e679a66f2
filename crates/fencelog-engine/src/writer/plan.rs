//! The planning step, pure: a group of requests and the pending per-stream
//! state become encoded frames in one buffer, the index entries to publish
//! once they are durable, every request's answer, and counters. No locks,
//! no I/O, no clock: the writer looks durable state up through `lookup` and
//! passes the time in.
//!
//! The fencing rule ([`crate::fence`]) is applied in arrival order against
//! *pending* state: the durable state plus the frames planned so far in the
//! group. So a lower token after an accepted higher one in the same group
//! is refused, and `match_seq_num` sees the seqs planned before it.

use super::protocol::{refusal_error, Ack, Answer, Op, Request};
use crate::codec::{encode_frame, set_last_in_group, FrameKind, FrameSpec};
use crate::error::WriteError;
use crate::fence::{self, Change, Effect, FenceState, Refusal};
use crate::stream::StreamState;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// A stream's durable state as the group starts, and what publishing needs
/// to reach it (`H`: the stream's shared state in the engine).
pub(super) struct Durable<H> {
    pub fence: FenceState,
    pub last_timestamp_ms: u64,
    pub handle: H,
}

/// A stream's state inside the group: durable state plus what is planned.
pub(super) struct Pending<H> {
    pub fence: FenceState,
    pub last_timestamp_ms: u64,
    /// `None` for a stream that does not exist yet; publishing creates it.
    pub handle: Option<H>,
    /// A frame for this stream is already planned in this group.
    planned: bool,
}

impl<H> Pending<H> {
    fn start(durable: Option<Durable<H>>) -> Self {
        match durable {
            Some(d) => Pending {
                fence: d.fence,
                last_timestamp_ms: d.last_timestamp_ms,
                handle: Some(d.handle),
                planned: false,
            },
            None => Pending {
                fence: FenceState::default(),
                last_timestamp_ms: 0,
                handle: None,
                planned: false,
            },
        }
    }
}

/// A frame of the group, to index once durable.
pub(super) struct PlannedFrame {
    pub stream: Box<str>,
    pub kind: FrameKind,
    pub offset_in_buf: usize,
    pub first_seq: u64,
    pub count: u32,
}

/// What the group did, for the metrics.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub stale: u64,
    pub mismatched: u64,
    pub appends: u64,
    pub fences: u64,
    pub records: u64,
}

/// A planned group. Its frames are in the buffer passed to [`plan`], the
/// last one flagged last-in-group; its answers in the answers passed.
pub(super) struct Plan<H> {
    /// Every stream the group looked at, in its state after the group.
    pub streams: HashMap<Box<str>, Pending<H>>,
    /// In log order.
    pub frames: Vec<PlannedFrame>,
    pub counts: Counts,
}

/// Where frames go while planning.
struct Out<'a> {
    buf: &'a mut Vec<u8>,
    frames: &'a mut Vec<PlannedFrame>,
    counts: &'a mut Counts,
    group_id: u64,
    now_ms: u64,
}

/// Plans group `group_id`: takes every request off the front of `requests`
/// (so a request is either still there or has its answer in `answers`),
/// encodes the accepted ones into `buf` (cleared first), and answers each in
/// arrival order. Timestamps are `now_ms`, but never below a stream's last
/// one.
pub(super) fn plan<H>(
    requests: &mut VecDeque<Request>,
    answers: &mut Vec<Answer>,
    buf: &mut Vec<u8>,
    group_id: u64,
    now_ms: u64,
    mut lookup: impl FnMut(&str) -> Option<Durable<H>>,
) -> Plan<H> {
    buf.clear();
    let mut streams: HashMap<Box<str>, Pending<H>> = HashMap::new();
    let mut frames = Vec::new();
    let mut counts = Counts::default();
    let mut out = Out {
        buf,
        frames: &mut frames,
        counts: &mut counts,
        group_id,
        now_ms,
    };
    while let Some(req) = requests.pop_front() {
        if !streams.contains_key(&req.stream) {
            let p = Pending::start(lookup(&req.stream));
            streams.insert(req.stream.clone(), p);
        }
        let p = streams.get_mut(&req.stream).expect("inserted above");
        answers.push(match req.op {
            Op::Append {
                records,
                match_seq_num,
                reply,
            } => {
                let planned =
                    plan_append(&mut out, p, req.stream, req.token, match_seq_num, &records);
                Answer::Append(reply, planned)
            }
            Op::Fence { reply } => {
                Answer::Fence(reply, plan_fence(&mut out, p, &req.stream, req.token))
            }
        });
    }
    if let Some(last) = frames.last() {
        set_last_in_group(&mut buf[last.offset_in_buf..], true);
    }
    Plan {
        streams,
        frames,
        counts,
    }
}

fn plan_append<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: Box<str>,
    token: u64,
    match_seq_num: Option<u64>,
    records: &[Bytes],
) -> Result<Ack, WriteError> {
    if let Err(r) = fence::check_append(p.fence, token, match_seq_num, None, None) {
        match r {
            Refusal::Stale { .. } => out.counts.stale += 1,
            Refusal::SeqMismatch { .. } => out.counts.mismatched += 1,
            _ => {}
        }
        return Err(refusal_error(r));
    }
    let timestamp_ms = out.now_ms.max(p.last_timestamp_ms);
    let first_seq = p.fence.next_seq;
    let count = records.len() as u32;
    let offset_in_buf = encode_frame(
        out.buf,
        &FrameSpec {
            kind: FrameKind::Records,
            flags: 0,
            group_id: out.group_id,
            first_seq,
            fencing_token: token,
            timestamp_ms,
            name: &stream,
        },
        records,
    );
    p.fence = fence::advance(p.fence, Change::Append { count }, token);
    p.last_timestamp_ms = timestamp_ms;
    p.planned = true;
    out.frames.push(PlannedFrame {
        stream,
        kind: FrameKind::Records,
        offset_in_buf,
        first_seq,
        count,
    });
    out.counts.appends += 1;
    out.counts.records += count as u64;
    Ok(Ack {
        first_seq,
        last_seq: first_seq + count as u64 - 1,
        next_seq: first_seq + count as u64,
        fencing_token: token,
        timestamp_ms,
    })
}

fn plan_fence<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: &str,
    token: u64,
) -> Result<StreamState, WriteError> {
    let effect = match fence::check_fence(p.fence, token) {
        Ok(effect) => effect,
        Err(r) => {
            if matches!(r, Refusal::Stale { .. }) {
                out.counts.stale += 1;
            }
            return Err(refusal_error(r));
        }
    };
    if effect == Effect::Frame(Change::Fence) {
        let offset_in_buf = encode_frame::<&[u8]>(
            out.buf,
            &FrameSpec {
                kind: FrameKind::Fence,
                flags: 0,
                group_id: out.group_id,
                first_seq: p.fence.next_seq,
                fencing_token: token,
                timestamp_ms: out.now_ms.max(p.last_timestamp_ms),
                name: stream,
            },
            &[],
        );
        p.fence = fence::advance(p.fence, Change::Fence, token);
        p.planned = true;
        out.frames.push(PlannedFrame {
            stream: stream.into(),
            kind: FrameKind::Fence,
            offset_in_buf,
            first_seq: p.fence.next_seq,
            count: 0,
        });
        out.counts.fences += 1;
    }
    Ok(StreamState {
        stream: stream.to_string(),
        first_seq: 0,
        next_seq: p.fence.next_seq,
        highest_token: p.fence.highest_token,
        last_timestamp_ms: p.last_timestamp_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode_frame;
    use tokio::sync::oneshot::{self, Receiver};

    type AppendRx = Receiver<Result<Ack, WriteError>>;
    type FenceRx = Receiver<Result<StreamState, WriteError>>;

    const NOW_MS: u64 = 1_700_000_000_000;

    fn append(stream: &str, token: u64, n: usize, m: Option<u64>) -> (Request, AppendRx) {
        let (reply, rx) = oneshot::channel();
        let records = (0..n)
            .map(|i| Bytes::from(format!("{stream}{i}")))
            .collect();
        let op = Op::Append {
            records,
            match_seq_num: m,
            reply,
        };
        (
            Request {
                stream: stream.into(),
                token,
                op,
            },
            rx,
        )
    }

    fn fence(stream: &str, token: u64) -> (Request, FenceRx) {
        let (reply, rx) = oneshot::channel();
        let op = Op::Fence { reply };
        (
            Request {
                stream: stream.into(),
                token,
                op,
            },
            rx,
        )
    }

    /// Durable streams: name → (highest_token, next_seq, last_timestamp_ms).
    type Disk = HashMap<&'static str, (u64, u64, u64)>;

    /// Plans `requests` as group 7 against `disk`, sends the answers, and
    /// returns the plan and the decoded frames (name, header) in buffer order.
    fn run(
        disk: &Disk,
        requests: Vec<Request>,
    ) -> (Plan<()>, Vec<(String, crate::codec::FrameHeader)>) {
        let mut requests: VecDeque<Request> = requests.into();
        let mut answers = Vec::new();
        let mut buf = vec![0xAA; 3]; // stale bytes from a last group
        let plan = plan(&mut requests, &mut answers, &mut buf, 7, NOW_MS, |name| {
            disk.get(name)
                .map(|&(highest_token, next_seq, ts)| Durable {
                    fence: FenceState {
                        exists: true,
                        highest_token,
                        next_seq,
                        ..FenceState::default()
                    },
                    last_timestamp_ms: ts,
                    handle: (),
                })
        });
        assert!(requests.is_empty());
        answers.into_iter().for_each(Answer::send);
        let mut frames = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let f = decode_frame(&buf[at..], crate::codec::FORMAT_VERSION).unwrap();
            assert_eq!(f.header.group_id, 7);
            assert_eq!(plan.frames[frames.len()].offset_in_buf, at);
            frames.push((f.name.to_string(), f.header));
            at += f.frame_len;
        }
        assert_eq!(frames.len(), plan.frames.len());
        (plan, frames)
    }

    fn last_flags(frames: &[(String, crate::codec::FrameHeader)]) -> Vec<bool> {
        frames.iter().map(|(_, h)| h.last_in_group()).collect()
    }

    #[test]
    fn a_lower_token_after_an_accepted_higher_one_in_the_group_is_stale() {
        let disk = Disk::from([("s", (1, 0, 0))]);
        let (a, mut a_rx) = append("s", 5, 2, None);
        let (b, mut b_rx) = append("s", 3, 1, None);
        let (c, mut c_rx) = fence("s", 4);
        let (d, mut d_rx) = append("s", 5, 1, None);
        let (plan, frames) = run(&disk, vec![a, b, c, d]);
        assert_eq!(a_rx.try_recv().unwrap().unwrap().first_seq, 0);
        let stale = |presented| WriteError::StaleToken {
            presented,
            highest: 5,
            next_seq: 2,
        };
        assert_eq!(b_rx.try_recv().unwrap(), Err(stale(3)));
        assert_eq!(c_rx.try_recv().unwrap(), Err(stale(4)));
        assert_eq!(d_rx.try_recv().unwrap().unwrap().first_seq, 2);
        assert_eq!(frames.len(), 2);
        assert_eq!(last_flags(&frames), vec![false, true]);
        assert_eq!(
            plan.counts,
            Counts {
                stale: 2,
                mismatched: 0,
                appends: 2,
                fences: 0,
                records: 3,
            }
        );
        let s = &plan.streams["s"];
        assert_eq!((s.fence.highest_token, s.fence.next_seq), (5, 3));
    }

    #[test]
    fn a_fence_writes_a_frame_only_when_it_changes_something() {
        let disk = Disk::from([("old", (5, 3, 9))]);
        let (same, mut same_rx) = fence("old", 5);
        let (new, mut new_rx) = fence("new", 1);
        let (again, mut again_rx) = fence("new", 1);
        let (higher, mut higher_rx) = fence("old", 6);
        let (_, frames) = run(&disk, vec![same, new, again, higher]);
        let state = |stream: &str, highest_token, next_seq, last_timestamp_ms| StreamState {
            stream: stream.into(),
            first_seq: 0,
            next_seq,
            highest_token,
            last_timestamp_ms,
        };
        // Re-fencing an existing stream with its token: nothing to write.
        assert_eq!(same_rx.try_recv().unwrap(), Ok(state("old", 5, 3, 9)));
        // A fence creates a stream; once planned, the same token again is a
        // re-fence of a stream that exists.
        assert_eq!(new_rx.try_recv().unwrap(), Ok(state("new", 1, 0, 0)));
        assert_eq!(again_rx.try_recv().unwrap(), Ok(state("new", 1, 0, 0)));
        assert_eq!(higher_rx.try_recv().unwrap(), Ok(state("old", 6, 3, 9)));
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
        let disk = Disk::from([("s", (5, 3, 9))]);
        let (a, mut a_rx) = append("s", 4, 1, None);
        let (b, mut b_rx) = append("s", 5, 1, Some(2));
        let (c, mut c_rx) = fence("s", 5);
        let (plan, frames) = run(&disk, vec![a, b, c]);
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
        let disk = Disk::from([("s", (2, 3, 0))]);
        let (a, mut a_rx) = append("s", 2, 2, Some(3));
        let (b, mut b_rx) = append("s", 2, 1, Some(3));
        let (c, mut c_rx) = append("s", 2, 1, Some(5));
        // The token is checked first: a stale writer learns it lost
        // ownership, not that it raced.
        let (d, mut d_rx) = append("s", 1, 1, Some(6));
        let (plan, frames) = run(&disk, vec![a, b, c, d]);
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
        assert_eq!(
            d_rx.try_recv().unwrap(),
            Err(WriteError::StaleToken {
                presented: 1,
                highest: 2,
                next_seq: 6
            })
        );
        let firsts: Vec<u64> = frames.iter().map(|(_, h)| h.first_seq).collect();
        assert_eq!(firsts, vec![3, 5]);
        assert_eq!((plan.counts.mismatched, plan.counts.stale), (1, 1));
    }

    #[test]
    fn timestamps_never_decrease_within_a_stream() {
        // "ahead" last wrote at a time this clock has not reached yet (the
        // clock stepped back); "fresh" has never written.
        let ahead_ms = NOW_MS + 60_000;
        let disk = Disk::from([("ahead", (1, 1, ahead_ms))]);
        let (a, mut a_rx) = append("ahead", 1, 1, None);
        let (f, mut f_rx) = fence("ahead", 2);
        let (b, mut b_rx) = append("fresh", 1, 1, None);
        let (_, frames) = run(&disk, vec![a, f, b]);
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
}
