//! Replaying the frames of a segment: group ids in order, and every frame
//! through the fencing rule's replay check ([`crate::fence::check_replay`])
//! on top of an overlay of the open group, applied to the streams only once
//! the group's last frame is seen.

use super::tail::{self, Cut};
use super::{corrupt, FIRST_GROUP_ID};
use crate::codec::{decode_frame, Frame, FrameKind, SegmentHeader, SEGMENT_HEADER_BYTES};
use crate::error::OpenError;
use crate::fence::{self, Change, FenceState, ReplayViolation, Replayed};
use crate::index::StreamIndex;
use crate::segment::segment_name;
use std::collections::HashMap;

/// A frame of the group being scanned, applied once its group closes.
struct PendingFrame {
    name: Box<str>,
    kind: FrameKind,
    segment: u64,
    offset: u64,
    first_seq: u64,
    count: u32,
    token: u64,
    timestamp_ms: u64,
}

/// A stream's state as far as the scan got.
#[derive(Default, Clone, Copy)]
pub(super) struct Working {
    pub fence: FenceState,
    pub last_timestamp_ms: u64,
}

/// The scan of the whole log, segment after segment.
pub(super) struct Scan {
    /// The streams as of the last closed group.
    pub streams: HashMap<Box<str>, (Working, StreamIndex)>,
    /// The open (not yet closed) group's frames, and its effect overlaid on
    /// `streams`.
    open: Vec<PendingFrame>,
    overlay: HashMap<Box<str>, Working>,
    pub open_group_start: Option<u64>,
    /// Where the last closed group of the segment being scanned starts.
    pub last_closed_start: Option<u64>,
    pub open_group_id: u64,
    pub last_closed_group: u64,
    pub records: u64,
    pub frames: u64,
    /// The format version of the segment being scanned.
    pub version: u32,
}

impl Scan {
    pub(super) fn new() -> Self {
        Scan {
            streams: HashMap::new(),
            open: Vec::new(),
            overlay: HashMap::new(),
            open_group_start: None,
            last_closed_start: None,
            open_group_id: 0,
            last_closed_group: FIRST_GROUP_ID - 1,
            records: 0,
            frames: 0,
            version: crate::codec::FORMAT_VERSION,
        }
    }

    fn state(&self, name: &str) -> Working {
        if let Some(w) = self.overlay.get(name) {
            return *w;
        }
        self.streams.get(name).map(|s| s.0).unwrap_or_default()
    }

    /// Checks that segment `index`'s header continues the log.
    pub(super) fn check_header(
        &mut self,
        name: &str,
        index: u64,
        header: &SegmentHeader,
    ) -> Result<(), OpenError> {
        self.version = header.version;
        if header.segment_index != index {
            return Err(corrupt(
                name,
                16,
                format!("header says segment {}", header.segment_index),
            ));
        }
        if self.open_group_start.is_some() {
            return Err(corrupt(
                &segment_name(index - 1),
                0,
                "segment ends inside a group",
            ));
        }
        if header.first_group_id != self.last_closed_group + 1 {
            return Err(corrupt(
                name,
                24,
                format!(
                    "header starts at group {}, expected {}",
                    header.first_group_id,
                    self.last_closed_group + 1
                ),
            ));
        }
        Ok(())
    }

    /// Replays the frames of segment `index` (named `name`, bytes `view`)
    /// after its header. Returns where its tail must be cut, if anywhere
    /// (see [`tail`] for the decision).
    pub(super) fn scan_frames(
        &mut self,
        name: &str,
        index: u64,
        is_last: bool,
        view: &[u8],
    ) -> Result<Option<Cut>, OpenError> {
        let mut off = SEGMENT_HEADER_BYTES;
        self.last_closed_start = None;
        while off < view.len() {
            let frame = match decode_frame(&view[off..], self.version) {
                Ok(f) => f,
                Err(e) => {
                    return tail::decide(self, name, view, off, is_last, e.to_string()).map(Some)
                }
            };
            let at = off as u64;
            self.enter_group(name, at, frame.header.group_id)?;
            self.replay(name, index, at, &frame)?;
            off += frame.frame_len;
            if frame.header.last_in_group() {
                self.close_group();
            }
        }
        tail::unfinished_group(self, name, view.len() as u64, is_last)
    }

    /// Group ids: frames of one group are adjacent; groups count up by one.
    fn enter_group(&mut self, name: &str, at: u64, group_id: u64) -> Result<(), OpenError> {
        match self.open_group_start {
            Some(_) if group_id != self.open_group_id => Err(corrupt(
                name,
                at,
                format!(
                    "frame of group {group_id} inside group {}",
                    self.open_group_id
                ),
            )),
            None if group_id != self.last_closed_group + 1 => Err(corrupt(
                name,
                at,
                format!("group {group_id} follows group {}", self.last_closed_group),
            )),
            None => {
                self.open_group_start = Some(at);
                self.open_group_id = group_id;
                Ok(())
            }
            Some(_) => Ok(()),
        }
    }

    /// Checks the frame against its stream's state (the fencing rule) and
    /// adds it to the open group.
    fn replay(
        &mut self,
        name: &str,
        segment: u64,
        at: u64,
        frame: &Frame<'_>,
    ) -> Result<(), OpenError> {
        let h = frame.header;
        let st = self.state(frame.name);
        let change = match h.kind {
            FrameKind::Records => Change::Append {
                count: h.record_count,
            },
            _ => Change::Fence,
        };
        let replayed = Replayed {
            change,
            token: h.fencing_token,
            first_seq: h.first_seq,
        };
        let fence = fence::check_replay(st.fence, replayed)
            .map_err(|v| corrupt(name, at, violation(frame.name, v)))?;
        let mut next = Working { fence, ..st };
        if h.kind == FrameKind::Records {
            next.last_timestamp_ms = h.timestamp_ms;
        }
        self.overlay.insert(frame.name.into(), next);
        self.open.push(PendingFrame {
            name: frame.name.into(),
            kind: h.kind,
            segment,
            offset: at,
            first_seq: h.first_seq,
            count: h.record_count,
            token: h.fencing_token,
            timestamp_ms: h.timestamp_ms,
        });
        Ok(())
    }

    fn close_group(&mut self) {
        for f in self.open.drain(..) {
            if f.kind == FrameKind::Fence && mutated!(FenceOnlyInMemory) {
                continue;
            }
            let entry = self.streams.entry(f.name).or_default();
            entry.0.fence.highest_token = f.token;
            if f.kind == FrameKind::Records {
                entry.1.push(f.first_seq, f.segment, f.offset, f.count);
                entry.0.fence.next_seq = f.first_seq + f.count as u64;
                entry.0.last_timestamp_ms = f.timestamp_ms;
                self.records += f.count as u64;
            }
            self.frames += 1;
        }
        self.overlay.clear();
        self.last_closed_group = self.open_group_id;
        self.last_closed_start = self.open_group_start;
        self.open_group_start = None;
    }

    /// Forgets the open group: its bytes were just cut.
    pub(super) fn abandon_open_group(&mut self) {
        self.open.clear();
        self.overlay.clear();
        self.open_group_start = None;
    }
}

fn violation(stream: &str, v: ReplayViolation) -> String {
    match v {
        ReplayViolation::TokenBelow { token, highest } => {
            format!("stream {stream} token {token} below accepted {highest}")
        }
        ReplayViolation::ZeroToken => format!("stream {stream} token 0"),
        ReplayViolation::SeqGap {
            first_seq,
            expected,
        } => format!("stream {stream} frame starts at seq {first_seq}, expected {expected}"),
        v => format!("stream {stream}: {v:?}"),
    }
}
