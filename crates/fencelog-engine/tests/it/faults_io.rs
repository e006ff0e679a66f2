//! Storage faults at the engine level: every storage call failed once and
//! persistently with EIO, ENOSPC and a short write, during a workload and
//! during recovery.

use crate::support::env_or;
use crate::support::faults::{fault_points, FaultSuite};
use std::time::Instant;

#[test]
fn every_call_failed_every_way() {
    run(env_or("FENCELOG_FAULT_SEED", 0xFA17_0001), 60, false);
}

/// The same for trims, seals, deletes, retention and every step of
/// reclamation (checkpoint, MANIFEST rewrites, compaction copies, segment
/// unlinks): poisoned or harmless, never a lost token or record.
#[test]
fn every_call_of_the_lifecycle_failed_every_way() {
    run(env_or("FENCELOG_FAULT_SEED2", 0xFA17_0002), 90, true);
}

fn run(seed: u64, steps: usize, lifecycle: bool) {
    let suite = FaultSuite {
        seed,
        steps,
        segment_bytes: 4096,
        stride: 1,
        recovery_disks: env_or("FENCELOG_FAULT_RECOVERY_DISKS", 6) as usize,
        lifecycle,
    };
    let started = Instant::now();
    match fault_points(&suite) {
        Ok(s) => {
            println!(
                "seed {seed}: {} calls x 6 faults = {} runs ({} poisoned the engine), {} recovery faults, {:.1?}",
                s.ops, s.runs, s.failed_runs, s.recovery_ops_faulted, started.elapsed()
            );
            assert!(s.failed_runs > 0, "no fault ever reached the write path");
        }
        Err(e) => panic!("fault violation (replay with this seed): {e}"),
    }
}
