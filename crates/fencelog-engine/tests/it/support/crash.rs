//! Every crash point: run the script once to count storage calls, then for
//! every call index cut the power there, resolve the unsynced state every
//! way (or many random ways), recover, crash again in the middle of that
//! recovery, recover again, and check.

use super::*;
use fencelog_engine::sim::Resolution;

#[derive(Debug, Clone)]
pub struct CrashSuite {
    pub seed: u64,
    pub steps: usize,
    pub segment_bytes: u64,
    /// Random resolutions when more than 8 operations are unsynced.
    pub random_when_many: usize,
    /// Random resolutions (tearing, zeros, garbage, sector reordering) on
    /// top of the exhaustive subsets when at most 8 are unsynced.
    pub random_extra: usize,
    /// Only every `stride`-th crash point (1 = all of them).
    pub stride: u64,
    /// The lifecycle script (trims, seals, deletes, retention, reclamation)
    /// instead of the original one.
    pub lifecycle: bool,
}

#[derive(Debug, Default)]
pub struct CrashStats {
    pub ops: u64,
    pub points: u64,
    pub resolutions: u64,
    pub recoveries: u64,
    pub max_unsynced: usize,
    /// Acknowledged requests and groups of the dry run: fewer groups than
    /// requests means bursts really shared an fsync.
    pub dry_acks: u64,
    pub dry_groups: u64,
    /// Reclamation passes of the dry run, and what they did.
    pub dry_reclaims: u64,
    pub dry_checkpoints: u64,
    pub dry_deleted_segments: u64,
    pub dry_compacted_frames: u64,
    /// Recoveries that found a roll cut between the new segment becoming
    /// durable and the MANIFEST listing it (adopted, never "missing"), and
    /// ones that found a new segment whose header never became durable
    /// (removed).
    pub adopted_rolls: u64,
    pub removed_half_rolls: u64,
}

pub fn crash_points(suite: &CrashSuite) -> Result<CrashStats, String> {
    let rt = runtime();
    let cfg = config(suite.segment_bytes);
    let steps = match suite.lifecycle {
        true => lifecycle_script(suite.seed, suite.steps),
        false => script(suite.seed, suite.steps),
    };
    let fail = |what: String| format!("seed {}: {what}", suite.seed);

    // Dry run: how many storage calls the whole script makes.
    let sim = SimStorage::new();
    let engine = open(&sim, &cfg).map_err(|e| fail(format!("dry run open: {e}")))?;
    let model = rt.block_on(run_script(&engine, &steps)).map_err(&fail)?;
    verify(
        &engine,
        &model,
        Mode::Live {
            reads_may_fail: false,
        },
    )
    .map_err(&fail)?;
    let dry = engine.metrics();
    let (checkpoints, deleted, copied) = (
        dry.checkpoints.get(),
        dry.segments_deleted.get(),
        dry.compaction_frames_copied.get(),
    );
    drop(engine);
    let total = sim.op_count();
    // Every group is one fdatasync of the data; the first segment and each
    // roll add one, and one directory sync each.
    let calls = sim.op_counts();
    let get = |k: &str| calls.get(k).copied().unwrap_or(0);
    let mut stats = CrashStats {
        ops: total,
        dry_acks: model.attempts.iter().filter(|a| a.acked()).count() as u64,
        // Every sync_data not of a new segment, a MANIFEST or a checkpoint
        // is a group's.
        dry_groups: get("sync_data") - get("create"),
        dry_reclaims: model.reclaims,
        dry_checkpoints: checkpoints,
        dry_deleted_segments: deleted,
        dry_compacted_frames: copied,
        ..Default::default()
    };
    let mut rng = Rng::new(suite.seed ^ 0xC0FF_EE00);
    let mut point = 0;
    while point < total {
        let at = |what: String| fail(format!("crash at op {point}: {what}"));
        let sim = SimStorage::new();
        sim.crash_at(point);
        let model = match open(&sim, &cfg) {
            Ok(engine) => {
                let model = rt.block_on(run_script(&engine, &steps)).map_err(&at)?;
                verify(
                    &engine,
                    &model,
                    Mode::Live {
                        reads_may_fail: true,
                    },
                )
                .map_err(&at)?;
                model
            }
            // Power cut while the log was first being created.
            Err(OpenError::Io { .. }) if sim.halted() => Model::default(),
            Err(e) => return Err(at(format!("first open: {e}"))),
        };
        let unsynced = sim.unsynced_ops();
        stats.max_unsynced = stats.max_unsynced.max(unsynced);
        let mut resolutions: Vec<Resolution> = Vec::new();
        if unsynced <= 8 {
            resolutions.extend((0..1u64 << unsynced).map(Resolution::Subset));
            resolutions.extend((0..suite.random_extra).map(|_| Resolution::Random(rng.next_u64())));
        } else {
            resolutions
                .extend((0..suite.random_when_many).map(|_| Resolution::Random(rng.next_u64())));
        }
        for res in resolutions {
            let disk = sim.fork();
            disk.crash(res);
            let recover_seed = rng.next_u64();
            recover_twice(&rt, &disk, &cfg, &model, recover_seed, &mut stats)
                .map_err(|e| at(format!("{res:?}, recovery seed {recover_seed}: {e}")))?;
            stats.resolutions += 1;
        }
        stats.points += 1;
        point += suite.stride.max(1);
    }
    Ok(stats)
}

/// Recovers `disk` and checks it; then, on a copy of the same disk, cuts
/// the power in the middle of recovery, recovers again and demands the
/// same result (recovery is idempotent).
pub fn recover_twice(
    rt: &tokio::runtime::Runtime,
    disk: &SimStorage,
    cfg: &Config,
    model: &Model,
    seed: u64,
    stats: &mut CrashStats,
) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let again = disk.fork();
    let base = disk.op_count();
    let engine = open(disk, cfg).map_err(|e| format!("recovery refused: {e}"))?;
    let recovery_ops = disk.op_count() - base;
    let report = engine.recovery_report();
    stats.adopted_rolls += report.adopted_roll.is_some() as u64;
    stats.removed_half_rolls += report.removed_segment.is_some() as u64;
    let once = verify(&engine, model, Mode::Recovered)?;
    rt.block_on(append_after_recovery(&engine))?;
    drop(engine);
    stats.recoveries += 1;

    let cut = base + rng.below(recovery_ops.max(1));
    again.crash_at(cut);
    match open(&again, cfg) {
        Ok(_) => {}
        Err(OpenError::Io { .. }) if again.halted() => {}
        Err(e) => return Err(format!("recovery with power cut at op {cut}: {e}")),
    }
    again.crash(Resolution::Random(rng.next_u64()));
    let engine = open(&again, cfg)
        .map_err(|e| format!("recovery after a crash during recovery (op {cut}) refused: {e}"))?;
    let twice = verify(&engine, model, Mode::Recovered)?;
    stats.recoveries += 1;
    if once != twice {
        return Err(format!(
            "recovery is not idempotent: a crash during recovery at op {cut} changed the result"
        ));
    }
    Ok(())
}
