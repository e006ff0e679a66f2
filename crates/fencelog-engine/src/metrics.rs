//! Engine metrics, kept with prometheus-client so the HTTP layer only has
//! to encode the registry.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicI64;

type IntGauge = Gauge<i64, AtomicI64>;

/// The engine's metrics, registered under the `fencelog_` prefix; the
/// help text of each is beside its registration (`Metrics::default`).
pub struct Metrics {
    /// Every metric below, for [`Metrics::encode`].
    pub registry: Registry,
    /// Appends acknowledged as durable.
    pub appends_accepted: Counter,
    /// Fences acknowledged as durable (re-fences that wrote nothing do
    /// not count).
    pub fences_accepted: Counter,
    /// Trims that moved the trim point or raised the token.
    pub trims_accepted: Counter,
    /// Streams sealed.
    pub seals_accepted: Counter,
    /// Streams deleted (tombstones written).
    pub deletes_accepted: Counter,
    /// Retention settings changed.
    pub configs_accepted: Counter,
    /// Trims made by retention.
    pub retention_trims: Counter,
    /// Records made durable.
    pub records_written: Counter,
    /// Frame bytes made durable.
    pub bytes_written: Counter,
    /// Writes refused for a stale fencing token, on the fast path or by the
    /// writer.
    pub stale_rejections: Counter,
    /// Appends refused because `match_seq_num` differed.
    pub seq_mismatches: Counter,
    /// Writes refused because the stream is sealed.
    pub sealed_rejections: Counter,
    /// Appends refused by the disk budget.
    pub budget_rejections: Counter,
    /// Groups committed, one `sync_data` each.
    pub groups_committed: Counter,
    /// Latency of each group's write and `sync_data`.
    pub fsync_seconds: Histogram,
    /// Records per committed group.
    pub group_records: Histogram,
    /// Writes refused because the writer's queue was full.
    pub overload_rejections: Counter,
    /// Groups refused because storage failed before any of them was
    /// written (not poisoning).
    pub groups_refused: Counter,
    /// Requests waiting for the writer when it last took a group.
    pub queue_depth: IntGauge,
    /// 1 while the engine accepts writes, 0 once it is poisoned or shutting
    /// down; set by whoever encodes (a scrape), like `queue_depth`.
    pub healthy: IntGauge,
    /// Bytes of the data directory's files.
    pub disk_bytes: IntGauge,
    /// Bytes of live records frames (what reclamation must keep).
    pub live_bytes: IntGauge,
    /// Segment files.
    pub segments: IntGauge,
    /// Segment bytes given back by deletion.
    pub reclaimed_bytes: Counter,
    /// Segments deleted.
    pub segments_deleted: Counter,
    /// Segments compacted (their live frames copied forward).
    pub compactions: Counter,
    /// Frames compaction copied forward.
    pub compaction_frames_copied: Counter,
    /// Bytes compaction copied forward.
    pub compaction_bytes_copied: Counter,
    /// Frames compaction chose that were trimmed or deleted before the
    /// writer got to them.
    pub compaction_dead_on_arrival: Counter,
    /// Frames compaction refused to copy because their CRC failed.
    pub compaction_corrupt_frames: Counter,
    /// Time to compact one segment.
    pub compaction_seconds: Histogram,
    /// Checkpoints written.
    pub checkpoints: Counter,
    /// Time to write one checkpoint.
    pub checkpoint_seconds: Histogram,
    /// Checkpoints that failed to write and will be retried.
    pub checkpoint_failures: Counter,
    /// Idempotent appends answered as duplicates (nothing written).
    pub producer_duplicates: Counter,
    /// Producers evicted (least recently used beyond
    /// `producers_per_stream_max`).
    pub producer_evictions: Counter,
    /// Appends refused by the producer rules (fenced, stale seq, gap).
    pub producer_rejections: Counter,
    /// Writes refused because the writer's time passed their deadline.
    pub deadline_rejections: Counter,
    /// Cursor commits made durable.
    pub cursor_commits: Counter,
    /// Multi-stream batches applied.
    pub batches_accepted: Counter,
    /// Multi-stream batches refused (nothing of them applied).
    pub batches_refused: Counter,
}

fn register<M: Metric + Clone>(r: &mut Registry, name: &str, help: &str, m: &M) {
    r.register(name, help, m.clone());
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics::unregistered();
        let mut registry = Registry::with_prefix("fencelog");
        // Registration order is the order of the exposition.
        register_accepted(&mut registry, &m);
        register_refusals_and_groups(&mut registry, &m);
        register_disk(&mut registry, &m);
        register_protocol(&mut registry, &m);
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// Every metric at zero, in a registry that lists none of them.
    fn unregistered() -> Metrics {
        // 10 µs .. ~1.3 s
        let latency = || Histogram::new(exponential_buckets(0.000_01, 2.0, 18));
        Metrics {
            appends_accepted: Counter::default(),
            fences_accepted: Counter::default(),
            trims_accepted: Counter::default(),
            seals_accepted: Counter::default(),
            deletes_accepted: Counter::default(),
            configs_accepted: Counter::default(),
            retention_trims: Counter::default(),
            records_written: Counter::default(),
            bytes_written: Counter::default(),
            stale_rejections: Counter::default(),
            seq_mismatches: Counter::default(),
            sealed_rejections: Counter::default(),
            budget_rejections: Counter::default(),
            groups_committed: Counter::default(),
            fsync_seconds: latency(),
            // 1 .. 4096 records per group
            group_records: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            overload_rejections: Counter::default(),
            groups_refused: Counter::default(),
            queue_depth: Gauge::default(),
            disk_bytes: Gauge::default(),
            live_bytes: Gauge::default(),
            segments: Gauge::default(),
            reclaimed_bytes: Counter::default(),
            segments_deleted: Counter::default(),
            compactions: Counter::default(),
            compaction_frames_copied: Counter::default(),
            compaction_bytes_copied: Counter::default(),
            compaction_dead_on_arrival: Counter::default(),
            compaction_corrupt_frames: Counter::default(),
            compaction_seconds: latency(),
            checkpoints: Counter::default(),
            checkpoint_seconds: latency(),
            checkpoint_failures: Counter::default(),
            producer_duplicates: Counter::default(),
            producer_evictions: Counter::default(),
            producer_rejections: Counter::default(),
            deadline_rejections: Counter::default(),
            cursor_commits: Counter::default(),
            batches_accepted: Counter::default(),
            batches_refused: Counter::default(),
            healthy: Gauge::default(),
            registry: Registry::default(),
        }
    }
}

/// The writes made durable: each kind, records and bytes.
fn register_accepted(r: &mut Registry, m: &Metrics) {
    register(
        r,
        "appends_accepted",
        "Appends acknowledged as durable",
        &m.appends_accepted,
    );
    register(
        r,
        "fences_accepted",
        "Fences acknowledged as durable",
        &m.fences_accepted,
    );
    register(
        r,
        "trims_accepted",
        "Trims acknowledged as durable",
        &m.trims_accepted,
    );
    register(r, "seals_accepted", "Streams sealed", &m.seals_accepted);
    register(
        r,
        "deletes_accepted",
        "Streams deleted (tombstones written)",
        &m.deletes_accepted,
    );
    register(
        r,
        "configs_accepted",
        "Stream retention settings changed",
        &m.configs_accepted,
    );
    register(
        r,
        "retention_trims",
        "Trims made by retention",
        &m.retention_trims,
    );
    register(
        r,
        "records_written",
        "Records made durable",
        &m.records_written,
    );
    register(
        r,
        "bytes_written",
        "Frame bytes made durable",
        &m.bytes_written,
    );
}

/// Writes refused, and the writer's groups and queue.
fn register_refusals_and_groups(r: &mut Registry, m: &Metrics) {
    register(
        r,
        "stale_rejections",
        "Writes rejected for a stale fencing token",
        &m.stale_rejections,
    );
    register(
        r,
        "seq_mismatches",
        "Appends rejected because match_seq_num differed",
        &m.seq_mismatches,
    );
    register(
        r,
        "sealed_rejections",
        "Writes rejected because the stream is sealed",
        &m.sealed_rejections,
    );
    register(
        r,
        "budget_rejections",
        "Appends rejected by the disk budget",
        &m.budget_rejections,
    );
    register(
        r,
        "groups_committed",
        "Write groups committed with one fdatasync each",
        &m.groups_committed,
    );
    register(
        r,
        "fsync_seconds",
        "Latency of each group's fdatasync",
        &m.fsync_seconds,
    );
    register(
        r,
        "group_records",
        "Records per committed group",
        &m.group_records,
    );
    register(
        r,
        "overload_rejections",
        "Writes refused with 503 overloaded because the writer's queue was full",
        &m.overload_rejections,
    );
    register(
        r,
        "groups_refused",
        "Groups refused because storage failed before any of them was written",
        &m.groups_refused,
    );
    register(
        r,
        "writer_queue_depth",
        "Requests waiting for the writer",
        &m.queue_depth,
    );
}

/// The data directory: bytes, segments, reclaiming, compaction, checkpoints.
fn register_disk(r: &mut Registry, m: &Metrics) {
    register(
        r,
        "disk_bytes",
        "Bytes of the data directory's files",
        &m.disk_bytes,
    );
    register(
        r,
        "live_bytes",
        "Bytes of live records frames",
        &m.live_bytes,
    );
    register(r, "segments", "Segment files", &m.segments);
    register(
        r,
        "reclaimed_bytes",
        "Segment bytes given back by deletion",
        &m.reclaimed_bytes,
    );
    register(
        r,
        "segments_deleted",
        "Segments deleted",
        &m.segments_deleted,
    );
    register(r, "compactions", "Segments compacted", &m.compactions);
    register(
        r,
        "compaction_frames_copied",
        "Frames copied forward by compaction",
        &m.compaction_frames_copied,
    );
    register(
        r,
        "compaction_bytes_copied",
        "Bytes copied forward by compaction",
        &m.compaction_bytes_copied,
    );
    register(
        r,
        "compaction_dead_on_arrival",
        "Frames compaction chose that died before the copy",
        &m.compaction_dead_on_arrival,
    );
    register(
        r,
        "compaction_corrupt_frames",
        "Frames compaction refused to copy for a bad CRC",
        &m.compaction_corrupt_frames,
    );
    register(
        r,
        "compaction_seconds",
        "Time to compact one segment",
        &m.compaction_seconds,
    );
    register(r, "checkpoints", "Checkpoints written", &m.checkpoints);
    register(
        r,
        "checkpoint_seconds",
        "Time to write one checkpoint",
        &m.checkpoint_seconds,
    );
    register(
        r,
        "checkpoint_failures",
        "Checkpoints that failed to write and will be retried",
        &m.checkpoint_failures,
    );
}

/// Producers, deadlines, cursors, batches, and health.
fn register_protocol(r: &mut Registry, m: &Metrics) {
    for (name, help, c) in [
        (
            "producer_duplicates",
            "Idempotent appends answered as duplicates",
            &m.producer_duplicates,
        ),
        (
            "producer_evictions",
            "Producers evicted beyond producers_per_stream_max",
            &m.producer_evictions,
        ),
        (
            "producer_rejections",
            "Appends refused by the producer rules",
            &m.producer_rejections,
        ),
        (
            "deadline_rejections",
            "Writes refused past their not_after_ms",
            &m.deadline_rejections,
        ),
        (
            "cursor_commits",
            "Cursor commits made durable",
            &m.cursor_commits,
        ),
        (
            "batches_accepted",
            "Multi-stream batches applied",
            &m.batches_accepted,
        ),
        (
            "batches_refused",
            "Multi-stream batches refused whole",
            &m.batches_refused,
        ),
    ] {
        register(r, name, help, c);
    }
    register(
        r,
        "healthy",
        "1 while writes are accepted, 0 once storage failed (until a restart) or shutdown began",
        &m.healthy,
    );
}

impl Metrics {
    /// Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
