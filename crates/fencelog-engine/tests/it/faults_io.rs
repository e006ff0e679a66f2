//! Issue 4 §3 (engine level): every storage call failed once and
//! persistently with EIO, ENOSPC and a short write, during a workload and
//! during recovery.

use crate::support::env_or;
use crate::support::faults::{fault_points, FaultSuite};
use std::time::Instant;

#[test]
fn every_call_failed_every_way() {
    let seed = env_or("FENCELOG_FAULT_SEED", 0xFA17_0001);
    let suite = FaultSuite {
        seed,
        steps: 60,
        segment_bytes: 4096,
        stride: 1,
        recovery_disks: env_or("FENCELOG_FAULT_RECOVERY_DISKS", 6) as usize,
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
