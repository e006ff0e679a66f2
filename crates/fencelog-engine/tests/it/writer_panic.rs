//! A panic on the writer thread poisons the engine exactly like
//! a storage failure. The group in flight is answered `StorageFailed`
//! (outcome unknown), every later write `Poisoned`, the engine reports
//! itself unhealthy, reads of acknowledged records keep working although
//! the panic poisoned the std lock of that stream's index, the writer keeps
//! answering (a shutdown completes), and a reopen recovers everything that
//! was durable. The panic comes from `Mutation::PanicMidGroup`, which fires
//! while publishing a records frame onto a stream that already has indexed
//! frames, holding that stream's index lock.

use crate::protocol_sim::{run_seed, runtime};
use crate::support::gate::{bodies, open_controlled, poll_once, recs, until_held, Control};
use fencelog_engine::{
    set_mutation, Config, Engine, Mutation, ReadError, StorageFailure, WriteError,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Switches the thread's mutation off again when dropped, even if the test
/// panicked.
struct Off;

impl Drop for Off {
    fn drop(&mut self) {
        set_mutation(Mutation::None);
    }
}

/// Bounds every wait on the engine, so a writer that died or hangs fails
/// the test instead of stalling it.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_writer_panic_poisons_the_engine_and_reads_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let off = Off;
    set_mutation(Mutation::PanicMidGroup);
    let (e, ctl) = open_controlled(dir.path(), Config::default());
    let failure = panic_in_a_group(&e, &ctl).await;
    assert_eq!(e.poisoned(), Some(failure.clone()));
    assert!(!e.is_healthy());
    later_writes_are_refused(&e, &ctl, &failure).await;
    acknowledged_records_are_served(&e).await;
    tokio::time::timeout(ANSWER_WAIT, e.shutdown())
        .await
        .expect("the writer thread still answers a shutdown");
    drop(e);
    drop(off);
    reopen_recovers_the_durable_group(dir.path()).await;
}

/// Acknowledges "d0", "d1" on s and "x0" on x, then makes a group of "b"
/// on s and a fence creating t panic after its sync, publishing "b" under
/// s's index lock. Returns the failure the group was answered with.
async fn panic_in_a_group(e: &Engine, ctl: &Arc<Control>) -> Arc<StorageFailure> {
    // The first frame of a stream does not trigger the panic.
    e.append("s", 1, recs(&["d0", "d1"]), None).await.unwrap();
    // Group 1 ("x", a new stream) succeeds; group 2 forms behind it.
    ctl.hold_next_sync();
    let mut x = Box::pin(e.append("x", 1, recs(&["x0"]), None));
    assert!(poll_once(&mut x).is_none());
    until_held(ctl).await;
    let mut b = Box::pin(e.append("s", 1, recs(&["b"]), None));
    let mut t = Box::pin(e.fence("t", 3));
    assert!(poll_once(&mut b).is_none());
    assert!(poll_once(&mut t).is_none());
    ctl.release();
    assert_eq!(x.await.unwrap().first_seq, 0);

    let failure = match tokio::time::timeout(ANSWER_WAIT, b).await.unwrap() {
        Err(WriteError::StorageFailed(f)) => f,
        other => panic!("expected StorageFailed, got {other:?}"),
    };
    assert_eq!(failure.op, "writer panic");
    assert_eq!(failure.file, "");
    assert_eq!(
        failure.message,
        "mutation PanicMidGroup: the writer panics publishing s"
    );
    assert_eq!(
        failure.to_string(),
        "writer panic: mutation PanicMidGroup: the writer panics publishing s"
    );
    assert_eq!(t.await, Err(WriteError::StorageFailed(failure.clone())));
    failure
}

/// The writer thread is alive and refuses every later write without disk
/// work, as after a failed fdatasync.
async fn later_writes_are_refused(e: &Engine, ctl: &Control, failure: &Arc<StorageFailure>) {
    let syncs_before = ctl.syncs();
    let poisoned = Err(WriteError::Poisoned(failure.clone()));
    assert_eq!(e.append("s", 1, recs(&["later"]), None).await, poisoned);
    assert_eq!(e.append("new", 1, recs(&["later"]), None).await, poisoned);
    assert_eq!(
        e.fence("x", 5).await,
        Err(WriteError::Poisoned(failure.clone()))
    );
    assert_eq!(ctl.syncs(), syncs_before);
}

/// Reads of acknowledged records, through the index whose lock the panic
/// poisoned: exactly what was acknowledged, nothing of the failed group.
async fn acknowledged_records_are_served(e: &Engine) {
    let r = e.read("s", 0, 10, 1 << 20).unwrap();
    assert_eq!((bodies(&r), r.next_seq), (recs(&["d0", "d1"]), 2));
    assert_eq!(r.records[1].seq, 1);
    assert_eq!(e.read("s", 2, 10, 1 << 20).map(|r| r.records.len()), Ok(0));
    assert_eq!(bodies(&e.read("x", 0, 10, 1 << 20).unwrap()), recs(&["x0"]));
    assert_eq!(e.state("s").unwrap().highest_token, 1);
    assert_eq!(e.state("t"), Err(ReadError::NotFound));
    let names: Vec<String> = e
        .list_streams("", None, 10)
        .into_iter()
        .map(|s| s.stream)
        .collect();
    assert_eq!(names, vec!["s", "x"]);
    let wait = e.wait_for("s", 2, Duration::from_secs(3600));
    let next = tokio::time::timeout(ANSWER_WAIT, wait)
        .await
        .expect("wait_for returns on a poisoned engine")
        .unwrap();
    assert_eq!(next, 2);
}

/// The failed group was synced before it panicked: a reopen (without the
/// mutation) recovers it along with everything acknowledged.
async fn reopen_recovers_the_durable_group(dir: &Path) {
    let e = Engine::open(dir).unwrap();
    let r = e.read("s", 0, 10, 1 << 20).unwrap();
    assert_eq!((bodies(&r), r.next_seq), (recs(&["d0", "d1", "b"]), 3));
    assert_eq!(e.state("t").unwrap().highest_token, 3);
    assert_eq!(bodies(&e.read("x", 0, 10, 1 << 20).unwrap()), recs(&["x0"]));
    assert!(e.is_healthy());
    let ack = e.append("s", 1, recs(&["again"]), None).await.unwrap();
    assert_eq!(ack.first_seq, 3);
    e.shutdown().await;
}

/// Seeds of the protocol simulation run with the writer panicking.
const SIM_SEEDS: u64 = 20;

/// The protocol simulation treats a poisoned engine as a storage fault: the
/// outcome of the group in flight is unknown, nothing is acknowledged after
/// it, and a reopen must keep everything acknowledged before. With the
/// writer panicking in (nearly) every engine it opens, every check of the
/// simulation still holds.
#[test]
fn the_protocol_holds_when_the_writer_panics() {
    let _off = Off;
    set_mutation(Mutation::PanicMidGroup);
    let rt = runtime();
    for seed in 0..SIM_SEEDS {
        if let Err(e) = run_seed(&rt, seed, 500) {
            panic!("seed {seed} with a panicking writer: {e}");
        }
    }
}
