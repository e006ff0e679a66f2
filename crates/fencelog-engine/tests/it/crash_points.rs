//! Power loss at every storage call of scripted workloads.
//! `FENCELOG_CRASH_RANDOM` raises the random resolutions per point (64 by
//! default when more than 8 operations are unsynced) and
//! `FENCELOG_CRASH_EXTRA` the random ones added to the exhaustive subsets.

use crate::support::crash::{crash_points, CrashSuite};
use crate::support::env_or;
use std::time::Instant;

fn run(seed: u64, steps: usize, segment_bytes: u64) {
    run_suite(seed, steps, segment_bytes, false);
}

fn run_suite(seed: u64, steps: usize, segment_bytes: u64, lifecycle: bool) {
    let suite = CrashSuite {
        seed,
        steps,
        segment_bytes,
        random_when_many: env_or("FENCELOG_CRASH_RANDOM", 64) as usize,
        random_extra: env_or("FENCELOG_CRASH_EXTRA", 6) as usize,
        stride: 1,
        lifecycle,
    };
    let started = Instant::now();
    match crash_points(&suite) {
        Ok(s) => {
            println!(
                "seed {seed}: {} of {} crash points, {} resolutions, {} recoveries, max {} unsynced ops, dry run {} acks from {} groups, {:.1?}",
                s.points, s.ops, s.resolutions, s.recoveries, s.max_unsynced, s.dry_acks, s.dry_groups, started.elapsed()
            );
            println!(
                "  rolls cut part way: {} adopted (segment durable, not yet in the MANIFEST), {} removed (header never durable)",
                s.adopted_rolls, s.removed_half_rolls
            );
            // Every script rolls segments: a crash between a new segment
            // becoming durable and the MANIFEST naming it must have been
            // recovered (not refused as "missing") at least once, and so must
            // one before its header was durable.
            assert!(s.adopted_rolls > 0 && s.removed_half_rolls > 0, "{s:?}");
            if lifecycle {
                println!(
                    "  dry run reclamation: {} passes, {} checkpoints, {} segments deleted, {} frames compacted",
                    s.dry_reclaims, s.dry_checkpoints, s.dry_deleted_segments, s.dry_compacted_frames
                );
                // The script must really exercise every reclamation step,
                // or crashing inside them proves nothing.
                assert!(s.dry_reclaims > 0 && s.dry_checkpoints > 0, "{s:?}");
                assert!(
                    s.dry_deleted_segments > 0 && s.dry_compacted_frames > 0,
                    "{s:?}"
                );
            }
        }
        Err(e) => panic!("crash-point violation (replay with this seed): {e}"),
    }
}

/// Appends, fences, stale writers and bursts on three streams, rolling
/// every few groups (4 KiB segments).
#[test]
fn every_crash_point_with_rolls() {
    run(env_or("FENCELOG_CRASH_SEED", 0x5EED_0001), 150, 4096);
}

/// A second script with another seed and larger segments: more groups per
/// segment, different grouping of the bursts.
#[test]
fn every_crash_point_second_script() {
    run(env_or("FENCELOG_CRASH_SEED2", 0x5EED_0002), 150, 16384);
}

/// Trims (in range, below, past the tail, stale), seals, deletes and
/// recreations above the tombstone, retention by bytes, and reclamation
/// passes (retention trims, checkpoints, compaction, segment deletion) among
/// ordinary traffic: power cut at every storage call of all of them.
#[test]
fn every_crash_point_of_the_lifecycle() {
    run_suite(env_or("FENCELOG_CRASH_SEED3", 0x5EED_0003), 150, 4096, true);
}
