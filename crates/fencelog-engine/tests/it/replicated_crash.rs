//! The replicated write path (`Engine::apply_batch`, a cluster
//! node's Raft apply) under power loss at every storage call and under an
//! I/O error at every call. Every entry's ops are applied with its Applied
//! marker in one durable group, so whatever the disk kept:
//!
//! - the recovered applied index `m` is at least the last entry known
//!   durable, and at most the last one that was tried;
//! - the recovered state is exactly the state after entries `1..=m` of a
//!   run without faults (no entry half applied, none applied twice);
//! - applying `m+1..` again — what openraft does after a restart — gives
//!   the same answers as the faultless run and ends in its final state.
//!
//! Both durability modes run the suites. In `EveryGroup` every answered
//! entry is known durable; in `OnFlush` (what a cluster's shard engines
//! run) only the entries before the last answered [`Engine::flush`] are —
//! the run flushes every [`FLUSH_EVERY`] entries and at its end — and
//! recovery must still open whatever the disk kept (unsynced groups reach
//! it in any order) and find an applied prefix.
//!
//! Each suite runs twice: entries applied one call each
//! ([`Engine::apply_batch`]) and consecutive entries applied in one call
//! ([`Engine::apply_entries`], as a node applies what one commit step
//! hands over), where several entries' markers share a group and a marker
//! that leaves membership unchanged must carry the one before it.
//!
//! The script covers every replicated op: appends (stale ones too),
//! fences, config, cursor commits, a multi-stream batch, trims, a
//! retention trim, a seal, a delete and a recreation, with segment rolls
//! and reclamation passes (checkpoints carry the applied position).

use crate::replicated::{append, fence};
use crate::support::runtime;
use bytes::Bytes;
use fencelog_engine::sim::{Fault, FaultKind, Resolution, Rng, SimStorage};
use fencelog_engine::{
    AppliedState, BatchAction, BatchOp, Config, Durability, Engine, OpenError, ReadError,
    Retention, StreamConfig, WriteOp,
};
use std::sync::Arc;

const STREAMS: [&str; 3] = ["a", "b", "c"];
/// Entries after which a reclamation pass runs (as a node's apply queues
/// one after a trim, delete or retention trim).
const RECLAIM_AFTER: [u64; 3] = [7, 11, 18];
/// In `OnFlush`, the run flushes after every this many entries (and after
/// the last): the entries before a flush answered are the durable floor.
pub const FLUSH_EVERY: u64 = 4;

fn config(mode: Durability) -> Config {
    Config {
        // Small segments: the script rolls several times.
        segment_bytes_max: 4096,
        reclaim_interval_ms: 0,
        retention_in_reclaim: false,
        durability: mode,
        ..Config::default()
    }
}

fn open(sim: &SimStorage, mode: Durability) -> Result<Engine, OpenError> {
    Engine::open_storage(Arc::new(sim.clone()), config(mode))
}

/// Entries that change membership (the others leave it unchanged).
const MEMBERSHIP_AT: [u64; 3] = [2, 9, 13];

fn mark(index: u64) -> AppliedState {
    let membership = match MEMBERSHIP_AT.contains(&index) {
        true => format!("members at {index}").into_bytes(),
        false => Vec::new(),
    };
    AppliedState {
        term: 2,
        node_id: 1,
        index,
        membership,
    }
}

/// How a suite applies the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct How {
    pub mode: Durability,
    /// Consecutive entries (up to the next reclamation pass or flush) in
    /// one `apply_entries` call, else one `apply_batch` each.
    pub together: bool,
}

/// Entry `i` (from 1) is `script()[i - 1]`, applied at `1_000 * i` ms.
fn script() -> Vec<Vec<WriteOp>> {
    let big = |i: usize| "x".repeat(300 + i);
    let mut s = vec![
        vec![append("a", 5, "a0"), append("b", 3, "b0"), fence("c", 7)],
        vec![
            append("a", 5, "a1"),
            append("a", 4, "stale"),
            WriteOp::Config {
                stream: "a".into(),
                token: Some(5),
                config: StreamConfig {
                    retention_age_s: Retention::Limit(3600),
                    ..StreamConfig::default()
                },
            },
        ],
        vec![
            WriteOp::Cursor {
                stream: "a".into(),
                name: "reader".into(),
                token: 1,
                seq: 1,
            },
            append("c", 7, "c0"),
        ],
        vec![fence("a", 9), append("a", 5, "stale"), append("a", 9, "a2")],
        vec![WriteOp::Batch {
            ops: vec![
                BatchOp {
                    stream: "b".into(),
                    fencing_token: 3,
                    action: BatchAction::Append {
                        records: vec![Bytes::from_static(b"b1"), Bytes::from_static(b"b2")],
                        match_seq_num: Some(1),
                    },
                },
                BatchOp {
                    stream: "c".into(),
                    fencing_token: 8,
                    action: BatchAction::Fence,
                },
            ],
            not_after_ms: None,
        }],
        vec![WriteOp::Trim {
            stream: "a".into(),
            token: 9,
            trim_seq: 1,
            not_after_ms: None,
        }],
        vec![WriteOp::Retain {
            stream: "b".into(),
            first_seq: 2,
        }],
        vec![WriteOp::Seal {
            stream: "c".into(),
            token: 8,
            not_after_ms: None,
        }],
        vec![append("c", 8, "after the seal"), append("c", 2, "stale")],
        vec![WriteOp::Delete {
            stream: "b".into(),
            token: 3,
        }],
        vec![append("b", 2, "stale"), append("b", 4, "reborn")],
    ];
    // Enough bytes to roll the 4 KiB segments a few times.
    for i in 0..10 {
        s.push(vec![append("a", 9, &big(i)), append("b", 4, &big(i + 50))]);
    }
    s.push(vec![WriteOp::Trim {
        stream: "a".into(),
        token: 9,
        trim_seq: 8,
        not_after_ms: None,
    }]);
    s
}

/// Everything a reader can see of the engine, in one comparable string.
fn digest(e: &Engine) -> String {
    let applied = e
        .applied()
        .map(|a| (a.index, String::from_utf8_lossy(&a.membership).into_owned()));
    let mut out = format!("applied {applied:?}\n");
    for name in STREAMS {
        let state = match e.state(name) {
            Ok(s) => s,
            Err(ReadError::NotFound) => {
                out.push_str(&format!("{name}: none\n"));
                continue;
            }
            Err(err) => return format!("{name}: state failed: {err}"),
        };
        out.push_str(&format!("{state:?}\n"));
        if !state.deleted && state.first_seq < state.next_seq {
            match e.read(name, state.first_seq, usize::MAX, usize::MAX) {
                Ok(r) => out.push_str(&format!("{:?}\n", r.records)),
                Err(err) => out.push_str(&format!("{name}: read failed: {err}\n")),
            }
        }
        out.push_str(&format!("cursors {:?}\n", e.cursors(name).ok()));
    }
    out
}

/// One entry's answers, as text (the results are compared, not used).
type Answers = String;

/// `answers` as text, every state's `bytes` left out: it is the stream's
/// size when the group is published, which counts what later entries of
/// the same group wrote (so it depends on grouping; nothing else does).
fn answer_text<T: std::fmt::Debug>(answers: &T) -> Answers {
    let text = format!("{answers:?}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    const FIELD: &str = ", bytes: ";
    while let Some(at) = rest.find(FIELD) {
        out.push_str(&rest[..at]);
        rest = rest[at + FIELD.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push_str(", bytes: _");
    }
    out.push_str(rest);
    out
}

/// Where a run stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// An entry's apply failed: it may or may not be durable.
    Apply,
    /// A reclamation pass failed after the last answered entry.
    Reclaim,
    /// A flush failed after the last answered entry.
    Flush,
}

/// How far a run got: answers given, where it stopped if early, and the
/// last entry known durable (answered, or before an answered flush).
struct Run {
    answers: Vec<Answers>,
    stop: Option<Stop>,
    durable: u64,
    /// The last entry sent to the engine.
    tried: u64,
}

/// What a faultless run answers to each entry, and the state after each
/// prefix (`states[m]`: after entries `1..=m`).
struct Golden {
    answers: Vec<Answers>,
    states: Vec<String>,
}

/// Applies entries `from..=to` (from 1) of the script; stops at the first
/// engine failure. The run's flushes (in `OnFlush`) and reclamation passes
/// fall where they would in a run of the whole script; applied together,
/// the entries between two of them go in one call.
async fn apply_range(e: &Engine, script: &[Vec<WriteOp>], (from, to): (u64, u64), how: How) -> Run {
    let mut run = Run {
        answers: Vec::new(),
        stop: None,
        durable: from - 1,
        tried: from - 1,
    };
    let last = script.len() as u64;
    let flushes =
        |i: u64| how.mode == Durability::OnFlush && (i.is_multiple_of(FLUSH_EVERY) || i == last);
    let mut i = from;
    while i <= to {
        let mut end = i;
        while how.together && end < to && !RECLAIM_AFTER.contains(&end) && !flushes(end) {
            end += 1;
        }
        let entries = (i..=end)
            .map(|k| (mark(k), 1_000 * k, script[k as usize - 1].clone()))
            .collect();
        match e.apply_entries(entries).await {
            Ok(all) => run.answers.extend(all.iter().map(answer_text)),
            // Which of the call's entries were applied is not known: the
            // floor stays before them, the run counts them tried.
            Err(_) => {
                return Run {
                    stop: Some(Stop::Apply),
                    tried: end,
                    ..run
                }
            }
        }
        if how.mode == Durability::EveryGroup {
            run.durable = end;
        }
        if RECLAIM_AFTER.contains(&end) && e.reclaim().await.is_err() {
            return Run {
                stop: Some(Stop::Reclaim),
                tried: end,
                ..run
            };
        }
        if flushes(end) {
            if e.flush().await.is_err() {
                return Run {
                    stop: Some(Stop::Flush),
                    tried: end,
                    ..run
                };
            }
            run.durable = end;
        }
        run.tried = end;
        i = end + 1;
    }
    run
}

/// Applies entries `from..` to the end of the script.
async fn apply_from(e: &Engine, script: &[Vec<WriteOp>], from: u64, how: How) -> Run {
    apply_range(e, script, (from, script.len() as u64), how).await
}

fn golden(
    rt: &tokio::runtime::Runtime,
    script: &[Vec<WriteOp>],
    mode: Durability,
) -> (Golden, SimStorage) {
    let sim = SimStorage::new();
    let e = open(&sim, mode).expect("a fresh disk opens");
    let checkpoints_before = e.metrics().checkpoints.get();
    let mut g = Golden {
        answers: Vec::new(),
        states: vec![digest(&e)],
    };
    for i in 1..=script.len() as u64 {
        let one = How {
            mode,
            together: false,
        };
        let mut run = rt.block_on(apply_range(&e, script, (i, i), one));
        assert_eq!(run.stop, None, "entry {i} failed without a fault");
        g.answers.append(&mut run.answers);
        g.states.push(digest(&e));
    }
    // Crashing inside rolls and checkpoints proves something only if the
    // script makes them: two segments and more, and a checkpoint (which
    // carries the applied position) from a reclamation pass.
    let creates = sim.op_counts().get("create").copied().unwrap_or(0);
    assert!(
        creates >= 4,
        "the script rolled too little: {creates} files created"
    );
    assert!(
        e.metrics().checkpoints.get() > checkpoints_before,
        "no reclamation pass wrote a checkpoint"
    );
    (g, sim)
}

/// Opens the disk after a crash and checks it against the faultless run:
/// entries up to `durable` were known durable, `tried` were sent.
fn check_recovered(
    rt: &tokio::runtime::Runtime,
    disk: &SimStorage,
    (script, how): (&[Vec<WriteOp>], How),
    g: &Golden,
    (durable, tried): (u64, u64),
) -> Result<(), String> {
    let e = open(disk, how.mode).map_err(|e| format!("recovery refused: {e}"))?;
    let m = e.applied().map_or(0, |a| a.index);
    if m < durable || m > tried {
        return Err(format!(
            "applied index {m} after {durable} known durable and {tried} tried"
        ));
    }
    let got = digest(&e);
    if got != g.states[m as usize] {
        return Err(format!(
            "the state at applied index {m} is not the faultless one:\n{got}\nwanted:\n{}",
            g.states[m as usize]
        ));
    }
    let run = rt.block_on(apply_from(&e, script, m + 1, how));
    if run.stop.is_some() {
        return Err(format!("applying from {} after recovery failed", m + 1));
    }
    for (k, a) in run.answers.iter().enumerate() {
        let i = m as usize + 1 + k;
        if a != &g.answers[i - 1] {
            return Err(format!(
                "entry {i} applied again after recovery answered {a:?}, the faultless run {:?}",
                g.answers[i - 1]
            ));
        }
    }
    let end = digest(&e);
    if &end != g.states.last().unwrap() {
        return Err(format!(
            "after re-applying, the final state differs:\n{end}"
        ));
    }
    Ok(())
}

/// Runs the script on `sim` (already armed); returns (known durable,
/// tried, stopped early), checking every answer given against the
/// faultless run.
fn run_armed(
    rt: &tokio::runtime::Runtime,
    sim: &SimStorage,
    (script, how): (&[Vec<WriteOp>], How),
    g: &Golden,
) -> Result<(u64, u64, bool), String> {
    let e = match open(sim, how.mode) {
        Ok(e) => e,
        Err(_) => return Ok((0, 0, true)),
    };
    let Run {
        answers,
        stop,
        durable,
        tried,
    } = rt.block_on(apply_from(&e, script, 1, how));
    for (k, a) in answers.iter().enumerate() {
        if a != &g.answers[k] {
            return Err(format!(
                "entry {} answered {a:?}, the faultless run {:?}",
                k + 1,
                g.answers[k]
            ));
        }
    }
    Ok((durable, tried, stop.is_some()))
}

/// Power loss at every storage call of the script, each resolved every
/// way when few calls are unsynced (else all kept, none kept and at
/// random), then recovered.
pub fn apply_crash_points(how: How, random: usize) -> Result<(u64, u64), String> {
    let rt = runtime();
    let script = script();
    let (g, dry) = golden(&rt, &script, how.mode);
    let total = dry.op_count();
    let mut rng = Rng::new(0xA991_1ED0);
    let mut resolutions_run = 0;
    for point in 0..total {
        let sim = SimStorage::new();
        sim.crash_at(point);
        let (durable, tried, _) = run_armed(&rt, &sim, (&script, how), &g)?;
        let unsynced = sim.unsynced_ops();
        let mut resolutions: Vec<Resolution> = Vec::new();
        if unsynced <= 4 {
            resolutions.extend((0..1u64 << unsynced).map(Resolution::Subset));
        } else {
            resolutions.extend([Resolution::KeepAll, Resolution::DropAll]);
        }
        resolutions.extend((0..random).map(|_| Resolution::Random(rng.next_u64())));
        for res in resolutions {
            let disk = sim.fork();
            disk.crash(res);
            check_recovered(&rt, &disk, (&script, how), &g, (durable, tried))
                .map_err(|e| format!("{how:?}: crash at call {point}, {res:?}: {e}"))?;
            resolutions_run += 1;
        }
    }
    Ok((total, resolutions_run))
}

/// EIO, ENOSPC and a short write, once and persistently, at every storage
/// call: a failure is answered as one (never a false "durable"), and after
/// a power loss the disk recovers as above.
pub fn apply_faults(how: How) -> Result<u64, String> {
    let rt = runtime();
    let script = script();
    let (g, dry) = golden(&rt, &script, how.mode);
    let total = dry.op_count();
    let mut rng = Rng::new(0xFA17_A991);
    let mut runs = 0;
    for at_op in 0..total {
        for kind in [FaultKind::Eio, FaultKind::NoSpace, FaultKind::ShortWrite] {
            for persistent in [false, true] {
                let fault = Fault {
                    at_op,
                    kind,
                    persistent,
                };
                let sim = SimStorage::new();
                sim.inject(fault);
                let (durable, tried, failed) = run_armed(&rt, &sim, (&script, how), &g)
                    .map_err(|e| format!("{how:?}: {fault:?}: {e}"))?;
                let wrote = sim.fired().iter().any(|(_, op)| {
                    !matches!(*op, "list" | "open" | "lock" | "len" | "read" | "view")
                });
                if wrote && !failed {
                    return Err(format!(
                        "{how:?}: {fault:?}: a write or sync failed and every entry was answered"
                    ));
                }
                let res = Resolution::Random(rng.next_u64());
                sim.crash(res);
                check_recovered(&rt, &sim, (&script, how), &g, (durable, tried))
                    .map_err(|e| format!("{how:?}: {fault:?}, then {res:?}: {e}"))?;
                runs += 1;
            }
        }
    }
    Ok(runs)
}

/// Entries in one [`Engine::apply_entries`] call of the many-entries
/// suite: more than the call queues ahead, so they span many groups.
const MANY_ENTRIES: u64 = 200;

/// Small groups (3 entries at most) and preallocation in small steps: many
/// groups, each with entries queued behind it, and many calls whose
/// failure refuses a group without writing any of it.
fn open_many(sim: &SimStorage) -> Result<Engine, OpenError> {
    let config = Config {
        group_requests_max: 3,
        prealloc_bytes: 1024,
        ..config(Durability::EveryGroup)
    };
    Engine::open_storage(Arc::new(sim.clone()), config)
}

fn many_body(i: u64) -> String {
    format!("entry {i} {}", "x".repeat(100))
}

fn many_entries() -> Vec<(AppliedState, u64, Vec<WriteOp>)> {
    (1..=MANY_ENTRIES)
        .map(|i| (mark(i), 1_000 * i, vec![append("s", 1, &many_body(i))]))
        .collect()
}

/// The bodies of stream `s`, oldest first (none when it does not exist).
fn bodies_of_s(e: &Engine) -> Result<Vec<String>, String> {
    match e.read("s", 0, usize::MAX, usize::MAX) {
        Ok(r) => Ok(r
            .records
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()),
        Err(ReadError::NotFound) => Ok(Vec::new()),
        Err(err) => Err(format!("reading s: {err}")),
    }
}

/// EIO and ENOSPC once at every storage call of one `apply_entries` call
/// of [`MANY_ENTRIES`] entries (each appends its own record), then a
/// reopen: the applied index `m` names exactly the entries whose records
/// are there, `1..=m` in order — none missing below it (an entry applied
/// past a refused one), none above it — and `m` is all of them when the
/// call answered. Returns the runs checked.
pub fn many_entries_faults() -> Result<u64, String> {
    let rt = runtime();
    let dry = SimStorage::new();
    let e = open_many(&dry).expect("a fresh disk opens");
    let all = rt.block_on(e.apply_entries(many_entries()));
    assert_eq!(all.map(|a| a.len()), Ok(MANY_ENTRIES as usize));
    rt.block_on(e.shutdown());
    let total = dry.op_count();
    let mut runs = 0;
    for at_op in 0..total {
        for kind in [FaultKind::Eio, FaultKind::NoSpace] {
            let sim = SimStorage::new();
            sim.inject(Fault {
                at_op,
                kind,
                persistent: false,
            });
            let Ok(e) = open_many(&sim) else {
                continue;
            };
            let answered = rt.block_on(e.apply_entries(many_entries())).is_ok();
            rt.block_on(e.shutdown());
            drop(e);
            sim.crash(Resolution::KeepAll);
            let e = open_many(&sim)
                .map_err(|err| format!("{kind:?} at call {at_op}: reopen refused: {err}"))?;
            let m = e.applied().map_or(0, |a| a.index);
            let got = bodies_of_s(&e)?;
            let want: Vec<String> = (1..=m).map(many_body).collect();
            if got != want {
                let first_wrong = got.iter().zip(&want).position(|(g, w)| g != w);
                return Err(format!(
                    "{kind:?} at call {at_op}: applied index {m}, {} records, first differing at {first_wrong:?}",
                    got.len()
                ));
            }
            if answered && m != MANY_ENTRIES {
                return Err(format!(
                    "{kind:?} at call {at_op}: every entry answered, applied index {m}"
                ));
            }
            runs += 1;
        }
    }
    Ok(runs)
}

#[test]
fn a_failed_entry_stops_every_entry_queued_behind_it() {
    let runs = many_entries_faults().unwrap_or_else(|e| panic!("{e}"));
    println!("{runs} faulted runs of {MANY_ENTRIES} entries in one call checked");
    assert!(runs > 100, "too few runs: {runs}");
}

fn crash_points(how: How) {
    let random = crate::support::env_or("FENCELOG_CRASH_RANDOM", 4) as usize;
    let (calls, resolutions) = apply_crash_points(how, random).unwrap_or_else(|e| panic!("{e}"));
    println!("{how:?}: {calls} crash points, {resolutions} resolutions recovered");
    assert!(
        calls > 100,
        "the script makes too few storage calls: {calls}"
    );
}

fn faults(how: How) {
    let runs = apply_faults(how).unwrap_or_else(|e| panic!("{e}"));
    println!("{how:?}: {runs} faulted runs recovered");
}

const ONE_EVERY_GROUP: How = How {
    mode: Durability::EveryGroup,
    together: false,
};
const ONE_ON_FLUSH: How = How {
    mode: Durability::OnFlush,
    together: false,
};
const TOGETHER_EVERY_GROUP: How = How {
    mode: Durability::EveryGroup,
    together: true,
};
const TOGETHER_ON_FLUSH: How = How {
    mode: Durability::OnFlush,
    together: true,
};

#[test]
fn every_crash_point_of_apply_recovers_exactly_an_applied_prefix() {
    crash_points(ONE_EVERY_GROUP);
}

#[test]
fn every_crash_point_of_apply_on_flush_recovers_an_applied_prefix_past_the_last_flush() {
    crash_points(ONE_ON_FLUSH);
}

#[test]
fn every_crash_point_of_entries_applied_together_recovers_an_applied_prefix() {
    crash_points(TOGETHER_EVERY_GROUP);
}

#[test]
fn every_crash_point_of_entries_applied_together_on_flush_recovers_an_applied_prefix() {
    crash_points(TOGETHER_ON_FLUSH);
}

#[test]
fn every_io_fault_in_apply_is_answered_and_recovers_an_applied_prefix() {
    faults(ONE_EVERY_GROUP);
}

#[test]
fn every_io_fault_in_apply_on_flush_is_answered_and_recovers_an_applied_prefix() {
    faults(ONE_ON_FLUSH);
}

#[test]
fn every_io_fault_in_entries_applied_together_is_answered_and_recovers_an_applied_prefix() {
    faults(TOGETHER_EVERY_GROUP);
}

#[test]
fn every_io_fault_in_entries_applied_together_on_flush_recovers_an_applied_prefix() {
    faults(TOGETHER_ON_FLUSH);
}
