//! Crash points and I/O faults for the Raft WAL, votes included, on the
//! engine's simulated disk. A script of votes, appends, truncates and
//! purges (and committed ids, which nobody waits for) over three shards runs through the log stores one call at a
//! time. For every storage call: cut the power there (or fail it with
//! each fault kind), resolve what no sync covered every way, reopen, and
//! require exactly what was acknowledged — or that plus the one call in
//! flight. A vote used before it is durable, or an append answered before
//! its fsync, fails this; the deliberate bugs prove it (see `mutations`).
//! And corruption: every bit of the script's WAL flipped in turn, a flip
//! in a group that was durable must refuse the open (never a silent cut
//! of acknowledged entries and votes); one in the unsynced tail is cut.

use fencelog_cluster::raft::TypeConfig;
use fencelog_cluster::wal::{
    LogStore, Wal, WalOpenError, FILE_HEADER_BYTES, GROUP_HEADER_BYTES, WAL_FILE_NAME,
};
use fencelog_engine::sim::{Fault, FaultKind, Resolution, SimStorage};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::testing::{blank_ent, log_id};
use openraft::{RaftLogReader, Vote};
use std::collections::BTreeMap;
use std::sync::Arc;

const SHARDS: u32 = 3;
const ROUNDS: u64 = 12;
/// Indexes read back per shard: the script writes far fewer.
const INDEX_MAX: u64 = 1_000;
/// Every way a power cut resolves what no sync covered, as the suites use.
const RESOLUTIONS: [Resolution; 4] = [
    Resolution::DropAll,
    Resolution::KeepAll,
    Resolution::Random(7),
    Resolution::Random(8),
];

#[derive(Debug, Clone, Copy)]
enum Step {
    Vote {
        shard: u32,
        term: u64,
    },
    Append {
        shard: u32,
        term: u64,
        from: u64,
        n: u64,
    },
    Truncate {
        shard: u32,
        since: u64,
    },
    Purge {
        shard: u32,
        upto: u64,
    },
    /// The committed id (not waited for: written, synced by a later group).
    Committed {
        shard: u32,
        term: u64,
        index: u64,
    },
}

/// What one shard's log must hold: vote term, purge point, index → term.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ShardModel {
    vote: Option<u64>,
    purged: Option<(u64, u64)>,
    entries: BTreeMap<u64, u64>,
}

type Model = BTreeMap<u32, ShardModel>;

fn apply(m: &Model, step: Step) -> Model {
    let mut m = m.clone();
    match step {
        Step::Vote { shard, term } => m.entry(shard).or_default().vote = Some(term),
        Step::Append {
            shard,
            term,
            from,
            n,
        } => {
            let s = m.entry(shard).or_default();
            drop(s.entries.split_off(&from));
            for i in from..from + n {
                s.entries.insert(i, term);
            }
        }
        Step::Truncate { shard, since } => {
            drop(m.entry(shard).or_default().entries.split_off(&since));
        }
        Step::Purge { shard, upto } => {
            let s = m.entry(shard).or_default();
            let term = s.entries[&upto];
            s.entries = s.entries.split_off(&(upto + 1));
            s.purged = Some((term, upto));
        }
        // Advisory: a crash may lose it (checked in `recovered`).
        Step::Committed { .. } => {}
    }
    m
}

/// A fixed script: every shard votes in ever higher terms, appends, and
/// now and then truncates its last entry or purges its first.
fn script() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut m = Model::new();
    for r in 0..ROUNDS {
        let (shard, term) = (
            u32::try_from(r % u64::from(SHARDS)).unwrap(),
            r / u64::from(SHARDS) + 1,
        );
        let s = m.get(&shard).cloned().unwrap_or_default();
        let next = s
            .entries
            .keys()
            .last()
            .map_or(s.purged.map_or(1, |p| p.1 + 1), |l| l + 1);
        let mut round = vec![
            Step::Vote { shard, term },
            Step::Append {
                shard,
                term,
                from: next,
                n: 2,
            },
            Step::Committed {
                shard,
                term,
                index: next,
            },
        ];
        if r % 4 == 3 {
            round.push(Step::Truncate {
                shard,
                since: next + 1,
            });
        }
        if r % 5 == 4 {
            round.push(Step::Purge { shard, upto: next });
        }
        for step in round {
            m = apply(&m, step);
            steps.push(step);
        }
    }
    steps
}

async fn run_step(stores: &mut [LogStore], step: Step) -> bool {
    let r = match step {
        Step::Vote { shard, term } => stores[shard as usize].save_vote(&Vote::new(term, 1)).await,
        Step::Append {
            shard,
            term,
            from,
            n,
        } => {
            let ents = (from..from + n).map(|i| blank_ent::<TypeConfig>(term, 1, i));
            stores[shard as usize].blocking_append(ents).await
        }
        Step::Truncate { shard, since } => {
            stores[shard as usize].truncate(log_id(0, 1, since)).await
        }
        Step::Purge { shard, upto } => stores[shard as usize].purge(log_id(0, 1, upto)).await,
        Step::Committed { shard, term, index } => {
            let id = Some(log_id(term, 1, index));
            stores[shard as usize].save_committed(id).await
        }
    };
    r.is_ok()
}

/// What the script got acknowledged before its first failure, and that
/// plus the failed step (which may or may not be durable). `None` when the
/// WAL did not even open. A failed call must poison the WAL: never a later
/// success built on a failed write.
type Told = Option<(Model, Model)>;

fn run(rt: &tokio::runtime::Runtime, sim: &SimStorage) -> Result<Told, String> {
    let Ok(wal) = Wal::open(Arc::new(sim.clone())) else {
        return Ok(None);
    };
    let mut stores: Vec<LogStore> = (0..SHARDS).map(|k| LogStore::new(wal.clone(), k)).collect();
    let mut acked = Model::new();
    for step in script() {
        let next = apply(&acked, step);
        if !rt.block_on(run_step(&mut stores, step)) {
            let after = *script().last().unwrap();
            if wal.poisoned().is_none() || rt.block_on(run_step(&mut stores, after)) {
                return Err(format!("{step:?} failed but the WAL accepts more"));
            }
            return Ok(Some((acked, next)));
        }
        acked = next;
    }
    Ok(Some((acked.clone(), acked)))
}

/// What a reopened WAL holds, as a model.
fn recovered(rt: &tokio::runtime::Runtime, sim: &SimStorage) -> Result<Model, String> {
    recovered_committed(rt, sim).map(|(m, _)| m)
}

/// The same, and how many shards recovered a committed id.
fn recovered_committed(
    rt: &tokio::runtime::Runtime,
    sim: &SimStorage,
) -> Result<(Model, u32), String> {
    let wal = Wal::open(Arc::new(sim.clone())).map_err(|e| format!("reopen: {e}"))?;
    let mut m = Model::new();
    let mut with_committed = 0;
    for k in 0..SHARDS {
        let mut store = LogStore::new(wal.clone(), k);
        let s = rt.block_on(async {
            let vote = store.read_vote().await.unwrap().map(|v| v.leader_id.term);
            let st = store.get_log_state().await.unwrap();
            let purged = st.last_purged_log_id.map(|p| (p.leader_id.term, p.index));
            let got = store.try_get_log_entries(0..INDEX_MAX).await.unwrap();
            let entries = got
                .iter()
                .map(|e| (e.log_id.index, e.log_id.leader_id.term))
                .collect();
            let committed = store.read_committed().await.unwrap();
            (
                ShardModel {
                    vote,
                    purged,
                    entries,
                },
                committed,
            )
        });
        let (s, committed) = s;
        // A committed id that survived points into what survived: replay
        // stops at the first torn record, so the entries written before
        // the committed id are there (or purged).
        if let Some(c) = committed {
            with_committed += 1;
            let held = s.entries.contains_key(&c.index) || s.purged.is_some_and(|p| p.1 >= c.index);
            if !held {
                return Err(format!(
                    "shard {k}: committed {c} survived without its entry: {s:?}"
                ));
            }
        }
        if s != ShardModel::default() {
            m.insert(k, s);
        }
    }
    wal.close();
    Ok((m, with_committed))
}

/// Purge points carry the term only as the model knows it.
fn normalise(mut m: Model) -> Model {
    m.retain(|_, s| *s != ShardModel::default());
    m.values_mut()
        .for_each(|s| s.purged = s.purged.map(|p| (0, p.1)));
    m
}

fn judge(got: Model, (acked, maybe): &(Model, Model), what: &str) -> Result<(), String> {
    let (got, acked, maybe) = (
        normalise(got),
        normalise(acked.clone()),
        normalise(maybe.clone()),
    );
    if got == acked || got == maybe {
        return Ok(());
    }
    Err(format!(
        "{what}: recovered {got:?}\nacknowledged {acked:?}\nin flight {maybe:?}"
    ))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Every crash point, every resolution; the number of points checked.
pub fn wal_crash_points() -> Result<u64, String> {
    let rt = runtime();
    let dry = SimStorage::new();
    let (all, _) = run(&rt, &dry)?.expect("the dry run opens");
    // The process dies, the machine does not: the lock is free again.
    dry.restart();
    // A violation, not a broken harness: under `WalAckBeforeSync` the
    // script may end between an ack and its write (timing decides), and
    // the dry run is the first to see the acknowledged record missing.
    let (reopened, with_committed) = recovered_committed(&rt, &dry)?;
    // Every shard's committed id is read back after a restart that kept
    // the page cache: the check in `recovered` has something to check.
    if with_committed != SHARDS {
        return Err(format!(
            "{with_committed} of {SHARDS} shards reopened with a committed id"
        ));
    }
    let reopened = normalise(reopened);
    if reopened != normalise(all.clone()) {
        return Err(format!(
            "the dry run does not reopen whole: recovered {reopened:?}\nacknowledged {all:?}"
        ));
    }
    let total = dry.op_count();
    for at in 0..total {
        let sim = SimStorage::new();
        sim.crash_at(at);
        let Some(told) = run(&rt, &sim).map_err(|e| format!("power cut at call {at}: {e}"))? else {
            continue;
        };
        for res in RESOLUTIONS {
            let disk = sim.fork();
            disk.crash(res);
            judge(
                recovered(&rt, &disk)?,
                &told,
                &format!("power cut at call {at}, {res:?}"),
            )?;
        }
    }
    Ok(total)
}

/// Every call failed once with every fault kind; the failure poisons the
/// WAL (checked in `run`), and a crash after it recovers what was told.
pub fn wal_faults() -> Result<u64, String> {
    let rt = runtime();
    let total = {
        let dry = SimStorage::new();
        run(&rt, &dry)?.expect("the dry run opens");
        dry.op_count()
    };
    for at in 0..total {
        for kind in [FaultKind::Eio, FaultKind::NoSpace, FaultKind::ShortWrite] {
            let sim = SimStorage::new();
            sim.inject(Fault {
                at_op: at,
                kind,
                persistent: false,
            });
            let Some(told) = run(&rt, &sim).map_err(|e| format!("{kind:?} at call {at}: {e}"))?
            else {
                continue;
            };
            for res in [Resolution::DropAll, Resolution::KeepAll] {
                let disk = sim.fork();
                disk.crash(res);
                judge(
                    recovered(&rt, &disk)?,
                    &told,
                    &format!("{kind:?} at call {at}, {res:?}"),
                )?;
            }
        }
    }
    Ok(total)
}

/// One group of a WAL file: its bytes, number and `durable_below`.
struct Span {
    start: usize,
    end: usize,
    seq: u64,
    durable_below: u64,
}

/// The groups of a whole version-2 file (read with the layout of
/// `src/wal/codec.rs`, not its code).
fn spans(b: &[u8]) -> Vec<Span> {
    let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let long = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let mut out = Vec::new();
    let mut at = FILE_HEADER_BYTES;
    while at + GROUP_HEADER_BYTES <= b.len() && &b[at..at + 4] == b"FLWG" {
        let end = at + GROUP_HEADER_BYTES + word(at + 4);
        out.push(Span {
            start: at,
            end,
            seq: long(at + 8),
            durable_below: long(at + 16),
        });
        at = end;
    }
    out
}

fn disk_holding(bytes: &[u8]) -> SimStorage {
    let disk = SimStorage::new();
    disk.set_contents(WAL_FILE_NAME, bytes);
    disk
}

/// Every byte of the script's WAL (header and groups) with one bit
/// flipped: a flip in the header, or in a group some later group was
/// written after the sync of, refuses the open as damage at that group; a
/// flip in the tail no sync had covered yet cuts the file there, exactly
/// as if the tail had been torn. The number of bytes checked.
pub fn wal_corruption() -> Result<u64, String> {
    let rt = runtime();
    let dry = SimStorage::new();
    run(&rt, &dry)?.expect("the dry run opens");
    dry.restart();
    let bytes = dry.contents(WAL_FILE_NAME).expect("the WAL exists");
    let groups = spans(&bytes);
    let last = groups.last().ok_or("the script wrote no group")?;
    let (end, tail_from) = (last.end, last.durable_below);
    if groups.iter().filter(|g| g.seq < tail_from).count() < 10 {
        return Err(format!("only {tail_from} durable groups to damage"));
    }
    for at in 0..end {
        let mut b = bytes[..end].to_vec();
        b[at] ^= 0x10;
        let hit = groups.iter().find(|g| g.start <= at && at < g.end);
        let what = format!(
            "bit 4 of byte {at} flipped ({} of {end})",
            hit.map_or("header".into(), |g| format!("group {}", g.seq))
        );
        match hit.filter(|g| g.seq >= tail_from) {
            Some(torn) => {
                let got = recovered(&rt, &disk_holding(&b)).map_err(|e| format!("{what}: {e}"))?;
                let want = recovered(&rt, &disk_holding(&bytes[..torn.start]))?;
                if got != want {
                    return Err(format!(
                        "{what}: recovered {got:?}, not the file cut there: {want:?}"
                    ));
                }
            }
            None => match Wal::open(Arc::new(disk_holding(&b))) {
                Err(WalOpenError::Damaged(d)) if d.offset == hit.map_or(0, |g| g.start) as u64 => {}
                Err(e) => return Err(format!("{what}: {e}")),
                Ok(wal) => {
                    wal.close();
                    return Err(format!(
                        "{what}: a durable group was damaged and the WAL opened anyway"
                    ));
                }
            },
        }
    }
    Ok(end as u64)
}

#[test]
fn every_flipped_bit_of_a_durable_wal_group_refuses_the_open() {
    let bytes = wal_corruption().unwrap();
    assert!(bytes > 1_000, "the script's WAL held {bytes} bytes");
}

/// A failed fdatasync, then a process restart that keeps the page cache,
/// more acknowledged appends, then power loss, resolved every way: the
/// reopened WAL holds every entry acknowledged after the restart and the
/// one whose sync failed, which the restart read back from the cache.
/// Linux may mark a failed sync's pages clean unwritten, so a sync alone
/// at the restart would not reach them (the simulated disk's "limbo"):
/// the open writes the groups no sync was known to cover again first.
#[test]
fn a_failed_sync_then_a_restart_then_power_loss_keeps_what_was_acknowledged() {
    let rt = runtime();
    let entries = |from: u64, to: u64| (from..=to).map(|i| blank_ent::<TypeConfig>(1, 1, i));
    for res in RESOLUTIONS {
        let sim = SimStorage::new();
        let wal = Wal::open(Arc::new(sim.clone())).unwrap();
        let mut store = LogStore::new(wal.clone(), 0);
        rt.block_on(store.blocking_append(entries(1, 2))).unwrap();
        // The next append's group is one write, then its sync.
        sim.inject(Fault {
            at_op: sim.op_count() + 1,
            kind: FaultKind::Eio,
            persistent: false,
        });
        assert!(rt.block_on(store.blocking_append(entries(3, 3))).is_err());
        assert_eq!(sim.faults_fired(), 1, "{res:?}: the sync did not fail");
        wal.close();
        drop((store, wal));
        sim.restart();
        let wal = Wal::open(Arc::new(sim.clone())).unwrap();
        let mut store = LogStore::new(wal.clone(), 0);
        let held = rt
            .block_on(store.try_get_log_entries(0..INDEX_MAX))
            .unwrap();
        assert_eq!(held.len(), 3, "{res:?}: the failed append is read back");
        rt.block_on(store.blocking_append(entries(4, 5))).unwrap();
        wal.close();
        drop((store, wal));
        let disk = sim.fork();
        disk.crash(res);
        let m = recovered(&rt, &disk).unwrap_or_else(|e| panic!("{res:?}: {e}"));
        let got: Vec<u64> = m[&0].entries.keys().copied().collect();
        assert_eq!(got, vec![1, 2, 3, 4, 5], "{res:?}");
    }
}

/// A committed id costs no fdatasync of its own; the next group someone
/// waits for covers it, so a power cut after that group keeps it.
#[test]
fn a_committed_id_is_synced_by_the_next_waited_for_group() {
    let rt = runtime();
    let sim = SimStorage::new();
    let wal = Wal::open(Arc::new(sim.clone())).unwrap();
    let mut store = LogStore::new(wal.clone(), 0);
    rt.block_on(async {
        let ents = (1..=2).map(|i| blank_ent::<TypeConfig>(1, 1, i));
        store.blocking_append(ents).await.unwrap();
        let synced = wal.fsyncs();
        store.save_committed(Some(log_id(1, 1, 2))).await.unwrap();
        let ents = (3..=3).map(|i| blank_ent::<TypeConfig>(1, 1, i));
        store.blocking_append(ents).await.unwrap();
        assert_eq!(
            wal.fsyncs(),
            synced + 1,
            "one sync for the append, none for the id"
        );
    });
    wal.close();
    let disk = sim.fork();
    disk.crash(Resolution::DropAll);
    let wal = Wal::open(Arc::new(disk)).unwrap();
    let mut store = LogStore::new(wal.clone(), 0);
    let committed = rt.block_on(store.read_committed()).unwrap();
    assert_eq!(committed, Some(log_id(1, 1, 2)));
    wal.close();
}

#[test]
fn every_wal_crash_point_recovers_what_was_acknowledged() {
    let points = wal_crash_points().unwrap();
    assert!(points > 60, "the script made {points} storage calls");
}

#[test]
fn every_wal_io_fault_poisons_and_recovers_what_was_acknowledged() {
    wal_faults().unwrap();
}

/// The tests of the tests: each deliberate bug of the WAL fails the crash
/// points (the cluster's dev build always has its `mutations`).
mod mutations {
    use fencelog_cluster::{set_mutation, Mutation};

    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            set_mutation(Mutation::None);
        }
    }

    /// `suite` fails with the deliberate bug `m` on.
    fn caught(m: Mutation, suite: fn() -> Result<u64, String>) {
        let _off = Off;
        set_mutation(m);
        let r = suite();
        assert!(r.is_err(), "{m:?} was not caught");
        eprintln!(
            "{m:?} caught: {}",
            r.unwrap_err().lines().next().unwrap_or("")
        );
    }

    #[test]
    fn a_vote_used_before_its_fsync_is_caught() {
        caught(Mutation::WalVoteUnsynced, super::wal_crash_points);
    }

    #[test]
    fn an_append_acknowledged_before_its_fsync_is_caught() {
        caught(Mutation::WalAckBeforeSync, super::wal_crash_points);
    }

    #[test]
    fn damage_read_as_a_torn_tail_is_caught() {
        caught(Mutation::WalCutsDamage, super::wal_corruption);
    }
}
