//! Fuzz target bodies of the engine, shared by the cargo-fuzz workspace in
//! `fuzz/` and by the engine's corpus replay test, which replays the checked-in corpus in every
//! `cargo test` so CI exercises the targets without a fuzzer.
//!
//! Each function takes arbitrary bytes and panics only when it finds a bug.

use crate::codec::{
    decode_frame, decode_segment_header, encode_frame, encode_frame_with, encode_segment_header,
    FrameKind, FrameSpec, Payload, PayloadSpec, RecordSpec, FLAG_HEADERS, FLAG_PRODUCER,
};
use crate::sim::{Resolution, SimStorage};
use crate::{Config, Engine, RecordIn, WriteError};
use std::collections::HashMap;
use std::sync::Arc;

/// A record's headers as the decoder borrows them: (name, value) pairs.
type Headers<'a> = Vec<(&'a [u8], &'a [u8])>;

/// The frame decoder never panics, and whatever decodes re-encodes to the
/// very same bytes (so decoding loses nothing and accepts no slack), for
/// every kind and flag: headers, producer trailers, configs, cursors and
/// Applied markers included.
pub fn frame_decoder(data: &[u8]) {
    if let Ok(h) = decode_segment_header(data) {
        assert_eq!(encode_segment_header(&h)[..], data[..40]);
    }
    let Ok(frame) = decode_frame(data, crate::codec::FORMAT_VERSION) else {
        return;
    };
    let records: Vec<(Headers<'_>, &[u8])> = frame
        .records()
        .map(|r| (r.headers().collect(), r.body))
        .collect();
    assert_eq!(records.len(), frame.header.record_count as usize);
    assert_eq!(frame.header.kind == FrameKind::Fence, records.is_empty());
    let spec = FrameSpec {
        kind: frame.header.kind,
        flags: frame.header.flags,
        group_id: frame.header.group_id,
        first_seq: frame.header.first_seq,
        fencing_token: frame.header.fencing_token,
        timestamp_ms: frame.header.timestamp_ms,
        name: frame.name,
    };
    let mut out = Vec::new();
    let extra = FLAG_HEADERS | FLAG_PRODUCER;
    match frame.payload {
        Payload::Records {
            producer,
            records: area,
        } if producer.is_some() || area.has_headers() => {
            let specs: Vec<RecordSpec<'_>> = records
                .iter()
                .map(|(headers, body)| RecordSpec { headers, body })
                .collect();
            let payload = PayloadSpec::Records {
                producer,
                records: &specs,
            };
            let plain = FrameSpec {
                flags: spec.flags & !extra,
                ..spec
            };
            encode_frame_with(&mut out, &plain, &payload);
        }
        Payload::Records { .. } | Payload::Empty => {
            let bodies: Vec<&[u8]> = records.iter().map(|r| r.1).collect();
            encode_frame(&mut out, &spec, &bodies);
        }
        Payload::Config(c) => {
            encode_frame_with(&mut out, &spec, &PayloadSpec::Config(c));
        }
        Payload::Cursor(n) => {
            encode_frame_with(&mut out, &spec, &PayloadSpec::Cursor(n));
        }
        Payload::Applied(a) => {
            encode_frame_with(&mut out, &spec, &PayloadSpec::Applied(a));
        }
    }
    assert_eq!(out[..], data[..frame.frame_len], "re-encoding differs");
}

/// Recovery over arbitrary segment bytes never panics, and every frame it
/// indexes decodes with a valid checksum and says what the index says.
///
/// The first input byte picks the layout: one segment of raw bytes; a valid
/// header followed by the bytes (so the scan reaches frames); or the bytes
/// split into two segments, the first behind a valid header.
pub fn recovery(data: &[u8]) {
    use crate::codec::SegmentHeader;
    use crate::recovery::{recover, FIRST_GROUP_ID};
    use crate::segment::segment_name;

    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let header =
        |index: u64| encode_segment_header(&SegmentHeader::new(index, FIRST_GROUP_ID)).to_vec();
    let sim = SimStorage::new();
    match mode % 3 {
        0 => sim.set_contents(&segment_name(0), rest),
        1 => sim.set_contents(&segment_name(0), &[header(0), rest.to_vec()].concat()),
        _ => {
            let split = rest.len() / 2;
            sim.set_contents(
                &segment_name(0),
                &[header(0), rest[..split].to_vec()].concat(),
            );
            sim.set_contents(&segment_name(1), &rest[split..]);
        }
    }
    let Ok(recovered) = recover(&sim, &Config::default()) else {
        return;
    };
    check_recovered(&recovered);
}

/// Every indexed frame of every recovered stream decodes, says what the
/// index says, and the index covers `first_seq..next_seq` densely.
fn check_recovered(recovered: &crate::recovery::Recovered) {
    for (name, stream) in &recovered.streams {
        let inner = crate::locks::lock(&stream.inner);
        let index = &inner.index;
        let f = stream.fence_state();
        let mut cur = index.first();
        let mut expected_seq = cur.map_or(f.first_seq, |(_, l)| l.first_seq);
        assert!(
            expected_seq <= f.first_seq,
            "trimmed records indexed in {name}"
        );
        while let Some((i, loc)) = cur {
            assert_eq!(loc.first_seq, expected_seq, "index gap in {name}");
            let seg = recovered
                .segments
                .get(loc.segment)
                .expect("indexed segment exists");
            let bytes = seg
                .file
                .view(seg.file.len().expect("length of a recovered segment"))
                .expect("view of a recovered segment");
            let at = usize::try_from(loc.offset).expect("an offset within a mapped segment");
            let frame = decode_frame(&bytes[at..], seg.version)
                .expect("recovery indexed a frame that does not decode");
            assert_eq!(frame.name, &**name);
            assert_eq!(frame.header.first_seq, loc.first_seq);
            assert_eq!(frame.header.record_count, loc.record_count);
            expected_seq += loc.record_count as u64;
            cur = index.next_after(i, &loc);
        }
        if !f.deleted {
            assert_eq!(
                expected_seq, f.next_seq,
                "index and next_seq disagree in {name}"
            );
        }
    }
}

/// Per stream: acknowledged bodies by seq (None where the seq holds a
/// record nobody saw acknowledged), and the highest acknowledged token.
type Model = HashMap<&'static str, (Vec<Option<RecordIn>>, u64)>;

/// Operation sequences against an in-memory reference model, with crashes
/// (simulated power loss) in between: whatever was acknowledged survives,
/// seqs stay dense, the highest token never goes down, and a stale token is
/// always refused.
pub fn ops_model(data: &[u8]) {
    /// Bounds the work one input can cause.
    const OPS_MAX: usize = 64;
    const STREAMS: [&str; 2] = ["a", "b"];

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let sim = SimStorage::new();
    let mut acked: Model = HashMap::new();
    rt.block_on(async {
        let mut engine = open_model_engine(&sim);
        for (n, chunk) in data.chunks(3).take(OPS_MAX).enumerate() {
            let [op, x, y] = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let stream = STREAMS[(op as usize >> 4) & 1];
            let token = 1 + (x % 8) as u64;
            match op % 4 {
                0 | 1 => model_append(&engine, &mut acked, stream, token, n, y).await,
                2 => match engine.fence(stream, token).await {
                    Ok(state) => {
                        assert!(state.highest_token >= token);
                        let entry = acked.entry(stream).or_default();
                        entry.1 = entry.1.max(token);
                    }
                    Err(WriteError::StaleToken { highest: h, .. }) => assert!(token < h),
                    Err(e) => panic!("unexpected fence error {e}"),
                },
                _ => {
                    let resolution = match y % 3 {
                        0 => Resolution::DropAll,
                        1 => Resolution::KeepAll,
                        _ => Resolution::Random(u64::from(x) << 8 | u64::from(y)),
                    };
                    drop(engine);
                    sim.crash(resolution);
                    engine = open_model_engine(&sim);
                }
            }
            check_model(&engine, &acked);
        }
    });
}

fn open_model_engine(sim: &SimStorage) -> Engine {
    Engine::open_storage(
        Arc::new(sim.clone()),
        Config {
            segment_bytes_max: 4096,
            reclaim_interval_ms: 0,
            ..Config::default()
        },
    )
    .expect("a log written by the engine and crashed must reopen")
}

/// Operation `n`: appends 1..=3 records (sized by `y`; with `y >= 128`
/// the first record carries two headers) and records what was
/// acknowledged.
async fn model_append(
    engine: &Engine,
    acked: &mut Model,
    stream: &'static str,
    token: u64,
    n: usize,
    y: u8,
) {
    let count = 1 + (y % 3) as usize;
    let records: Vec<RecordIn> = (0..count)
        .map(|k| {
            let r = RecordIn::new(format!("{n}:{k}:{}", "x".repeat(y as usize % 128)));
            match (k, y >= 128) {
                (0, true) => r
                    .with_header("n", format!("{n}"))
                    .with_header(&b"\xff"[..], vec![y; y as usize % 7]),
                _ => r,
            }
        })
        .collect();
    let highest = acked.get(stream).map(|a| a.1).unwrap_or(0);
    match engine
        .append_records(stream, token, records.clone(), None)
        .await
    {
        Ok(ack) => {
            assert!(
                token >= highest,
                "stale token {token} accepted over {highest}"
            );
            let entry = acked.entry(stream).or_default();
            let seqs = &mut entry.0;
            let seq = |s: u64| usize::try_from(s).expect("the model's seqs index a Vec in memory");
            if seqs.len() < seq(ack.next_seq) {
                seqs.resize(seq(ack.next_seq), None);
            }
            for (k, r) in records.into_iter().enumerate() {
                seqs[seq(ack.first_seq) + k] = Some(r);
            }
            entry.1 = entry.1.max(token);
        }
        Err(WriteError::StaleToken { highest: h, .. }) => {
            assert!(token < h, "token {token} refused as stale under {h}");
        }
        Err(e) => panic!("unexpected append error {e}"),
    }
}

fn check_model(engine: &Engine, acked: &Model) {
    for (stream, (seqs, highest)) in acked {
        let state = engine.state(stream).expect("acknowledged stream exists");
        assert!(
            state.highest_token >= *highest,
            "highest token went down in {stream}"
        );
        assert!(
            state.next_seq >= seqs.len() as u64,
            "acknowledged seqs lost in {stream}"
        );
        let read = engine
            .read(stream, 0, usize::MAX, usize::MAX)
            .expect("read");
        assert_eq!(
            read.records.len() as u64,
            state.next_seq,
            "seqs not dense in {stream}"
        );
        for (seq, record) in seqs.iter().enumerate() {
            if let Some(r) = record {
                let got = &read.records[seq];
                assert_eq!(got.body, r.body, "{stream} seq {seq}");
                assert_eq!(got.headers, r.headers, "{stream} seq {seq} headers");
            }
        }
    }
}

/// Runs every input of the checked-in corpus of `target`
/// (`fuzz/corpus/<target>/` at the workspace root) through `run`, the same
/// body the fuzzer runs, so every test run exercises the targets without a
/// fuzzer and every crasher once found stays a regression test. Panics,
/// naming the input, if `run` panics on any of them or the corpus is empty.
pub fn replay_corpus(target: &str, run: fn(&[u8])) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("listing the corpus").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "corpus {} is empty", dir.display());
    for path in &inputs {
        let data = std::fs::read(path).expect("reading a corpus input");
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target} failed on {}", path.display());
    }
    inputs.len()
}
