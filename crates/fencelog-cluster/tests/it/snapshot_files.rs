//! Snapshots on disk (`src/snapshot/dir.rs`): a snapshot is the state at its
//! LogId however many entries are applied after it, holds links to the
//! sealed segments and a copy of the active one, installs on another
//! replica with exactly that state, and its directory goes when the last
//! handle does, or when a reclamation pass deleted segments it links (a
//! snapshot of the state after the pass replaces it); an install cut
//! short at each step reopens old or new whole; transfers from two nodes
//! interleave. The deliberate bug `SnapshotLinksActiveSegment` (a link to
//! the active segment) is caught here.

use crate::support::{append, eventually, fails_under_with};
use fencelog_cluster::raft::{shard_engine_config, Batch, Entry, ShardSm, Snapshot};
use fencelog_cluster::snapshot::{Chunk, Manifest, SnapFile};
use fencelog_cluster::Mutation;
use fencelog_engine::{Config, WriteOp};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::testing::log_id;
use openraft::EntryPayload;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// Small segments, so a few hundred appends fill several.
fn small_segments() -> Config {
    shard_engine_config(&Config {
        segment_bytes_max: 16 << 10,
        ..Config::default()
    })
}

/// Entries `from..to` (log index = i + 1), each appending `body i` to `s`.
fn appends(from: u64, to: u64) -> Vec<Entry> {
    (from..to)
        .map(|i| Entry {
            log_id: log_id(1, 1, i + 1),
            payload: EntryPayload::Normal(Batch {
                leader_ts_ms: 1_000 + i,
                ops: vec![append("s", 1, &format!("{i:0>500}"))],
            }),
        })
        .collect()
}

/// A snapshot of `sm` now.
async fn snapshot_of(sm: &mut ShardSm) -> Snapshot {
    sm.get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap()
}

/// A shard in `dir/l` with 200 appends (several segments) and a
/// snapshot of them: the shard, the snapshot and its directory.
async fn shard_with_snapshot(dir: &TempDir) -> (ShardSm, Snapshot, PathBuf) {
    let mut sm = ShardSm::open(&dir.path().join("l"), small_segments()).unwrap();
    sm.apply(appends(0, 200)).await.unwrap();
    let snap = snapshot_of(&mut sm).await;
    let path = snap.snapshot.dir.as_ref().unwrap().path().to_path_buf();
    (sm, snap, path)
}

fn bodies(sm: &ShardSm) -> Vec<Vec<u8>> {
    let batch = sm.engine().read("s", 0, 100_000, 1 << 30).unwrap();
    batch.records.iter().map(|r| r.body.to_vec()).collect()
}

fn inode(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().ino()
}

async fn a_snapshot_is_its_log_ids_state_while_applies_go_on() {
    let dir = TempDir::new().unwrap();
    let (mut leader, snap, snap_dir) = shard_with_snapshot(&dir).await;
    let at_capture = bodies(&leader);
    assert_eq!(snap.meta.last_log_id, Some(log_id(1, 1, 200)));

    // Links for sealed segments, a copy of the active one.
    let data = &snap.snapshot;
    let engine_dir = leader.engine_dir();
    let segments: Vec<_> = data
        .files
        .iter()
        .filter(|f| f.name.ends_with(".seg"))
        .map(|f| f.name.clone())
        .collect();
    assert!(segments.len() >= 3, "{segments:?}");
    let (active, sealed) = segments.split_last().unwrap();
    for name in sealed {
        assert_eq!(
            inode(&snap_dir.join(name)),
            inode(&engine_dir.join(name)),
            "{name}"
        );
    }

    // The leader goes on, first within its active segment (one small
    // group per apply), then into new ones; the snapshot does not move.
    for i in 200..210 {
        leader.apply(appends(i, i + 1)).await.unwrap();
    }
    leader.apply(appends(210, 300)).await.unwrap();
    assert_eq!(bodies(&leader).len(), 300);
    let follower_dir = dir.path().join("f");
    let mut follower = ShardSm::open(&follower_dir, small_segments()).unwrap();
    let mut received = follower.begin_receiving_snapshot().await.unwrap();
    *received = (*snap.snapshot).clone();
    follower
        .install_snapshot(&snap.meta, received)
        .await
        .unwrap();
    assert_eq!(
        follower.applied_state().await.unwrap().0,
        Some(log_id(1, 1, 200))
    );
    assert_eq!(bodies(&follower), at_capture);
    assert_eq!(at_capture.len(), 200);
    // The follower's engine writes its own copy of the active segment.
    follower.apply(appends(200, 210)).await.unwrap();
    let installed = follower.engine_dir();
    assert_ne!(
        inode(&installed.join(active)),
        inode(&snap_dir.join(active))
    );
    assert_eq!(bodies(&follower).len(), 210);

    // A newer snapshot replaces the first, whose directory then goes once
    // the follower (whose current snapshot it is) is gone too.
    drop(snap);
    follower.shutdown().await;
    drop(follower);
    let newer = snapshot_of(&mut leader).await;
    assert!(!snap_dir.exists(), "{} is still there", snap_dir.display());
    let newer_dir = newer.snapshot.dir.as_ref().unwrap().path().to_path_buf();
    assert!(newer_dir.exists());
    // A restart removes every snapshot directory (rebuilt on demand).
    drop(newer);
    leader.shutdown().await;
    drop(leader);
    ShardSm::open(&dir.path().join("l"), small_segments()).unwrap();
    assert!(
        !newer_dir.exists(),
        "{} survived a reopen",
        newer_dir.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_holds_its_state_links_sealed_segments_and_goes_with_its_last_handle() {
    a_snapshot_is_its_log_ids_state_while_applies_go_on().await;
}

#[test]
fn a_snapshot_that_links_the_active_segment_is_caught() {
    fails_under_with(
        Mutation::SnapshotLinksActiveSegment,
        a_snapshot_is_its_log_ids_state_while_applies_go_on,
        "holds applied",
    );
}

/// A delete's reclamation pass deletes the stream's segments; the current
/// snapshot, which links them, is replaced by one of the state after the
/// pass, so their disk space goes now and not at the next scheduled
/// snapshot (on an idle shard, never).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_that_deletes_segments_replaces_the_snapshot_linking_them() {
    let dir = TempDir::new().unwrap();
    let (mut sm, first, first_dir) = shard_with_snapshot(&dir).await;
    let linked: Vec<String> = first
        .snapshot
        .files
        .iter()
        .map(|f| f.name.clone())
        .collect();
    drop(first);
    let delete = Entry {
        log_id: log_id(1, 1, 201),
        payload: EntryPayload::Normal(Batch {
            leader_ts_ms: 2_000,
            ops: vec![WriteOp::Delete {
                stream: "s".into(),
                token: 1,
            }],
        }),
    };
    sm.apply(vec![delete]).await.unwrap();
    eventually("the linking snapshot to go", || async {
        (!first_dir.exists()).then_some(())
    })
    .await;
    let now = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(now.meta.last_log_id, Some(log_id(1, 1, 201)));
    let still: Vec<_> = now
        .snapshot
        .files
        .iter()
        .filter(|f| f.name.ends_with(".seg") && linked.contains(&f.name))
        .collect();
    assert!(linked.iter().filter(|n| n.ends_with(".seg")).count() >= 3);
    assert!(still.len() <= 1, "the new snapshot still links {still:?}");
}

fn chunk(from: u64, id: &str, offset: u64, data: &[u8]) -> Chunk {
    Chunk {
        from,
        snapshot_id: id.into(),
        name: "MANIFEST".into(),
        offset,
        crc32: crc32fast::hash(data),
        data: data.to_vec(),
    }
}

/// Transfers from two nodes at once (a deposed leader still sending, the
/// new one starting) each arrive whole: one does not restart the other.
#[tokio::test]
async fn transfers_from_two_nodes_interleave_without_restarting_each_other() {
    let dir = TempDir::new().unwrap();
    let sm = ShardSm::open(&dir.path().join("f"), small_segments()).unwrap();
    sm.receive_chunk(&chunk(2, "a", 0, b"from ")).unwrap();
    sm.receive_chunk(&chunk(3, "b", 0, b"from ")).unwrap();
    sm.receive_chunk(&chunk(2, "a", 5, b"two")).unwrap();
    sm.receive_chunk(&chunk(3, "b", 5, b"three")).unwrap();
    for (from, id, body) in [(2, "a", &b"from two"[..]), (3, "b", b"from three")] {
        let manifest = Manifest {
            from,
            files: vec![SnapFile {
                name: "MANIFEST".into(),
                len: body.len() as u64,
            }],
        };
        let got = sm.received(id, &manifest).unwrap();
        let path = got.dir.as_ref().unwrap().path().join("MANIFEST");
        assert_eq!(std::fs::read(path).unwrap(), body);
        // Handed over once.
        let e = sm.received(id, &manifest).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("no chunks of snapshot {id} from node {from} arrived")
        );
    }
}

/// What arrived of a transfer, the resume point: only for the same
/// sender and snapshot, each file at the length its checked chunks made.
#[tokio::test]
async fn what_arrived_is_answered_for_the_same_sender_and_snapshot_only() {
    let dir = TempDir::new().unwrap();
    let sm = ShardSm::open(&dir.path().join("f"), small_segments()).unwrap();
    assert_eq!(sm.received_so_far(2, "a").unwrap(), vec![]);
    sm.receive_chunk(&chunk(2, "a", 0, b"from ")).unwrap();
    sm.receive_chunk(&chunk(2, "a", 5, b"two")).unwrap();
    let manifest = |len| SnapFile {
        name: "MANIFEST".into(),
        len,
    };
    assert_eq!(sm.received_so_far(2, "a").unwrap(), vec![manifest(8)]);
    assert_eq!(
        sm.received_so_far(2, "b").unwrap(),
        vec![],
        "another snapshot"
    );
    assert_eq!(
        sm.received_so_far(3, "a").unwrap(),
        vec![],
        "another sender"
    );
    // A refused chunk drops the transfer: nothing to resume from.
    let mut bad = chunk(2, "a", 8, b"!");
    bad.crc32 ^= 1;
    sm.receive_chunk(&bad).unwrap_err();
    assert_eq!(sm.received_so_far(2, "a").unwrap(), vec![]);
}

/// Snapshot ids never repeat across opens of a shard, even at the same
/// LogId: a receiver resumes a transfer by its id, so an id reused for
/// another capture (another file layout after a restart) would mix them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_ids_differ_across_opens_at_the_same_log_id() {
    let dir = TempDir::new().unwrap();
    let root = dir.path().join("l");
    let mut ids = Vec::new();
    for round in 0..2 {
        let mut sm = ShardSm::open(&root, small_segments()).unwrap();
        if round == 0 {
            sm.apply(appends(0, 20)).await.unwrap();
        }
        let snap = snapshot_of(&mut sm).await;
        assert_eq!(snap.meta.last_log_id, Some(log_id(1, 1, 20)));
        ids.push(snap.meta.snapshot_id.clone());
        drop(snap);
        sm.shutdown().await;
    }
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| id.starts_with("1-1-20-1-")), "{ids:?}");
}

/// A snapshot install cut short at each of its steps (the staging
/// directory written; renamed to the next generation; CURRENT moved)
/// reopens as the old state or the snapshot's, whole, and the other
/// generation is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_install_cut_short_at_each_step_reopens_old_or_new_whole() {
    let dir = TempDir::new().unwrap();
    let (_leader, _snap, src) = shard_with_snapshot(&dir).await;
    let root = dir.path().join("f");
    let mut f = ShardSm::open(&root, small_segments()).unwrap();
    f.apply(appends(0, 50)).await.unwrap();
    f.shutdown().await;
    drop(f);
    let active = fencelog_cluster::snapshot::Active::Copied;
    let next = root.join("gen-000001");
    for (step, current) in [("staging", "0"), ("renamed", "0"), ("switched", "1")] {
        let staging = root.join("gen-000001.staging");
        fencelog_cluster::snapshot::capture(&src, &staging, true, active).unwrap();
        if step != "staging" {
            std::fs::rename(&staging, &next).unwrap();
        }
        std::fs::write(root.join("CURRENT"), current).unwrap();
        let mut f = ShardSm::open(&root, small_segments()).unwrap();
        let (applied, records) = match current {
            "0" => (log_id(1, 1, 50), 50),
            _ => (log_id(1, 1, 200), 200),
        };
        assert_eq!(f.applied_state().await.unwrap().0, Some(applied), "{step}");
        assert_eq!(bodies(&f).len(), records, "{step}");
        let gens: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("gen-"))
            .collect();
        let kept = format!("gen-00000{current}");
        assert_eq!(gens, [kept], "{step}");
        f.shutdown().await;
        drop(f);
    }
}
