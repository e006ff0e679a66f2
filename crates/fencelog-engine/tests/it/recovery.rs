//! Opening a log whose files were damaged while it was closed, and logs
//! that span many segments.

use crate::support::gate::{bodies, recs};
use bytes::Bytes;
use fencelog_engine::{Config, Engine, OpenError};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Segment files in log order (their names sort that way).
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn append_bytes(p: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(p)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

fn flip_byte(p: &Path, at: u64) {
    let f = OpenOptions::new().read(true).write(true).open(p).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x40;
    f.write_all_at(&b, at).unwrap();
}

/// Bytes of a one-record frame on stream `name` with a body of `body_len`:
/// 56 header + name + 4 length + body.
fn frame_bytes(name: &str, body_len: usize) -> u64 {
    (56 + name.len() + 4 + body_len) as u64
}

const SEGMENT_HEADER: u64 = 40;

/// Writes without preallocation, so the file ends where the data does, as a
/// growing file shows it after a crash; `preallocated_space_is_released`
/// covers the zero-filled case.
async fn write_numbered(dir: &Path, n: usize) {
    let no_prealloc = Config {
        prealloc_bytes: 0,
        ..Config::default()
    };
    let e = Engine::open_with(dir, no_prealloc).unwrap();
    for i in 0..n {
        e.append("s", 1, vec![Bytes::from(format!("r{i:03}"))], None)
            .await
            .unwrap();
    }
    e.shutdown().await;
}

fn numbered(from: usize, to: usize) -> Vec<Bytes> {
    (from..to)
        .map(|i| Bytes::from(format!("r{i:03}")))
        .collect()
}

#[tokio::test]
async fn garbage_tail_is_truncated_and_writing_continues() {
    let dir = tempfile::tempdir().unwrap();
    write_numbered(dir.path(), 10).await;
    let seg = segments(dir.path()).pop().unwrap();
    let good_len = std::fs::metadata(&seg).unwrap().len();
    assert_eq!(good_len, SEGMENT_HEADER + 10 * frame_bytes("s", 4));
    let garbage: Vec<u8> = (0..777u32).map(|i| (i * 31 % 251) as u8).collect();
    append_bytes(&seg, &garbage);

    let e = Engine::open(dir.path()).unwrap();
    let cut = e.recovery_report().truncated.clone().expect("a truncation");
    assert_eq!(cut.file, file_name(&seg));
    assert_eq!(cut.offset, good_len);
    assert_eq!(cut.bytes_cut, 777);
    assert!(!cut.reason.is_empty());
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), good_len);
    let r = e.read("s", 0, 100, 1 << 20).unwrap();
    assert_eq!(bodies(&r), numbered(0, 10));
    let ack = e.append("s", 1, recs(&["after"]), None).await.unwrap();
    assert_eq!((ack.first_seq, ack.next_seq), (10, 11));
    e.shutdown().await;
    drop(e);

    // The new record landed right where the garbage was cut and survives.
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(e.recovery_report().truncated, None);
    let r = e.read("s", 0, 100, 1 << 20).unwrap();
    assert_eq!(r.next_seq, 11);
    assert_eq!(r.records[10].body, Bytes::from("after"));
    e.shutdown().await;
}

#[tokio::test]
async fn half_written_last_frame_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    write_numbered(dir.path(), 5).await;
    let seg = segments(dir.path()).pop().unwrap();
    let good_len = std::fs::metadata(&seg).unwrap().len();
    // A torn write: the first half of a real frame, as if the crash hit
    // between the write and the fdatasync.
    let last_frame_at = good_len - frame_bytes("s", 4);
    let f = std::fs::File::open(&seg).unwrap();
    let mut frame = vec![0u8; frame_bytes("s", 4) as usize];
    f.read_exact_at(&mut frame, last_frame_at).unwrap();
    append_bytes(&seg, &frame[..frame.len() / 2]);

    let e = Engine::open(dir.path()).unwrap();
    let cut = e.recovery_report().truncated.clone().expect("a truncation");
    assert_eq!(
        (cut.file.as_str(), cut.offset, cut.bytes_cut),
        (file_name(&seg).as_str(), good_len, frame.len() as u64 / 2)
    );
    assert_eq!(
        bodies(&e.read("s", 0, 100, 1 << 20).unwrap()),
        numbered(0, 5)
    );
    assert_eq!(
        e.append("s", 1, recs(&["x"]), None)
            .await
            .unwrap()
            .first_seq,
        5
    );
    e.shutdown().await;
}

#[tokio::test]
async fn corruption_in_the_middle_of_the_last_segment_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    write_numbered(dir.path(), 10).await;
    let seg = segments(dir.path()).pop().unwrap();
    let len_before = std::fs::metadata(&seg).unwrap().len();
    // A body byte of the fourth frame; complete frames follow it.
    let frame_at = SEGMENT_HEADER + 3 * frame_bytes("s", 4);
    flip_byte(&seg, frame_at + 62);
    match Engine::open(dir.path()) {
        Err(OpenError::Corrupt(c)) => {
            assert_eq!(c.file, file_name(&seg));
            assert_eq!(c.offset, frame_at);
            assert!(c.reason.contains("checksum"), "{}", c.reason);
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("opened a log with a corrupt frame in the middle"),
    }
    // Refusing must not have "repaired" anything.
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), len_before);
}

#[tokio::test]
async fn corruption_in_a_sealed_segment_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_bytes_max: 4096,
        ..Config::default()
    };
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        for i in 0..200 {
            e.append("s", 1, vec![Bytes::from(format!("r{i:03}"))], None)
                .await
                .unwrap();
        }
        e.shutdown().await;
    }
    let segs = segments(dir.path());
    assert!(segs.len() >= 3, "{segs:?}");
    // The second frame of the first segment: a sealed segment, where even
    // a damaged last frame cannot be an unsynced tail.
    let frame_at = SEGMENT_HEADER + frame_bytes("s", 4);
    flip_byte(&segs[0], frame_at + 20);
    match Engine::open_with(dir.path(), cfg.clone()) {
        Err(OpenError::Corrupt(c)) => {
            assert_eq!(
                (c.file.as_str(), c.offset),
                (file_name(&segs[0]).as_str(), frame_at)
            );
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("opened a log with a corrupt sealed segment"),
    }
    flip_byte(&segs[0], frame_at + 20);
    // The end of a sealed segment: garbage there is not a torn tail either.
    let sealed_len = std::fs::metadata(&segs[1]).unwrap().len();
    append_bytes(&segs[1], &[0xAB; 100]);
    match Engine::open_with(dir.path(), cfg.clone()) {
        Err(OpenError::Corrupt(c)) => {
            assert_eq!(
                (c.file.as_str(), c.offset),
                (file_name(&segs[1]).as_str(), sealed_len)
            );
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("opened a log with garbage after a sealed segment"),
    }
    let f = OpenOptions::new().write(true).open(&segs[1]).unwrap();
    f.set_len(sealed_len).unwrap();
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert_eq!(
        bodies(&e.read("s", 0, 1000, 1 << 20).unwrap()),
        numbered(0, 200)
    );
    e.shutdown().await;
}

#[tokio::test]
async fn many_segments_read_across_boundaries_and_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_bytes_max: 4096,
        ..Config::default()
    };
    let streams = ["a", "bb", "ccc"];
    let body = |s: &str, i: usize| Bytes::from(format!("{s}-{i:04}-{}", "x".repeat(i % 50)));
    let check = |e: &Engine| {
        for s in streams {
            let r = e.read(s, 0, usize::MAX, usize::MAX).unwrap();
            assert_eq!(r.next_seq, 600);
            assert_eq!(r.records.len(), 600);
            for (k, rec) in r.records.iter().enumerate() {
                assert_eq!((rec.seq, &rec.body), (k as u64, &body(s, k)));
            }
            // Reads that start mid-log and mid-batch.
            for start in [1, 299, 300, 457, 599] {
                let r = e.read(s, start, 7, usize::MAX).unwrap();
                let want: Vec<_> = (start as usize..600.min(start as usize + 7))
                    .map(|i| body(s, i))
                    .collect();
                assert_eq!(bodies(&r), want, "{s} from {start}");
                assert_eq!(r.records[0].seq, start);
            }
        }
    };
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        // Interleaved streams, single records and batches of 3.
        let mut i = 0;
        while i < 600 {
            for s in streams {
                if i % 2 == 0 {
                    e.append(s, 1, vec![body(s, i)], None).await.unwrap();
                } else {
                    let batch = vec![body(s, i), body(s, i + 1), body(s, i + 2)];
                    let ack = e.append(s, 1, batch, None).await.unwrap();
                    assert_eq!((ack.first_seq, ack.last_seq), (i as u64, i as u64 + 2));
                }
            }
            i += if i % 2 == 0 { 1 } else { 3 };
        }
        check(&e);
        e.shutdown().await;
    }
    let segs = segments(dir.path());
    assert!(segs.len() > 20, "only {} segments", segs.len());
    for p in &segs[..segs.len() - 1] {
        // A group may overshoot the roll size, never by more than one group.
        assert!(std::fs::metadata(p).unwrap().len() <= 4096 + 512);
    }
    let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
    assert_eq!(e.recovery_report().segments, segs.len());
    assert_eq!(e.recovery_report().records, 1800);
    check(&e);
    // Writing goes on in the last segment and keeps rolling.
    for i in 0..100 {
        let ack = e
            .append("a", 1, vec![Bytes::from(format!("more{i}"))], None)
            .await
            .unwrap();
        assert_eq!(ack.first_seq, 600 + i);
    }
    e.shutdown().await;
    drop(e);
    assert!(segments(dir.path()).len() > segs.len());
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    let r = e.read("a", 590, 1000, usize::MAX).unwrap();
    assert_eq!(r.records.len(), 110);
    assert_eq!(r.records[10].body, Bytes::from("more0"));
    assert_eq!(r.records[109].body, Bytes::from("more99"));
    e.shutdown().await;
}

#[tokio::test]
async fn preallocated_space_is_released_not_reported() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    for i in 0..10 {
        e.append("s", 1, vec![Bytes::from(format!("r{i:03}"))], None)
            .await
            .unwrap();
    }
    e.shutdown().await;
    drop(e);
    let seg = segments(dir.path()).pop().unwrap();
    let data_len = SEGMENT_HEADER + 10 * frame_bytes("s", 4);
    let file_len = std::fs::metadata(&seg).unwrap().len();
    // The first group allocated its own end plus the preallocation; the
    // next nine landed inside it.
    assert_eq!(
        file_len,
        SEGMENT_HEADER + frame_bytes("s", 4) + fencelog_engine::config::PREALLOC_BYTES_DEFAULT
    );

    let e = Engine::open(dir.path()).unwrap();
    let report = e.recovery_report().clone();
    assert_eq!(report.truncated, None, "preallocated zeros are not damage");
    assert_eq!(report.preallocated_bytes_released, file_len - data_len);
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), data_len);
    assert_eq!(
        bodies(&e.read("s", 0, 100, 1 << 20).unwrap()),
        numbered(0, 10)
    );
    let ack = e.append("s", 1, recs(&["after"]), None).await.unwrap();
    assert_eq!(ack.first_seq, 10);
    e.shutdown().await;
}
