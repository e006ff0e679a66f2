// The overview's numbers, from the server's own /metrics (OpenMetrics
// text): a parser, and the rates between two scrapes. Pure, so the unit
// tests run it in Node.

/** `name{labels} value` lines → Map name → [{labels, value}]. */
export function parseMetrics(text) {
  const out = new Map();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = line.match(/^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] ?? "").matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    const value = Number(m[3]);
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value });
  }
  return out;
}

/** The sum of every sample of `name` (0 when the server has none). */
export function total(metrics, name) {
  return (metrics.get(name) ?? []).reduce((sum, s) => sum + s.value, 0);
}

/** A histogram's cumulative buckets, `[{le, count}]` by increasing `le`. */
export function buckets(metrics, name) {
  return (metrics.get(`${name}_bucket`) ?? [])
    .map((s) => ({ le: Number(s.labels.le), count: s.value }))
    .sort((a, b) => a.le - b.le);
}

/** A counter's increase; a decrease means the server restarted (reset to 0). */
function increase(before, after) {
  return after >= before ? after - before : after;
}

/**
 * The `q` quantile of the observations between two scrapes, interpolated
 * linearly inside its bucket the way Prometheus' histogram_quantile does;
 * null when nothing was observed.
 */
export function quantile(q, before, after) {
  const delta = after.map((b, i) => ({ le: b.le, count: increase(before[i]?.count ?? 0, b.count) }));
  const n = delta.length ? delta[delta.length - 1].count : 0;
  if (n === 0) return null;
  const rank = q * n;
  let lower = 0;
  let below = 0;
  for (const b of delta) {
    if (b.count >= rank) {
      if (!Number.isFinite(b.le)) return lower;
      const inBucket = b.count - below;
      return inBucket === 0 ? b.le : lower + (b.le - lower) * ((rank - below) / inBucket);
    }
    lower = b.le;
    below = b.count;
  }
  return lower;
}

/** What the overview draws, between two scrapes `{at_ms, metrics}`. */
export function rates(before, after) {
  const seconds = (after.at_ms - before.at_ms) / 1000;
  const d = (name) => increase(total(before.metrics, name), total(after.metrics, name));
  const perSecond = (name) => (seconds > 0 ? d(name) / seconds : 0);
  const groups = d("fencelog_fsync_seconds_count");
  const grouped = d("fencelog_group_records_count");
  return {
    from_ms: before.at_ms,
    at_ms: after.at_ms,
    appends: perSecond("fencelog_appends_accepted_total"),
    records: perSecond("fencelog_records_written_total"),
    bytes: perSecond("fencelog_bytes_written_total"),
    fences: perSecond("fencelog_fences_accepted_total"),
    stale: perSecond("fencelog_stale_rejections_total"),
    mismatches: perSecond("fencelog_seq_mismatches_total"),
    groups: perSecond("fencelog_groups_committed_total"),
    fsyncMean: groups > 0 ? d("fencelog_fsync_seconds_sum") / groups : null,
    fsyncP99: quantile(
      0.99,
      buckets(before.metrics, "fencelog_fsync_seconds"),
      buckets(after.metrics, "fencelog_fsync_seconds"),
    ),
    groupRecords: grouped > 0 ? d("fencelog_group_records_sum") / grouped : null,
    queueDepth: total(after.metrics, "fencelog_writer_queue_depth"),
  };
}

/** Totals since the server started, from one scrape. */
export function totals(metrics) {
  return {
    appends: total(metrics, "fencelog_appends_accepted_total"),
    records: total(metrics, "fencelog_records_written_total"),
    bytes: total(metrics, "fencelog_bytes_written_total"),
    stale: total(metrics, "fencelog_stale_rejections_total"),
    mismatches: total(metrics, "fencelog_seq_mismatches_total"),
    groups: total(metrics, "fencelog_groups_committed_total"),
  };
}

/** A bounded history of scrapes and the rates between them. */
export class History {
  constructor(windowMs) {
    this.windowMs = windowMs;
    /** When the first scrape was taken (the history's left edge). */
    this.startedMs = null;
    this.last = null;
    this.points = [];
  }

  /** Adds a scrape; returns the new point, or null for the first scrape. */
  add(scrape) {
    const before = this.last;
    this.last = scrape;
    this.startedMs ??= scrape.at_ms;
    if (!before) return null;
    const point = rates(before, scrape);
    this.points.push(point);
    const oldest = scrape.at_ms - this.windowMs;
    while (this.points.length && this.points[0].at_ms < oldest) this.points.shift();
    return point;
  }
}
