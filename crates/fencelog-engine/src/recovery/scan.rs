//! Replaying the frames of a segment: group ids in order, every frame
//! through its kind's replay rule ([`super::state::apply`]) on top of an
//! overlay of the open group, applied to the streams only once the group's
//! last frame is seen. A frame of a stream the checkpoint captured after
//! the frame's group is not replayed as state (its effect is in the
//! checkpoint), but a live records frame is still an index candidate.

use super::state::{self, Core, Found, Misfit};
use super::tail::{self, Cut, Position};
use super::{corrupt, FIRST_GROUP_ID};
use crate::codec::checkpoint::AppliedState;
use crate::codec::{
    decode_frame, len_u32, Frame, FrameKind, Payload, SegmentHeader, FORMAT_VERSION,
    SEGMENT_HEADER_BYTES,
};
use crate::error::OpenError;
use crate::fence::ReplayViolation;
use std::collections::HashMap;

/// A stream as the scan rebuilds it.
#[derive(Debug, Default)]
pub(crate) struct Building {
    pub core: Core,
    /// The checkpoint's `as_of_group` for it (0: not in the checkpoint).
    pub as_of_group: u64,
    /// Records frames, originals and copies, in log order.
    pub found: Vec<Found>,
}

/// A frame of the group being scanned, applied once its group closes.
struct PendingFound {
    name: Box<str>,
    found: Found,
}

/// The scan of the whole log, segment after segment.
pub(super) struct Scan {
    pub streams: HashMap<Box<str>, Building>,
    /// Every group up to this one is in the checkpoint (0: none).
    pub covered: u64,
    pub producers_max: usize,
    /// The open (not yet closed) group's frames, and its effect overlaid on
    /// `streams`.
    open: Vec<PendingFound>,
    overlay: HashMap<Box<str>, Core>,
    open_applied: Option<AppliedState>,
    pub applied: Option<AppliedState>,
    pub open_group_start: Option<u64>,
    /// Where the last closed group of the segment being scanned starts.
    pub last_closed_start: Option<u64>,
    pub open_group_id: u64,
    pub last_closed_group: u64,
    /// The index of the last segment scanned.
    last_index: Option<u64>,
    pub frames: u64,
    /// The format version of the segment being scanned.
    pub version: u32,
    /// A version-2 segment has been seen (no version-1 one may follow).
    pub seen_v2: bool,
    /// The log was written in `Durability::OnFlush`: unsynced groups of
    /// the last segment may have reached the disk in any order.
    pub unordered_tail: bool,
}

impl Scan {
    pub(super) fn new(covered: u64, producers_max: usize, unordered_tail: bool) -> Self {
        Scan {
            streams: HashMap::new(),
            covered,
            producers_max,
            open: Vec::new(),
            overlay: HashMap::new(),
            open_applied: None,
            applied: None,
            open_group_start: None,
            last_closed_start: None,
            open_group_id: 0,
            last_closed_group: FIRST_GROUP_ID - 1,
            last_index: None,
            frames: 0,
            version: FORMAT_VERSION,
            seen_v2: false,
            unordered_tail,
        }
    }

    /// Checks that segment `index`'s header continues the log: its index,
    /// its version, and its first group — the next one inside a run of
    /// segments; across a gap (deleted segments) a later one, with every
    /// group in between covered by the checkpoint.
    pub(super) fn check_header(
        &mut self,
        name: &str,
        index: u64,
        header: &SegmentHeader,
    ) -> Result<(), OpenError> {
        if header.segment_index != index {
            return Err(corrupt(
                name,
                16,
                format!("header says segment {}", header.segment_index),
            ));
        }
        if self.seen_v2 && header.version != FORMAT_VERSION {
            return Err(corrupt(
                name,
                8,
                "a version-1 segment after a version-2 one",
            ));
        }
        self.version = header.version;
        self.seen_v2 |= header.version == FORMAT_VERSION;
        if self.open_group_start.is_some() {
            let prev = self.last_index.map_or(index, |i| i);
            return Err(corrupt(
                &crate::segment::segment_name(prev),
                0,
                "segment ends inside a group",
            ));
        }
        let contiguous = self.last_index.map_or(index == 0, |i| i + 1 == index);
        let first = header.first_group_id;
        let next = self.last_closed_group + 1;
        let ok = if contiguous {
            first == next
        } else {
            first >= next && first - 1 <= self.covered
        };
        self.last_index = Some(index);
        if !ok {
            let why = if contiguous {
                format!("header starts at group {first}, expected {next}")
            } else {
                format!(
                    "header starts at group {first} after a gap; groups {next}..{first} must be in the checkpoint, which covers up to {}",
                    self.covered
                )
            };
            return Err(corrupt(name, 24, why));
        }
        // The groups of deleted segments are behind the checkpoint.
        self.last_closed_group = first - 1;
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
                    return tail::decide(&self.position(), name, view, off, is_last, e.to_string())
                        .map(Some)
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
        tail::unfinished_group(&self.position(), name, view.len() as u64, is_last)
    }

    /// Where the scan stands, for [`tail`]'s decisions.
    fn position(&self) -> Position {
        Position {
            open_group_start: self.open_group_start,
            open_group_id: self.open_group_id,
            last_closed_group: self.last_closed_group,
            version: self.version,
            unordered_tail: self.unordered_tail,
        }
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

    /// The stream's state as of the open group, for change.
    fn core_mut(&mut self, stream: &str) -> &mut Core {
        if !self.overlay.contains_key(stream) {
            let core = self
                .streams
                .get(stream)
                .map(|b| b.core.clone())
                .unwrap_or_default();
            self.overlay.insert(stream.into(), core);
        }
        self.overlay.get_mut(stream).expect("inserted above")
    }

    /// Checks the frame against its stream's state and adds it to the open
    /// group.
    fn replay(
        &mut self,
        name: &str,
        segment: u64,
        at: u64,
        frame: &Frame<'_>,
    ) -> Result<(), OpenError> {
        let h = frame.header;
        let g = h.group_id;
        if let Payload::Applied(a) = frame.payload {
            // Unchanged: the membership of the marker before it, which
            // may be earlier in this same group (entries applied together).
            let membership = match a.membership {
                [] => self
                    .open_applied
                    .as_ref()
                    .filter(|_| !mutated!(GroupMarkerForgetsMembership))
                    .or(self.applied.as_ref())
                    .map(|p| p.membership.clone())
                    .unwrap_or_default(),
                m => m.to_vec(),
            };
            self.open_applied = Some(AppliedState {
                term: a.term,
                node_id: a.node_id,
                index: a.index,
                membership,
            });
            self.frames += 1;
            return Ok(());
        }
        let as_of = self.streams.get(frame.name).map_or(0, |b| b.as_of_group);
        if as_of == 0 && g <= self.covered && self.covered != 0 {
            return Err(corrupt(name, at, format!(
                "stream {} has a frame of group {g}, which the checkpoint covers, but the checkpoint does not hold it",
                frame.name
            )));
        }
        let known = g <= as_of || h.relocated();
        let producers_max = self.producers_max;
        let core = self.core_mut(frame.name);
        let r = if known {
            match h.kind {
                FrameKind::Records => state::check_known(core, frame),
                _ => Ok(()),
            }
        } else {
            state::apply(core, frame, g, producers_max)
        };
        r.map_err(|m| corrupt(name, at, misfit(frame.name, m)))?;
        if h.kind == FrameKind::Records {
            let found = Found {
                first_seq: h.first_seq,
                count: h.record_count,
                segment,
                offset: at,
                len: len_u32(frame.frame_len),
                group: g,
            };
            self.open.push(PendingFound {
                name: frame.name.into(),
                found,
            });
        }
        Ok(())
    }

    fn close_group(&mut self) {
        for (name, core) in self.overlay.drain() {
            self.streams.entry(name).or_default().core = core;
        }
        for f in self.open.drain(..) {
            self.streams.entry(f.name).or_default().found.push(f.found);
            self.frames += 1;
        }
        if let Some(a) = self.open_applied.take() {
            self.applied = Some(a);
        }
        self.last_closed_group = self.open_group_id;
        self.last_closed_start = self.open_group_start;
        self.open_group_start = None;
    }

    /// Forgets the open group: its bytes were just cut.
    pub(super) fn abandon_open_group(&mut self) {
        self.open.clear();
        self.overlay.clear();
        self.open_applied = None;
        self.open_group_start = None;
    }
}

fn misfit(stream: &str, m: Misfit) -> String {
    match m {
        Misfit::Rule(v) => violation(stream, v),
        Misfit::Carried(why) => format!("stream {stream}: {why}"),
        Misfit::Beyond { end, next_seq } => format!(
            "stream {stream}: a frame of records up to seq {end} that its state (next_seq {next_seq}) never counted"
        ),
    }
}

fn violation(stream: &str, v: ReplayViolation) -> String {
    match v {
        ReplayViolation::TokenBelow { token, highest } => {
            format!("stream {stream} token {token} below accepted {highest}")
        }
        ReplayViolation::ZeroToken => format!("stream {stream} token 0"),
        ReplayViolation::SeqGap { first_seq, expected } => {
            format!("stream {stream} frame starts at seq {first_seq}, expected {expected}")
        }
        ReplayViolation::Sealed => format!("stream {stream}: a write to a sealed stream"),
        ReplayViolation::NoStream => format!("stream {stream}: a write to a stream that does not exist"),
        ReplayViolation::NoChange => format!("stream {stream}: a fence or seal that changes nothing"),
        ReplayViolation::BadTrim { first_seq, current, next_seq } => format!(
            "stream {stream}: a trim to {first_seq} with the trim point at {current} and next_seq {next_seq}"
        ),
    }
}
