//! The exactly-once proof on the simulated disk: at every storage call of a
//! script of idempotent appends, deadline-carrying appends, multi-stream
//! batches (accepted and refused) and cursor commits, cut the power
//! (resolving the unsynced writes several ways) or fail the call with EIO,
//! then recover and check (`exactly_once_check`):
//! - exactly once: every acknowledged idempotent append is there, none
//!   twice; the producer retries everything it was not sure of with the
//!   same producer_seq, and afterwards each of its records is there
//!   exactly once — a retry of an acknowledged append is a duplicate
//!   (whose ack names the seqs really holding that record), never a copy;
//! - no record has a timestamp above its deadline;
//! - a multi-stream batch is wholly present or wholly absent;
//! - a cursor is at least where its last acknowledged commit put it.

use crate::exactly_once_check::{check_recovered, run, Seen, STEPS};
use crate::support::{config, open, runtime};
use fencelog_engine::sim::{Fault, FaultKind, Resolution, SimStorage};

/// Every crash point, four resolutions each. Returns the recoveries
/// checked.
pub fn crash_suite() -> Result<u64, String> {
    let rt = runtime();
    let cfg = config(4096);
    let dry = SimStorage::new();
    let e = open(&dry, &cfg).map_err(|e| e.to_string())?;
    let seen = rt.block_on(run(&e, STEPS));
    rt.block_on(check_recovered(&e, &seen))
        .map_err(|e| format!("dry run: {e}"))?;
    drop(e);
    let total = dry.op_count();
    let mut checked = 0;
    for point in 0..total {
        let sim = SimStorage::new();
        sim.crash_at(point);
        let seen = match open(&sim, &cfg) {
            Ok(e) => rt.block_on(run(&e, STEPS)),
            Err(_) if sim.halted() => Seen::default(),
            Err(e) => return Err(format!("crash at {point}: first open: {e}")),
        };
        let resolutions = [
            Resolution::KeepAll,
            Resolution::DropAll,
            Resolution::Random(point),
            Resolution::Random(point ^ 0x5EED),
        ];
        for res in resolutions {
            let disk = sim.fork();
            disk.crash(res);
            let e = open(&disk, &cfg)
                .map_err(|err| format!("crash at {point}, {res:?}: recovery: {err}"))?;
            rt.block_on(check_recovered(&e, &seen))
                .map_err(|err| format!("crash at {point}, {res:?}: {err}"))?;
            checked += 1;
        }
    }
    if total < 50 {
        return Err(format!(
            "only {total} storage calls: the script did not run"
        ));
    }
    Ok(checked)
}

/// EIO at every storage call, then a restart (page cache kept) and a power
/// cut. Returns the runs the fault cut short.
pub fn fault_suite() -> Result<u64, String> {
    let rt = runtime();
    let cfg = config(4096);
    let dry = SimStorage::new();
    let e = open(&dry, &cfg).map_err(|e| e.to_string())?;
    rt.block_on(run(&e, STEPS));
    drop(e);
    let total = dry.op_count();
    let mut failed_runs = 0;
    for at_op in 0..total {
        let sim = SimStorage::new();
        sim.inject(Fault {
            at_op,
            kind: FaultKind::Eio,
            persistent: false,
        });
        let seen = match open(&sim, &cfg) {
            Ok(e) => {
                let seen = rt.block_on(run(&e, STEPS));
                failed_runs += (seen.acked_appends.len() < STEPS) as u64;
                seen
            }
            Err(_) => Seen::default(),
        };
        for crash in [false, true] {
            let disk = sim.fork();
            if crash {
                disk.crash(Resolution::Random(at_op));
            } else {
                disk.restart();
            }
            let e = open(&disk, &cfg).map_err(|err| format!("EIO at {at_op}: recovery: {err}"))?;
            rt.block_on(check_recovered(&e, &seen))
                .map_err(|err| format!("EIO at {at_op}, crash {crash}: {err}"))?;
        }
    }
    if failed_runs == 0 {
        return Err("no fault hit the script".into());
    }
    Ok(failed_runs)
}

#[test]
fn exactly_once_and_batch_atomicity_hold_at_every_crash_point() {
    let checked = crash_suite().unwrap();
    assert!(checked > 200, "{checked} recoveries");
}

#[test]
fn exactly_once_and_batch_atomicity_hold_after_every_io_error() {
    fault_suite().unwrap();
}
