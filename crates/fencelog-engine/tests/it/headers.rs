//! Record headers at the engine: stored in frames with flag
//! HEADERS and returned exactly — names, values, order, repeats, empty and
//! non-UTF-8 values — after a restart and after compaction copied the
//! frame; batches without headers keep version 1's bytes; the limits are
//! refused before the writer with nothing written; header bytes count
//! against the batch and read byte limits.

use bytes::Bytes;
use fencelog_engine::testing::{
    decode_frame, decode_segment_header, FLAG_HEADERS, FLAG_LAST_IN_GROUP, FLAG_RELOCATED,
    SEGMENT_HEADER_BYTES,
};
use fencelog_engine::{
    Config, Engine, Header, HeaderError, Record, RecordIn, WriteError, HEADERS_PER_RECORD_MAX,
    HEADER_BYTES_PER_RECORD_MAX,
};
use std::path::Path;

fn small(segment_bytes: u64) -> Config {
    Config {
        segment_bytes_max: segment_bytes,
        reclaim_interval_ms: 0,
        ..Config::default()
    }
}

/// A batch mixing records with and without headers: repeated names, an
/// empty value, a name and a value that are not UTF-8.
fn mixed() -> Vec<RecordIn> {
    vec![
        RecordIn::new("one")
            .with_header("trace-id", "abc")
            .with_header("trace-id", "")
            .with_header(&b"n\xff"[..], &b"\x00\xfe"[..]),
        RecordIn::new("two"),
        RecordIn::new(Bytes::new()).with_header("content-type", "text/plain"),
    ]
}

fn parts(records: &[Record]) -> Vec<(u64, Vec<Header>, Bytes)> {
    records
        .iter()
        .map(|r| (r.seq, r.headers.clone(), r.body.clone()))
        .collect()
}

fn expected(first_seq: u64) -> Vec<(u64, Vec<Header>, Bytes)> {
    mixed()
        .into_iter()
        .enumerate()
        .map(|(k, r)| (first_seq + k as u64, r.headers, r.body))
        .collect()
}

/// Every records frame in the directory's segments, in log order, as
/// (flags, bytes).
fn records_frames(dir: &Path) -> Vec<(u8, Vec<u8>)> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for path in names {
        let bytes = std::fs::read(&path).unwrap();
        let version = decode_segment_header(&bytes).unwrap().version;
        let mut at = SEGMENT_HEADER_BYTES;
        while let Ok(f) = decode_frame(&bytes[at..], version) {
            if f.header.record_count > 0 {
                out.push((f.header.flags, bytes[at..at + f.frame_len].to_vec()));
            }
            at += f.frame_len;
        }
    }
    out
}

#[tokio::test]
async fn headers_come_back_exactly_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path()).unwrap();
        e.append("s", 1, vec![Bytes::from("plain")], None)
            .await
            .unwrap();
        let ack = e.append_records("s", 1, mixed(), None).await.unwrap();
        assert_eq!((ack.first_seq, ack.last_seq, ack.next_seq), (1, 3, 4));
        let got = e.read("s", 1, 10, 1 << 20).unwrap();
        assert_eq!(parts(&got.records), expected(1));
        assert!(e.read("s", 0, 1, 1 << 20).unwrap().records[0]
            .headers
            .is_empty());
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(
        parts(&e.read("s", 1, 10, 1 << 20).unwrap().records),
        expected(1)
    );
    // On disk: the plain append has no flag HEADERS, the mixed batch has.
    let frames = records_frames(dir.path());
    let flags: Vec<u8> = frames.iter().map(|f| f.0 & !FLAG_LAST_IN_GROUP).collect();
    assert_eq!(flags, vec![0, FLAG_HEADERS]);
    e.shutdown().await;
}

/// A batch whose records all have empty header lists is a plain append,
/// byte for byte the frame `append` writes (flags 0, version 1's layout).
#[tokio::test]
async fn a_batch_without_headers_is_a_plain_frame() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 1, vec![Bytes::from("a"), Bytes::from("b")], None)
        .await
        .unwrap();
    let records = vec![RecordIn::new("a"), RecordIn::new("b")];
    e.append_records("s", 1, records, None).await.unwrap();
    e.shutdown().await;
    let frames = records_frames(dir.path());
    assert_eq!(frames.len(), 2);
    let strip = |f: &[u8]| {
        // crc, group id, first_seq and timestamp differ; the rest must not.
        let mut f = f.to_vec();
        for range in [4..8, 16..32, 40..48] {
            f[range].fill(0);
        }
        f
    };
    assert_eq!(strip(&frames[0].1), strip(&frames[1].1));
    assert_eq!(frames[1].0 & !FLAG_LAST_IN_GROUP, 0);
}

#[tokio::test]
async fn limits_are_refused_before_the_writer_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.fence("s", 1).await.unwrap();
    let with = |headers: Vec<Header>| {
        vec![
            RecordIn::new("ok").with_header("a", "b"),
            RecordIn {
                body: Bytes::from("bad"),
                headers,
            },
        ]
    };
    let many: Vec<Header> = (0..=HEADERS_PER_RECORD_MAX)
        .map(|_| Header::new("n", ""))
        .collect();
    let big = vec![Header::new(
        "n",
        vec![b'v'; HEADER_BYTES_PER_RECORD_MAX], // 1 + 8192 bytes
    )];
    let cases = [
        (many, HeaderError::TooMany { count: 65 }),
        (big, HeaderError::TooManyBytes { bytes: 8193 }),
        (
            vec![Header::new("", "v")],
            HeaderError::EmptyName { index: 0 },
        ),
        (
            vec![Header::new("x", ""), Header::new(vec![b'n'; 256], "")],
            HeaderError::NameTooLong { index: 1, len: 256 },
        ),
    ];
    for (headers, error) in cases {
        let r = e.append_records("s", 1, with(headers), None).await;
        assert_eq!(r, Err(WriteError::BadHeaders { record: 1, error }));
    }
    // The largest allowed record goes through whole.
    let mut max: Vec<Header> = (0..HEADERS_PER_RECORD_MAX - 1)
        .map(|_| Header::new("n", ""))
        .collect();
    max.push(Header::new(
        vec![b'n'; 255],
        vec![b'v'; HEADER_BYTES_PER_RECORD_MAX - 255 - 63],
    ));
    let ack = e
        .append_records("s", 1, with(max.clone()), None)
        .await
        .unwrap();
    assert_eq!(ack.first_seq, 0, "the refused batches wrote nothing");
    let got = e.read("s", 1, 1, 1 << 20).unwrap();
    assert_eq!(got.records[0].headers, max);
    assert_eq!(e.metrics().appends_accepted.get(), 1);
    e.shutdown().await;
}

/// Header names and values count like body bytes: against the batch byte
/// limit when appending, and against a read's byte budget.
#[tokio::test]
async fn header_bytes_count_against_the_batch_and_read_limits() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        batch_bytes_max: 1000,
        ..Config::default()
    };
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    let rec = |body: usize, value: usize| {
        RecordIn::new(vec![b'b'; body]).with_header("h", vec![b'v'; value])
    };
    let r = e.append_records("s", 1, vec![rec(500, 500)], None).await;
    assert_eq!(
        r,
        Err(WriteError::TooLarge {
            what: "bytes in the batch",
            limit: 1000,
            actual: 1001,
        })
    );
    e.append_records("s", 1, vec![rec(500, 499)], None)
        .await
        .unwrap();
    e.append_records("s", 1, vec![rec(10, 89)], None)
        .await
        .unwrap();
    // 1000 + 100 bytes: a budget of 1099 stops after the first record,
    // 1100 takes both.
    assert_eq!(e.read("s", 0, 10, 1099).unwrap().records.len(), 1);
    assert_eq!(e.read("s", 0, 10, 1100).unwrap().records.len(), 2);
    e.shutdown().await;
}

/// Compaction copies a frame with headers forward byte for byte (only the
/// RELOCATED flag, the group id and the CRC differ), and its records keep
/// their headers, after a restart too.
#[tokio::test]
async fn compaction_copies_a_frame_with_headers_byte_identically() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small(4096);
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        e.append_records("slow", 3, mixed(), None).await.unwrap();
        let body = "f".repeat(300);
        for i in 0..60 {
            let b = Bytes::from(format!("{i}{body}"));
            e.append("fast", 1, vec![b], None).await.unwrap();
        }
        e.trim("fast", 1, 58).await.unwrap();
        let original = records_frames(dir.path()).remove(0).1;
        let r = e.reclaim().await.unwrap();
        assert!(r.compacted >= 1 && r.frames_copied >= 1, "{r:?}");
        let copies: Vec<Vec<u8>> = records_frames(dir.path())
            .into_iter()
            .filter(|(flags, _)| flags & FLAG_RELOCATED != 0)
            .map(|(_, bytes)| bytes)
            .filter(|b| b[56..60] == *b"slow")
            .collect();
        assert_eq!(copies.len(), 1, "one copy of the slow frame");
        let copy = &copies[0];
        assert_eq!(copy.len(), original.len());
        let flags = |f: &[u8]| f[13] & !FLAG_LAST_IN_GROUP;
        assert_eq!(flags(copy), flags(&original) | FLAG_RELOCATED);
        assert_eq!(copy[13] & FLAG_HEADERS, FLAG_HEADERS);
        let same = |f: &[u8]| [&f[..4], &f[8..13], &f[14..16], &f[24..]].concat();
        assert_eq!(same(copy), same(&original));
        assert_eq!(
            parts(&e.read("slow", 0, 10, 1 << 20).unwrap().records),
            expected(0)
        );
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert_eq!(
        parts(&e.read("slow", 0, 10, 1 << 20).unwrap().records),
        expected(0)
    );
    e.shutdown().await;
}
