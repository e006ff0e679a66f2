//! Corruption at rest: torn tails, zero and garbage tails, random bit flips,
//! truncated headers, missing, empty and foreign files.

use crate::support::corruption::{corruption, lifecycle_corruption, CorruptionSuite};
use crate::support::env_or;
use std::time::Instant;

#[test]
fn damage_at_rest_is_cut_or_refused_never_served() {
    let seed = env_or("FENCELOG_CORRUPTION_SEED", 0xC0_0001);
    let suite = CorruptionSuite {
        seed,
        steps: 60,
        segment_bytes: 4096,
        flips: env_or("FENCELOG_FLIPS", 1000) as usize,
    };
    let started = Instant::now();
    match corruption(&suite) {
        Ok(s) => println!(
            "seed {seed}: {} segments, {} cases, {} opened, {} refused, {} flips cut as a torn last group, {:.1?}",
            s.segments, s.cases, s.opened, s.refused, s.flips_cut_as_torn, started.elapsed()
        ),
        Err(e) => panic!("corruption violation (replay with this seed): {e}"),
    }
}

/// The lifecycle's files: bit flips and truncation in a checkpoint, flips
/// in the MANIFEST and in compacted segments are refused with file and offset.
#[test]
fn damaged_checkpoints_manifests_and_compacted_segments_are_refused() {
    let seed = env_or("FENCELOG_CORRUPTION_SEED2", 0xC0_0002);
    let suite = CorruptionSuite {
        seed,
        steps: 150,
        segment_bytes: 4096,
        flips: env_or("FENCELOG_FLIPS", 1000) as usize / 5,
    };
    let started = Instant::now();
    match lifecycle_corruption(&suite) {
        Ok(s) => {
            println!(
                "seed {seed}: checkpoint {} bytes, MANIFEST {} bytes, {} compacted segments, {} cases, {:.1?}",
                s.checkpoint_bytes, s.manifest_bytes, s.compacted_segments, s.cases, started.elapsed()
            );
            assert!(s.compacted_segments > 0 && s.checkpoint_bytes > 64, "{s:?}");
        }
        Err(e) => panic!("corruption violation (replay with this seed): {e}"),
    }
}
