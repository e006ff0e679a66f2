//! Engine limits. Every queue, batch and file has a bound, named with its
//! unit last, so overload turns into a clear error instead of unbounded memory.

/// Default segment size: big enough that rolls are rare, small enough that a
/// sealed segment maps comfortably.
pub const SEGMENT_BYTES_DEFAULT: u64 = 128 << 20;
/// Segments must keep every frame offset inside the index's 32-bit field;
/// a group can overshoot the roll size by at most one group.
pub const SEGMENT_BYTES_LIMIT: u64 = 2 << 30;
/// Default records per append.
pub const BATCH_RECORDS_DEFAULT: usize = 1000;
/// Hard cap from the index's 12-bit record count.
pub const BATCH_RECORDS_LIMIT: usize = 4096;
/// Default body bytes per append.
pub const BATCH_BYTES_DEFAULT: usize = 1 << 20;
/// Hard cap, well below the decoder's frame bound.
pub const BATCH_BYTES_LIMIT: usize = 32 << 20;
/// Requests waiting for the writer; callers beyond it wait for a slot.
pub const QUEUE_DEPTH_DEFAULT: usize = 16_384;
/// Hard cap, far below what the channel accepts (`usize::MAX >> 3`).
pub const QUEUE_DEPTH_LIMIT: usize = 1 << 24;
/// One group (one fdatasync) carries at most this many bytes of frames...
pub const GROUP_BYTES_DEFAULT: usize = 8 << 20;
/// Hard cap: a group can overshoot by one frame (64 MiB at most) and may
/// land whole in a fresh segment, so with [`SEGMENT_BYTES_LIMIT`] every
/// frame still starts inside the index's 32-bit offset field.
pub const GROUP_BYTES_LIMIT: usize = 1 << 30;
/// ...and at most this many requests, so one sync's latency stays bounded.
pub const GROUP_REQUESTS_DEFAULT: usize = 4096;
/// Hard cap.
pub const GROUP_REQUESTS_LIMIT: usize = 1 << 20;
/// Zero-filled space the writer keeps ahead of the active segment's end.
/// Overwriting bytes a file already has lets `fdatasync` flush data alone;
/// growing the file with every group would also commit a size change to the
/// filesystem journal on every sync (measured on ext4 here: p50 sync latency
/// 166 µs appending vs 133 µs overwriting, means 334 vs 255 µs).
pub const PREALLOC_BYTES_DEFAULT: u64 = 4 << 20;

/// How long the writer keeps polling its queue after a group before it
/// sleeps. The callers a group answered usually send again within one
/// round trip; a writer asleep by then costs each of them a wake-up, which
/// on a virtual machine with an idle vCPU is tens of µs of latency
/// (measured here, 1 client: append p50 261 µs sleeping at once, 225–232
/// µs polling for 200 µs; docs/benchmark-history.md, "Kept: the writer
/// polls for the next request before it sleeps"). Polling yields the
/// core to anything runnable, and a writer that finds nothing sleeps as
/// before, so an idle engine costs at most this much CPU per group.
pub const WRITER_SPIN_US_DEFAULT: u64 = 200;
/// Hard cap: past a few milliseconds polling is just burning a core.
pub const WRITER_SPIN_US_LIMIT: u64 = 10_000;

/// How often the reclaimer looks for work when nothing nudges it (a trim,
/// delete, retention or roll nudges it at once).
pub const RECLAIM_INTERVAL_MS_DEFAULT: u64 = 10_000;
/// Bytes per second compaction copies at most, so appends keep their
/// latency (the target: p99 during compaction ≤ 2× p99 without).
pub const COMPACTION_BYTES_PER_SECOND_DEFAULT: u64 = 32 << 20;
/// A sealed segment with less than this share of live bytes is compacted;
/// keeping every one at least this live bounds the disk at 1.25 × live.
pub const COMPACTION_LIVE_PERCENT: u64 = 80;
/// Frame bytes one relocation request carries to the writer at most.
pub const RELOCATE_REQUEST_BYTES_MAX: usize = 1 << 20;
/// Retention by age can be at most this (about 584 million years, so
/// `now - age` never underflows a u64 of milliseconds).
pub const RETENTION_AGE_S_LIMIT: u64 = u64::MAX / 1000 - 1;

/// Every limit the engine enforces. [`Config::default`] holds the
/// `*_DEFAULT` constants; [`Config::validate`] refuses values past the
/// `*_LIMIT` caps (the engine checks at open).
#[derive(Debug, Clone)]
pub struct Config {
    /// Roll to a new segment once the active one would pass this size.
    pub segment_bytes_max: u64,
    /// Records in one append.
    pub batch_records_max: usize,
    /// Sum of record body bytes in one append.
    pub batch_bytes_max: usize,
    /// Requests waiting for the writer; callers beyond it wait for a slot.
    pub queue_depth_max: usize,
    /// Frame bytes in one group (one `sync_data`); a group can overshoot
    /// by one frame.
    pub group_bytes_max: usize,
    /// Requests in one group.
    pub group_requests_max: usize,
    /// How far ahead of the data the active segment is zero-filled; 0 turns
    /// preallocation off.
    pub prealloc_bytes: u64,
    /// Retention by age for streams that set none (`--retention-age`);
    /// `None` keeps records forever.
    pub retention_age_s: Option<u64>,
    /// Retention by size per stream for streams that set none
    /// (`--retention-bytes`); `None` is unlimited.
    pub retention_bytes: Option<u64>,
    /// The disk budget (`--data-bytes-max`): appends that would take the
    /// data directory past it are refused with
    /// [`crate::WriteError::InsufficientStorage`] before the disk is full.
    pub data_bytes_max: Option<u64>,
    /// Idempotent producers remembered per stream.
    pub producers_per_stream_max: usize,
    /// How often the reclaimer runs when not nudged; 0 runs it only when
    /// [`crate::Engine::reclaim`] is called (the tests' deterministic mode).
    pub reclaim_interval_ms: u64,
    /// Compaction's copy rate limit.
    pub compaction_bytes_per_second: u64,
    /// Whether the reclaimer's pass trims by retention itself (a single
    /// node). A cluster's shard engine has it off: there a retention trim
    /// is a replicated op its shard leader proposes from
    /// [`crate::Engine::retention_due`], since a trim decided by each
    /// replica's own clock would make the replicas differ.
    pub retention_in_reclaim: bool,
    /// When a group's frames become durable: every group, or on flush
    /// for a cluster's shard engines.
    pub durability: Durability,
    /// How long the writer polls for the next request after a group before
    /// it sleeps ([`WRITER_SPIN_US_DEFAULT`]); 0 sleeps at once.
    pub writer_spin_us: u64,
}

/// When the writer syncs, and so what an answer means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Every group is synced before it is answered or published: an
    /// answer means durable. The single node's mode.
    #[default]
    EveryGroup,
    /// Groups are answered and published once written, and synced only by
    /// [`crate::Engine::flush`], by a segment roll (so only the last
    /// segment ever holds unsynced groups), before a checkpoint is named
    /// and before segments are deleted, and at shutdown. For a log whose
    /// durability comes from elsewhere: a cluster shard, whose every
    /// applied entry stays in its node's fsynced Raft log until a flush
    /// covers it, so a crash that loses unflushed groups only rewinds the
    /// applied position and the entries are applied again. Recovery cuts
    /// the last segment at its first bad frame even when complete frames
    /// follow (write-back of unsynced pages is in no order), so the log
    /// that comes back is a prefix of the groups written.
    OnFlush,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            segment_bytes_max: SEGMENT_BYTES_DEFAULT,
            batch_records_max: BATCH_RECORDS_DEFAULT,
            batch_bytes_max: BATCH_BYTES_DEFAULT,
            queue_depth_max: QUEUE_DEPTH_DEFAULT,
            group_bytes_max: GROUP_BYTES_DEFAULT,
            group_requests_max: GROUP_REQUESTS_DEFAULT,
            prealloc_bytes: PREALLOC_BYTES_DEFAULT,
            retention_age_s: None,
            retention_bytes: None,
            data_bytes_max: None,
            producers_per_stream_max: crate::carried::PRODUCERS_PER_STREAM_DEFAULT,
            reclaim_interval_ms: RECLAIM_INTERVAL_MS_DEFAULT,
            compaction_bytes_per_second: COMPACTION_BYTES_PER_SECOND_DEFAULT,
            retention_in_reclaim: true,
            durability: Durability::EveryGroup,
            writer_spin_us: WRITER_SPIN_US_DEFAULT,
        }
    }
}

impl Config {
    /// Refuses settings the format or the index cannot honour.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_sizes()?;
        self.validate_retention()?;
        self.validate_writer()
    }

    /// Segment, preallocation and batch sizes.
    fn validate_sizes(&self) -> Result<(), String> {
        if self.prealloc_bytes > SEGMENT_BYTES_LIMIT {
            return Err(format!(
                "prealloc_bytes must be at most {SEGMENT_BYTES_LIMIT}, got {}",
                self.prealloc_bytes
            ));
        }
        if self.segment_bytes_max < 4096 || self.segment_bytes_max > SEGMENT_BYTES_LIMIT {
            return Err(format!(
                "segment_bytes_max must be in 4096..={SEGMENT_BYTES_LIMIT}, got {}",
                self.segment_bytes_max
            ));
        }
        if self.batch_records_max == 0 || self.batch_records_max > BATCH_RECORDS_LIMIT {
            return Err(format!(
                "batch_records_max must be in 1..={BATCH_RECORDS_LIMIT}, got {}",
                self.batch_records_max
            ));
        }
        if self.batch_bytes_max == 0 || self.batch_bytes_max > BATCH_BYTES_LIMIT {
            return Err(format!(
                "batch_bytes_max must be in 1..={BATCH_BYTES_LIMIT}, got {}",
                self.batch_bytes_max
            ));
        }
        Ok(())
    }

    /// The default retention and the disk budget.
    fn validate_retention(&self) -> Result<(), String> {
        if self
            .retention_age_s
            .is_some_and(|a| a == 0 || a > RETENTION_AGE_S_LIMIT)
        {
            return Err(format!(
                "retention_age_s must be in 1..={RETENTION_AGE_S_LIMIT}, got {:?}",
                self.retention_age_s
            ));
        }
        if self.retention_bytes == Some(0) {
            return Err("retention_bytes must be at least 1".into());
        }
        if self
            .data_bytes_max
            .is_some_and(|b| b < 2 * self.segment_bytes_max)
        {
            return Err(format!(
                "data_bytes_max must be at least two segments ({}), got {:?}",
                2 * self.segment_bytes_max,
                self.data_bytes_max
            ));
        }
        Ok(())
    }

    /// The writer's spin, compaction's rate, and the queue, group and
    /// producer limits.
    fn validate_writer(&self) -> Result<(), String> {
        if self.writer_spin_us > WRITER_SPIN_US_LIMIT {
            return Err(format!(
                "writer_spin_us must be at most {WRITER_SPIN_US_LIMIT}, got {}",
                self.writer_spin_us
            ));
        }
        if self.compaction_bytes_per_second == 0 {
            return Err("compaction_bytes_per_second must be at least 1".into());
        }
        for (name, value, limit) in [
            (
                "producers_per_stream_max",
                self.producers_per_stream_max,
                crate::carried::PRODUCERS_PER_STREAM_LIMIT,
            ),
            ("queue_depth_max", self.queue_depth_max, QUEUE_DEPTH_LIMIT),
            (
                "group_requests_max",
                self.group_requests_max,
                GROUP_REQUESTS_LIMIT,
            ),
            ("group_bytes_max", self.group_bytes_max, GROUP_BYTES_LIMIT),
        ] {
            if value == 0 || value > limit {
                return Err(format!("{name} must be in 1..={limit}, got {value}"));
            }
        }
        Ok(())
    }
}
