//! The lifecycle's contract at the engine: trim, seal, delete and config with
//! their exact answers, fenced like every write, and all of it (and the
//! fence history) still there after a restart.

use crate::support::gate::{bodies, recs};
use fencelog_engine::{
    Config, Engine, FenceBy, ReadError, Retention, StreamConfig, StreamState, WriteError,
};

fn state(e: &Engine, s: &str) -> StreamState {
    e.state(s).unwrap()
}

fn stale(presented: u64, highest: u64, next_seq: u64) -> WriteError {
    WriteError::StaleToken {
        presented,
        highest,
        next_seq,
    }
}

#[tokio::test]
async fn trim_moves_first_seq_forward_only_and_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 2, recs(&["a", "b", "c"]), None)
        .await
        .unwrap();
    e.append("s", 2, recs(&["d", "e"]), None).await.unwrap();
    let t = e.trim("s", 2, 2).await.unwrap();
    assert_eq!((t.first_seq, t.next_seq, t.highest_token), (2, 5, 2));
    // Reads below the trim point are out of range and say where it is.
    assert_eq!(
        e.read("s", 1, 10, 1 << 20),
        Err(ReadError::OutOfRange {
            start_seq: 1,
            first_seq: 2,
            next_seq: 5
        })
    );
    let r = e.read("s", 2, 10, 1 << 20).unwrap();
    assert_eq!(bodies(&r), recs(&["c", "d", "e"]));
    // A lower trim_seq changes nothing; past the tail clamps to next_seq.
    assert_eq!(e.trim("s", 2, 1).await.unwrap().first_seq, 2);
    assert_eq!(e.trim("s", 2, 99).await.unwrap().first_seq, 5);
    assert_eq!(e.read("s", 5, 10, 1 << 20).unwrap().records.len(), 0);
    // Stale: refused, nothing changes. A higher token raises the highest.
    assert_eq!(e.trim("s", 1, 5).await, Err(stale(1, 2, 5)));
    assert_eq!(e.trim("s", 7, 0).await.unwrap().highest_token, 7);
    assert_eq!(
        e.append("s", 2, recs(&["x"]), None).await,
        Err(stale(2, 7, 5))
    );
    assert_eq!(e.trim("nope", 1, 0).await, Err(WriteError::NotFound));
    let a = e.append("s", 7, recs(&["f"]), None).await.unwrap();
    assert_eq!(a.first_seq, 5);
    e.shutdown().await;
}

#[tokio::test]
async fn a_sealed_stream_refuses_writes_whatever_the_token_and_keeps_serving_reads() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 3, recs(&["a"]), None).await.unwrap();
    assert_eq!(e.seal("s", 2).await, Err(stale(2, 3, 1)));
    let s = e.seal("s", 3).await.unwrap();
    assert!(s.sealed);
    for token in [1, 3, 99] {
        match e.append("s", token, recs(&["b"]), None).await {
            Err(WriteError::StreamSealed(st)) => {
                assert_eq!((st.sealed, st.next_seq, st.highest_token), (true, 1, 3))
            }
            other => panic!("append with {token} on a sealed stream: {other:?}"),
        }
        assert!(matches!(
            e.fence("s", token).await,
            Err(WriteError::StreamSealed(_))
        ));
        assert!(matches!(
            e.trim("s", token, 1).await,
            Err(WriteError::StreamSealed(_))
        ));
    }
    // Sealing again with the highest token is idempotent; a higher one
    // raises the token (so nothing carrying 3 changes the stream again).
    assert!(e.seal("s", 3).await.unwrap().sealed);
    assert_eq!(state(&e, "s").highest_token, 3);
    assert!(e.seal("s", 4).await.unwrap().sealed);
    assert_eq!(state(&e, "s").highest_token, 4);
    assert_eq!(e.delete("s", 3).await, Err(stale(3, 4, 1)));
    let r = e.read("s", 0, 10, 1 << 20).unwrap();
    assert_eq!((bodies(&r), r.sealed), (recs(&["a"]), true));
    // A long-poll at the tail of a sealed stream returns at once.
    let next = e
        .wait_for("s", 1, std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(next, 1);
    e.shutdown().await;
}

#[tokio::test]
async fn a_tombstone_keeps_the_token_forever_and_a_higher_one_recreates_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 5, recs(&["a", "b"]), None).await.unwrap();
    assert_eq!(e.delete("s", 4).await, Err(stale(4, 5, 2)));
    let t = e.delete("s", 5).await.unwrap();
    assert_eq!(
        (t.deleted, t.first_seq, t.next_seq, t.highest_token),
        (true, 2, 2, 5)
    );
    assert_eq!(e.read("s", 0, 10, 1 << 20), Err(ReadError::NotFound));
    assert!(e.list_streams("", None, 10).is_empty());
    // The stale owner, with its old token, cannot bring the stream back.
    assert_eq!(
        e.append("s", 5, recs(&["zombie"]), None).await,
        Err(stale(5, 5, 2))
    );
    assert_eq!(e.fence("s", 5).await, Err(stale(5, 5, 2)));
    assert_eq!(e.delete("s", 5).await, Err(stale(5, 5, 2)));
    assert_eq!(e.seal("s", 6).await, Err(WriteError::NotFound));
    assert_eq!(e.delete("never", 1).await, Err(WriteError::NotFound));
    // A higher token creates it afresh at its old next_seq.
    let a = e.append("s", 6, recs(&["new"]), None).await.unwrap();
    assert_eq!((a.first_seq, a.next_seq), (2, 3));
    let s = state(&e, "s");
    assert_eq!((s.deleted, s.first_seq, s.next_seq), (false, 2, 3));
    assert_eq!(
        bodies(&e.read("s", 2, 10, 1 << 20).unwrap()),
        recs(&["new"])
    );
    e.shutdown().await;
}

#[tokio::test]
async fn config_with_and_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        retention_age_s: Some(604_800),
        ..Config::default()
    };
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert_eq!(
        e.set_config("s", None, StreamConfig::default()).await,
        Err(WriteError::NotFound)
    );
    e.fence("s", 4).await.unwrap();
    let c = StreamConfig {
        retention_age_s: Retention::Unlimited,
        retention_bytes: Retention::Limit(1 << 20),
        respect_cursors: true,
    };
    let s = e.set_config("s", None, c).await.unwrap();
    assert_eq!(
        (
            s.retention_age_s,
            s.retention_bytes,
            s.retention_respect_cursors
        ),
        (None, Some(1 << 20), true)
    );
    // A later write's answer carries the settings in force, not the
    // server's defaults (its group did not change them).
    let f = e.fence("s", 5).await.unwrap();
    assert_eq!(
        (
            f.retention_age_s,
            f.retention_bytes,
            f.retention_respect_cursors
        ),
        (None, Some(1 << 20), true)
    );
    assert_eq!(e.set_config("s", Some(3), c).await, Err(stale(3, 5, 0)));
    assert_eq!(
        e.set_config("s", Some(6), StreamConfig::default())
            .await
            .unwrap()
            .highest_token,
        6
    );
    // Back to the server's default.
    assert_eq!(state(&e, "s").retention_age_s, Some(604_800));
    let bad = StreamConfig {
        retention_bytes: Retention::Limit(0),
        ..StreamConfig::default()
    };
    assert!(matches!(
        e.set_config("s", None, bad).await,
        Err(WriteError::BadConfig(_))
    ));
    e.seal("s", 6).await.unwrap();
    assert!(matches!(
        e.set_config("s", Some(6), c).await,
        Err(WriteError::StreamSealed(_))
    ));
    assert_eq!(
        e.set_config("s", None, c).await.unwrap().retention_bytes,
        Some(1 << 20)
    );
    e.shutdown().await;
}

#[tokio::test]
async fn trims_seals_tombstones_configs_and_fence_history_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = StreamConfig {
        retention_bytes: Retention::Limit(5000),
        ..StreamConfig::default()
    };
    {
        let e = Engine::open(dir.path()).unwrap();
        e.append("t", 1, recs(&["a", "b", "c"]), None)
            .await
            .unwrap();
        e.trim("t", 2, 2).await.unwrap();
        e.fence("sealed", 3).await.unwrap();
        e.seal("sealed", 4).await.unwrap();
        e.append("gone", 8, recs(&["x"]), None).await.unwrap();
        e.delete("gone", 9).await.unwrap();
        e.fence("c", 1).await.unwrap();
        e.set_config("c", Some(2), config).await.unwrap();
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    let t = state(&e, "t");
    assert_eq!((t.first_seq, t.next_seq, t.highest_token), (2, 3, 2));
    assert_eq!(bodies(&e.read("t", 2, 10, 1 << 20).unwrap()), recs(&["c"]));
    assert!(matches!(
        e.read("t", 0, 10, 1 << 20),
        Err(ReadError::OutOfRange { first_seq: 2, .. })
    ));
    assert!(matches!(
        e.append("sealed", 5, recs(&["no"]), None).await,
        Err(WriteError::StreamSealed(_))
    ));
    assert_eq!(
        e.append("gone", 9, recs(&["zombie"]), None).await,
        Err(stale(9, 9, 1))
    );
    assert_eq!(state(&e, "c").retention_bytes, Some(5000));
    let h: Vec<(u64, u64, FenceBy)> = e
        .fence_history("t")
        .unwrap()
        .iter()
        .map(|f| (f.token, f.first_seq, f.by))
        .collect();
    assert_eq!(h, vec![(1, 0, FenceBy::Append), (2, 3, FenceBy::Trim)]);
    let h: Vec<FenceBy> = e
        .fence_history("gone")
        .unwrap()
        .iter()
        .map(|f| f.by)
        .collect();
    assert_eq!(h, vec![FenceBy::Append, FenceBy::Delete]);
    assert_eq!(e.recovery_report().streams, 4);
    e.shutdown().await;
}

/// The MANIFEST lists every segment; one missing — the last included —
/// refuses to open, naming it: a last segment deleted while the engine
/// was stopped is not taken for the end of the log.
#[tokio::test]
async fn a_segment_missing_from_the_manifest_refuses_to_open_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_bytes_max: 4096,
        ..Config::default()
    };
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        for i in 0..40 {
            e.append("s", 1, recs(&[&format!("record {i:0>200}")]), None)
                .await
                .unwrap();
        }
        e.shutdown().await;
    }
    let segs = crate::support::segment_files(dir.path());
    assert!(segs.len() >= 3, "{segs:?}");
    assert!(dir.path().join("MANIFEST").exists());
    let last = segs.last().unwrap();
    std::fs::remove_file(dir.path().join(last)).unwrap();
    match Engine::open_with(dir.path(), cfg) {
        Err(fencelog_engine::OpenError::Corrupt(c)) => {
            assert_eq!(&c.file, last);
            assert_eq!(c.reason, "segment listed in the MANIFEST is missing");
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("opened without its last segment"),
    }
}

fn small(segment_bytes: u64) -> Config {
    Config {
        segment_bytes_max: segment_bytes,
        reclaim_interval_ms: 0,
        ..Config::default()
    }
}

/// Segments that hold only trimmed records, a tombstone's records, and the
/// only frames carrying some fences go — after a checkpoint has the state —
/// and a restart remembers every token, seal and tombstone.
#[tokio::test]
async fn reclaimed_segments_take_no_fence_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small(4096);
    let body = "x".repeat(300);
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        // The only frames of these three are in the first segments.
        e.fence("fenced-only", 77).await.unwrap();
        e.append("tomb", 5, recs(&["t"]), None).await.unwrap();
        e.delete("tomb", 6).await.unwrap();
        e.append("sealed", 3, recs(&["s"]), None).await.unwrap();
        e.seal("sealed", 4).await.unwrap();
        for i in 0..60 {
            e.append("bulk", 2, recs(&[&format!("{i}{body}")]), None)
                .await
                .unwrap();
        }
        let before = crate::support::segment_files(dir.path());
        let disk_before = e.disk_bytes();
        // Nothing is trimmed yet, but the early segments hold live records
        // of "sealed" and "bulk": nothing goes.
        let r = e.reclaim().await.unwrap();
        assert!(r.deleted.is_empty(), "{r:?}");
        e.trim("bulk", 2, 55).await.unwrap();
        e.trim("sealed", 4, 1).await.map(drop).unwrap_err(); // sealed: refused
        e.delete("sealed", 4).await.unwrap();
        let r = e.reclaim().await.unwrap();
        assert!(r.checkpoint.is_some());
        assert!(r.deleted.len() >= 3, "{r:?} of {before:?}");
        let after = crate::support::segment_files(dir.path());
        assert!(after.len() < before.len());
        assert!(e.disk_bytes() < disk_before);
        assert_eq!(state(&e, "bulk").first_seq, 55);
        assert_eq!(bodies(&e.read("bulk", 55, 10, 1 << 20).unwrap()).len(), 5);
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert!(e.recovery_report().checkpoint.is_some());
    assert_eq!(e.fence("fenced-only", 76).await, Err(stale(76, 77, 0)));
    assert_eq!(
        e.append("tomb", 6, recs(&["zombie"]), None).await,
        Err(stale(6, 6, 1))
    );
    assert_eq!(
        e.append("sealed", 4, recs(&["zombie"]), None).await,
        Err(stale(4, 4, 1))
    );
    let b = state(&e, "bulk");
    assert_eq!((b.first_seq, b.next_seq, b.highest_token), (55, 60, 2));
    let r = e.read("bulk", 55, 10, 1 << 20).unwrap();
    assert_eq!(
        r.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![55, 56, 57, 58, 59]
    );
    assert!(e.read("bulk", 54, 1, 1 << 20).is_err());
    let h: Vec<FenceBy> = e
        .fence_history("tomb")
        .unwrap()
        .iter()
        .map(|f| f.by)
        .collect();
    assert_eq!(h, vec![FenceBy::Append, FenceBy::Delete]);
    e.shutdown().await;
}

/// A slow stream's one record pins an old segment among dead ones:
/// compaction copies it forward (the same seq, token, timestamp and bytes),
/// the segment goes, and after a restart the record is read from its copy
/// and its stale owner is still refused.
#[tokio::test]
async fn compaction_carries_a_slow_streams_record_forward() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small(4096);
    let body = "f".repeat(300);
    let slow_ts;
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        e.fence("slow", 3).await.unwrap();
        slow_ts = e
            .append("slow", 3, recs(&["the only record"]), None)
            .await
            .unwrap()
            .timestamp_ms;
        for i in 0..60 {
            e.append("fast", 1, recs(&[&format!("{i}{body}")]), None)
                .await
                .unwrap();
        }
        e.trim("fast", 1, 58).await.unwrap();
        let before = crate::support::segment_files(dir.path());
        let r = e.reclaim().await.unwrap();
        assert!(r.compacted >= 1 && r.frames_copied >= 1, "{r:?}");
        assert_eq!(r.dead_on_arrival, 0);
        assert_eq!(r.corrupt_frames, 0);
        let after = crate::support::segment_files(dir.path());
        assert!(after.len() + 2 < before.len(), "{before:?} -> {after:?}");
        assert!(
            !after.contains(&before[0]),
            "the slow record's first segment is still there"
        );
        let got = e.read("slow", 0, 10, 1 << 20).unwrap();
        assert_eq!(
            (
                bodies(&got),
                got.records[0].timestamp_ms,
                got.records[0].fencing_token
            ),
            (recs(&["the only record"]), slow_ts, 3)
        );
        assert!(e.metrics().compaction_bytes_copied.get() > 0);
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    let got = e.read("slow", 0, 10, 1 << 20).unwrap();
    assert_eq!(
        (bodies(&got), got.records[0].timestamp_ms),
        (recs(&["the only record"]), slow_ts)
    );
    assert_eq!(
        e.append("slow", 2, recs(&["stale"]), None).await,
        Err(stale(2, 3, 1))
    );
    assert_eq!(state(&e, "fast").first_seq, 58);
    // A second pass finds nothing more to do.
    let r = e.reclaim().await.unwrap();
    assert_eq!((r.compacted, r.deleted.len()), (0, 0), "{r:?}");
    e.shutdown().await;
}

/// Retention by bytes trims whole frames from the front until the stream
/// holds no more than its limit; the token and `next_seq` stay; a restart
/// keeps the trim point; and a stream under the server default is trimmed
/// the same way while a stream with `Unlimited` keeps everything.
#[tokio::test]
async fn retention_by_bytes_trims_whole_frames_from_the_front() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        retention_bytes: Some(1000),
        ..small(1 << 20)
    };
    let body = "r".repeat(200);
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        for i in 0..10 {
            for s in ["own", "default", "kept"] {
                e.append(s, 3, recs(&[&format!("{i}{body}")]), None)
                    .await
                    .unwrap();
            }
        }
        let own = StreamConfig {
            retention_bytes: Retention::Limit(600),
            ..StreamConfig::default()
        };
        e.set_config("own", None, own).await.unwrap();
        let keep = StreamConfig {
            retention_bytes: Retention::Unlimited,
            ..StreamConfig::default()
        };
        e.set_config("kept", Some(3), keep).await.unwrap();
        let r = e.reclaim().await.unwrap();
        assert_eq!(r.retention_trims, 2, "{r:?}");
        for (s, limit) in [("own", 600), ("default", 1000)] {
            let st = state(&e, s);
            assert!(st.bytes <= limit, "{s}: {st:?}");
            // Whole frames: one more would have fitted only above the limit.
            let frame = st.bytes / (st.next_seq - st.first_seq);
            assert!(st.bytes + frame > limit, "{s} trimmed too far: {st:?}");
            assert_eq!((st.next_seq, st.highest_token), (10, 3));
            let first = e.read(s, st.first_seq, 1, 1 << 20).unwrap();
            assert_eq!(bodies(&first), recs(&[&format!("{}{body}", st.first_seq)]));
        }
        assert_eq!(state(&e, "kept").first_seq, 0);
        // A second pass has nothing more to do.
        assert_eq!(e.reclaim().await.unwrap().retention_trims, 0);
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    let own = state(&e, "own");
    assert!(own.first_seq > 0 && own.bytes <= 600, "{own:?}");
    assert!(matches!(
        e.read("own", own.first_seq - 1, 1, 1 << 20),
        Err(ReadError::OutOfRange { .. })
    ));
    assert_eq!(own.retention_bytes, Some(600));
    assert_eq!(
        e.append("own", 2, recs(&["stale"]), None).await,
        Err(stale(2, 3, 10))
    );
    e.shutdown().await;
}

/// Retention by age trims records older than the limit, and only those.
/// The one sleep is the age itself passing (there is no clock to inject).
#[tokio::test]
async fn retention_by_age_trims_only_expired_records() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open_with(dir.path(), small(1 << 20)).unwrap();
    e.append("s", 4, recs(&["old", "older"]), None)
        .await
        .unwrap();
    let age = StreamConfig {
        retention_age_s: Retention::Limit(1),
        ..StreamConfig::default()
    };
    e.set_config("s", Some(4), age).await.unwrap();
    // Nothing is a second old yet.
    assert_eq!(e.reclaim().await.unwrap().retention_trims, 0);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    e.append("s", 4, recs(&["new"]), None).await.unwrap();
    let r = e.reclaim().await.unwrap();
    assert_eq!(r.retention_trims, 1, "{r:?}");
    let st = state(&e, "s");
    assert_eq!((st.first_seq, st.next_seq, st.highest_token), (2, 3, 4));
    assert_eq!(
        bodies(&e.read("s", 2, 10, 1 << 20).unwrap()),
        recs(&["new"])
    );
    e.shutdown().await;
}

/// Compaction never copies a frame that died before the writer got to it
/// (trimmed between the reclaimer's read and its copy: dead on arrival,
/// nothing written), nor one damaged at rest (the CRC is verified on the
/// way: the segment stays, reads and the next open report the damage).
#[test]
fn compaction_copies_neither_dead_nor_damaged_frames() {
    match crate::support::compaction::compaction_checks() {
        Ok(s) => assert_eq!((s.dead_on_arrival, s.corrupt_frames), (1, 1), "{s:?}"),
        Err(e) => panic!("{e}"),
    }
}
