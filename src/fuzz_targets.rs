//! Fuzz target bodies, shared by the cargo-fuzz workspace in `fuzz/` and by
//! `tests/fuzz_corpus.rs`, which replays the checked-in corpus in every
//! `cargo test` so CI exercises the targets without a fuzzer.
//!
//! Each function takes arbitrary bytes and panics only when it finds a bug.

use crate::codec::{
    decode_frame, decode_segment_header, encode_frame, encode_segment_header, FrameKind, FrameSpec,
};

/// The frame decoder never panics, and whatever decodes re-encodes to the
/// very same bytes (so decoding loses nothing and accepts no slack).
pub fn frame_decoder(data: &[u8]) {
    if let Ok(h) = decode_segment_header(data) {
        assert_eq!(encode_segment_header(&h)[..], data[..40]);
    }
    let Ok(frame) = decode_frame(data) else {
        return;
    };
    let bodies: Vec<&[u8]> = frame.records().collect();
    assert_eq!(bodies.len(), frame.header.record_count as usize);
    assert_eq!(frame.header.kind == FrameKind::Fence, bodies.is_empty());
    let mut out = Vec::new();
    encode_frame(
        &mut out,
        &FrameSpec {
            kind: frame.header.kind,
            last_in_group: frame.header.last_in_group,
            group_id: frame.header.group_id,
            first_seq: frame.header.first_seq,
            fencing_token: frame.header.fencing_token,
            timestamp_ms: frame.header.timestamp_ms,
            name: frame.name,
        },
        &bodies,
    );
    assert_eq!(out[..], data[..frame.frame_len], "re-encoding differs");
}
