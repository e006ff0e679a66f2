//! Replays the checked-in fuzz corpus (fuzz/corpus/<target>/*) through the
//! same target bodies the fuzzer runs, so every `cargo test` exercises them
//! and every crasher once found stays a regression test.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let n = fencelog_engine::fuzz::replay_corpus(target, run);
    eprintln!("{target}: {n} corpus inputs replayed");
}

#[test]
fn frame_decoder_corpus() {
    replay("frame_decoder", fencelog_engine::fuzz::frame_decoder);
}

#[test]
fn recovery_corpus() {
    replay("recovery", fencelog_engine::fuzz::recovery);
}

#[test]
fn ops_model_corpus() {
    replay("ops_model", fencelog_engine::fuzz::ops_model);
}

/// The seeds are written by fuzz/make_seeds.py from the documented layout,
/// not by our encoder: decoding them checks the documentation against the
/// code.
#[test]
fn documented_layout_matches_the_decoder() {
    use fencelog_engine::testing::{
        decode_frame, decode_segment_header, FrameKind, FLAG_HEADERS, FORMAT_VERSION,
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/frame_decoder");
    let one = std::fs::read(dir.join("records_one")).unwrap();
    let f = decode_frame(&one, FORMAT_VERSION).unwrap();
    assert_eq!(f.name, "orders");
    assert_eq!(f.header.kind, FrameKind::Records);
    assert!(f.header.last_in_group());
    assert_eq!(
        (
            f.header.group_id,
            f.header.first_seq,
            f.header.fencing_token
        ),
        (1, 0, 41)
    );
    assert_eq!(f.bodies().collect::<Vec<_>>(), vec![&b"hello"[..]]);
    let fence_bytes = std::fs::read(dir.join("fence")).unwrap();
    let fence = decode_frame(&fence_bytes, FORMAT_VERSION).unwrap();
    assert_eq!(fence.header.kind, FrameKind::Fence);
    assert_eq!(fence.header.fencing_token, 1 << 62);
    let h = decode_segment_header(&std::fs::read(dir.join("segment_header")).unwrap()).unwrap();
    assert_eq!((h.segment_index, h.first_group_id), (7, 99));
    assert!(decode_frame(
        &std::fs::read(dir.join("bit_flip")).unwrap(),
        FORMAT_VERSION
    )
    .is_err());
    // Flag HEADERS, from the documented records layout.
    let traced = std::fs::read(dir.join("records_headers")).unwrap();
    let f = decode_frame(&traced, FORMAT_VERSION).unwrap();
    assert_eq!(f.header.flags & FLAG_HEADERS, FLAG_HEADERS);
    type Headers<'a> = Vec<(&'a [u8], &'a [u8])>;
    let records: Vec<(Headers<'_>, &[u8])> = f
        .records()
        .map(|r| (r.headers().collect(), r.body))
        .collect();
    let trace: Headers<'_> = vec![
        (b"trace-id", b"abc"),
        (b"trace-id", b""),
        (b"bin\xff", b"\x00\xfe"),
    ];
    assert_eq!(records, vec![(trace, &b"one"[..]), (vec![], &b"two"[..])]);
}

/// The recovery seeds reach real frames: the whole-segment seed rebuilds
/// both streams it holds, so the target is not just bouncing off headers.
#[test]
fn recovery_seed_rebuilds_its_streams() {
    use fencelog_engine::sim::SimStorage;
    use fencelog_engine::testing::{recover, segment_name};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/recovery");
    let seed = std::fs::read(dir.join("whole_segment")).unwrap();
    let sim = SimStorage::new();
    sim.set_contents(&segment_name(0), &seed[1..]);
    let r = recover(&sim, &Default::default()).unwrap();
    assert_eq!(r.report.streams, 2);
    assert_eq!(r.report.records, 3);
    assert_eq!(r.streams["orders"].next_seq(), 3);
    assert_eq!(r.streams["orders"].highest_token(), 42);
    assert_eq!(r.streams["locks"].highest_token(), 7);
}
