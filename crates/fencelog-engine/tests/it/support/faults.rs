//! I/O errors and a full disk: for every storage call N, fail it once and
//! persistently with EIO, ENOSPC and a short write; also inside recovery.

use super::crash::{recover_twice, CrashStats};
use super::*;
use fencelog_engine::sim::{Fault, FaultKind, Resolution};

pub const KINDS: [FaultKind; 3] = [FaultKind::Eio, FaultKind::NoSpace, FaultKind::ShortWrite];

#[derive(Debug, Clone)]
pub struct FaultSuite {
    pub seed: u64,
    pub steps: usize,
    pub segment_bytes: u64,
    /// Only every `stride`-th call index (1 = all of them).
    pub stride: u64,
    /// Disks with something for recovery to repair, each faulted at every
    /// recovery call.
    pub recovery_disks: usize,
    /// The lifecycle script (trims, seals, deletes, retention, reclamation)
    /// instead of the original one.
    pub lifecycle: bool,
}

#[derive(Debug, Default)]
pub struct FaultStats {
    pub ops: u64,
    pub runs: u64,
    pub failed_runs: u64,
    pub recovery_ops_faulted: u64,
}

fn is_read_op(op: &str) -> bool {
    matches!(op, "list" | "open" | "lock" | "len" | "read" | "view")
}

pub fn fault_points(suite: &FaultSuite) -> Result<FaultStats, String> {
    let rt = runtime();
    let cfg = config(suite.segment_bytes);
    let steps = match suite.lifecycle {
        true => lifecycle_script(suite.seed, suite.steps),
        false => script(suite.seed, suite.steps),
    };
    let fail = |what: String| format!("seed {}: {what}", suite.seed);

    let sim = SimStorage::new();
    let engine = open(&sim, &cfg).map_err(|e| fail(format!("dry run open: {e}")))?;
    rt.block_on(run_script(&engine, &steps)).map_err(&fail)?;
    drop(engine);
    let total = sim.op_count();
    let mut stats = FaultStats {
        ops: total,
        ..Default::default()
    };
    let mut rng = Rng::new(suite.seed ^ 0xFA17);
    let mut n = 0;
    while n < total {
        for kind in KINDS {
            for persistent in [false, true] {
                let fault = Fault {
                    at_op: n,
                    kind,
                    persistent,
                };
                let failed = one_fault(&rt, &cfg, &steps, fault, rng.next_u64())
                    .map_err(|e| fail(format!("{fault:?}: {e}")))?;
                stats.runs += 1;
                stats.failed_runs += failed as u64;
            }
        }
        n += suite.stride.max(1);
    }

    // Faults inside recovery, on disks that give recovery work to do: cut
    // at spread-out points of the script with a random resolution, so
    // there are torn tails to truncate and half-made segments to remove.
    for d in 0..suite.recovery_disks {
        let point = total * (d as u64 + 1) / (suite.recovery_disks as u64 + 1);
        let disk = SimStorage::new();
        disk.crash_at(point);
        let model = match open(&disk, &cfg) {
            Ok(engine) => rt.block_on(run_script(&engine, &steps)).map_err(&fail)?,
            Err(_) => Model::default(),
        };
        disk.crash(Resolution::Random(rng.next_u64()));
        let probe = disk.fork();
        let base = probe.op_count();
        drop(open(&probe, &cfg).map_err(|e| fail(format!("probe recovery: {e}")))?);
        let recovery_ops = probe.op_count() - base;
        for m in 0..recovery_ops {
            for kind in KINDS {
                for persistent in [false, true] {
                    let fault = Fault {
                        at_op: base + m,
                        kind,
                        persistent,
                    };
                    let seed = rng.next_u64();
                    fault_in_recovery(&rt, &disk, &cfg, &model, fault, seed).map_err(|e| {
                        fail(format!(
                            "disk cut at op {point}, recovery {fault:?}, seed {seed}: {e}"
                        ))
                    })?;
                    stats.recovery_ops_faulted += 1;
                }
            }
        }
    }
    Ok(stats)
}

/// Runs the script with one fault armed. Returns whether the engine saw a
/// storage failure.
fn one_fault(
    rt: &tokio::runtime::Runtime,
    cfg: &Config,
    steps: &[Step],
    fault: Fault,
    seed: u64,
) -> Result<bool, String> {
    let sim = SimStorage::new();
    sim.inject(fault);
    let model = match open(&sim, cfg) {
        Ok(engine) => {
            let model = rt.block_on(run_script(&engine, steps))?;
            let fired = sim.fired();
            if let Some((at, op)) = fired.iter().find(|(_, op)| !is_read_op(op)) {
                if !model.failed && !model.refused {
                    return Err(format!(
                        "{op} at call {at} failed but no request was told its group failed"
                    ));
                }
            }
            // A group refused before any of it was written leaves the
            // engine running.
            if model.refused && !model.failed && engine.poisoned().is_some() {
                return Err("a clean refusal poisoned the engine".into());
            }
            if model.failed {
                let later = rt.block_on(engine.append(
                    STREAMS[0],
                    u64::MAX,
                    vec![Bytes::from_static(b"later")],
                    None,
                ));
                if !matches!(later, Err(WriteError::Poisoned(_))) {
                    return Err(format!("a write after the failure got {later:?}"));
                }
            }
            // Reads of durable data keep working; only a one-off fault that
            // hit a read itself may fail one, and then the retry works.
            if let Err(e) = verify(
                &engine,
                &model,
                Mode::Live {
                    reads_may_fail: false,
                },
            ) {
                // Persistent faults never hit reads, so a read can only
                // have failed once, at the armed call itself.
                let read_fault = sim.fired().iter().any(|(_, op)| is_read_op(op));
                if !read_fault {
                    return Err(format!("live engine after the fault: {e}"));
                }
                verify(
                    &engine,
                    &model,
                    Mode::Live {
                        reads_may_fail: false,
                    },
                )
                .map_err(|e| format!("live engine after the fault, second look: {e}"))?;
            }
            model
        }
        Err(OpenError::Io { .. }) => Model::default(),
        Err(e) => return Err(format!("first open: {e}")),
    };
    let failed = model.failed;

    // Reopen after the process dies (page cache survives) and after power
    // loss; both must hold every acknowledged record and accept writes.
    let power_loss = sim.fork();
    sim.restart();
    let engine = open(&sim, cfg).map_err(|e| format!("reopen after restart: {e}"))?;
    verify(&engine, &model, Mode::Recovered).map_err(|e| format!("after restart: {e}"))?;
    rt.block_on(append_after_recovery(&engine))?;
    drop(engine);
    power_loss.crash(Resolution::Random(seed));
    let engine = open(&power_loss, cfg).map_err(|e| format!("reopen after power loss: {e}"))?;
    verify(&engine, &model, Mode::Recovered).map_err(|e| format!("after power loss: {e}"))?;
    Ok(failed)
}

fn fault_in_recovery(
    rt: &tokio::runtime::Runtime,
    disk: &SimStorage,
    cfg: &Config,
    model: &Model,
    fault: Fault,
    seed: u64,
) -> Result<(), String> {
    let d = disk.fork();
    d.inject(fault);
    match open(&d, cfg) {
        Ok(engine) => {
            verify(&engine, model, Mode::Recovered)?;
        }
        Err(OpenError::Io { .. }) => {}
        Err(e) => {
            return Err(format!(
                "a failed recovery call must give an I/O error, got: {e}"
            ))
        }
    }
    let power_loss = d.fork();
    d.restart();
    let mut stats = CrashStats::default();
    recover_twice(rt, &d, cfg, model, seed, &mut stats)
        .map_err(|e| format!("after restart: {e}"))?;
    power_loss.crash(Resolution::Random(seed ^ 1));
    recover_twice(rt, &power_loss, cfg, model, seed ^ 2, &mut stats)
        .map_err(|e| format!("after power loss: {e}"))
}
