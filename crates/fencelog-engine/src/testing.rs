//! Engine internals for the engine's own integration suites, its benches
//! and its fuzz bodies: the codec (to build, decode and damage segment
//! bytes the way a disk would), recovery run directly on a storage, and
//! segment file names. Only with the `sim` feature; not part of the API an
//! embedder uses, and free to change with the format.

pub use crate::codec::manifest::Manifest;
pub use crate::codec::{
    decode_frame, decode_segment_header, encode_frame, encode_frame_with, encode_segment_header,
    frame_len, AppliedMark, DecodeError, Frame, FrameHeader, FrameKind, FrameSpec, Payload,
    PayloadSpec, ProducerTrailer, RecordSpec, SegmentHeader, FLAG_HEADERS, FLAG_LAST_IN_GROUP,
    FLAG_PRODUCER, FLAG_RELOCATED, FLAG_RETENTION, FORMAT_VERSION, FORMAT_VERSION_V1,
    SEGMENT_HEADER_BYTES,
};
pub use crate::recovery::{recover, Recovered};
pub use crate::segment::segment_name;
pub use crate::stream::StreamShared;
pub use fencelog_types::{Retention, StreamConfig};
