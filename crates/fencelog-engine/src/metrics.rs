//! Engine metrics, kept with prometheus-client so the HTTP layer only has
//! to encode the registry.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicI64;

/// The engine's metrics, registered under the `fencelog_` prefix; the
/// help text of each is in [`Metrics::default`].
pub struct Metrics {
    /// Every metric below, for [`Metrics::encode`].
    pub registry: Registry,
    /// Appends acknowledged as durable.
    pub appends_accepted: Counter,
    /// Fences acknowledged as durable (re-fences that wrote nothing do
    /// not count).
    pub fences_accepted: Counter,
    /// Records made durable.
    pub records_written: Counter,
    /// Frame bytes made durable.
    pub bytes_written: Counter,
    /// Writes refused for a stale fencing token, on the fast path or by the
    /// writer.
    pub stale_rejections: Counter,
    /// Appends refused because `match_seq_num` differed.
    pub seq_mismatches: Counter,
    /// Groups committed, one `sync_data` each.
    pub groups_committed: Counter,
    /// Latency of each group's write and `sync_data`.
    pub fsync_seconds: Histogram,
    /// Records per committed group.
    pub group_records: Histogram,
    /// Requests waiting for the writer when it last took a group.
    pub queue_depth: Gauge<i64, AtomicI64>,
    /// 1 while the engine accepts writes, 0 once it is poisoned or shutting
    /// down; set by whoever encodes (a scrape), like `queue_depth`.
    pub healthy: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("fencelog");
        let m = Metrics {
            appends_accepted: Counter::default(),
            fences_accepted: Counter::default(),
            records_written: Counter::default(),
            bytes_written: Counter::default(),
            stale_rejections: Counter::default(),
            seq_mismatches: Counter::default(),
            groups_committed: Counter::default(),
            // 10 µs .. ~1.3 s
            fsync_seconds: Histogram::new(exponential_buckets(0.000_01, 2.0, 18)),
            // 1 .. 4096 records per group
            group_records: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            queue_depth: Gauge::default(),
            healthy: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "appends_accepted",
            "Appends acknowledged as durable",
            m.appends_accepted.clone(),
        );
        registry.register(
            "fences_accepted",
            "Fences acknowledged as durable",
            m.fences_accepted.clone(),
        );
        registry.register(
            "records_written",
            "Records made durable",
            m.records_written.clone(),
        );
        registry.register(
            "bytes_written",
            "Frame bytes made durable",
            m.bytes_written.clone(),
        );
        registry.register(
            "stale_rejections",
            "Writes rejected for a stale fencing token",
            m.stale_rejections.clone(),
        );
        registry.register(
            "seq_mismatches",
            "Appends rejected because match_seq_num differed",
            m.seq_mismatches.clone(),
        );
        registry.register(
            "groups_committed",
            "Write groups committed with one fdatasync each",
            m.groups_committed.clone(),
        );
        registry.register(
            "fsync_seconds",
            "Latency of each group's fdatasync",
            m.fsync_seconds.clone(),
        );
        registry.register(
            "group_records",
            "Records per committed group",
            m.group_records.clone(),
        );
        registry.register(
            "writer_queue_depth",
            "Requests waiting for the writer",
            m.queue_depth.clone(),
        );
        registry.register(
            "healthy",
            "1 while writes are accepted, 0 once storage failed (until a restart) or shutdown began",
            m.healthy.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
