// The overview: appends/s, rejections/s, fsync latency and group size over
// the last minutes, scraped from the server's own /metrics every few
// seconds (the history starts when the page opens).

import { askToken, getText } from "./api.js";
import { lineChart } from "./chart.js";
import { el, fill } from "./dom.js";
import { formatBytes, formatNumber, formatSeconds } from "./format.js";
import { History, parseMetrics, totals } from "./metrics.js";

const WINDOW_MS = 5 * 60 * 1000;
const SCRAPE_MS = 2000;

/** The cards: which rates each draws, and what its footer says. */
const CARDS = [
  {
    id: "appends",
    title: "Appends / s",
    series: [{ key: "appends", label: "appends", className: "s1" }],
    format: formatNumber,
    footer: (t, p) => `${formatNumber(t.appends)} appends, ${formatNumber(t.records)} records, ${formatBytes(t.bytes)} since start · ${formatBytes(p?.bytes ?? 0)}/s`,
  },
  {
    id: "rejections",
    title: "Rejections / s",
    series: [
      { key: "stale", label: "stale token", className: "s2" },
      { key: "mismatches", label: "seq mismatch", className: "s3" },
    ],
    format: formatNumber,
    footer: (t) => `${formatNumber(t.stale)} stale-token, ${formatNumber(t.mismatches)} seq-mismatch rejections since start`,
  },
  {
    id: "fsync",
    title: "fsync latency",
    series: [
      { key: "fsyncMean", label: "mean", className: "s1" },
      { key: "fsyncP99", label: "p99", className: "s2" },
    ],
    format: formatSeconds,
    footer: (t, p) => `${formatNumber(t.groups)} groups since start · ${formatNumber(p?.groups ?? 0)} fsyncs/s`,
  },
  {
    id: "group",
    title: "Group size (records per fsync)",
    series: [{ key: "groupRecords", label: "records per group", className: "s1" }],
    format: formatNumber,
    footer: (_t, p) => `writer queue depth ${formatNumber(p?.queueDepth ?? 0)}`,
  },
];

function card(spec, history, scrapeTotals, nowMs) {
  const points = history.points;
  const latest = points[points.length - 1];
  const legend = spec.series.map((s) =>
    el("span", { class: `legend ${s.className}` }, `${s.label} ${latest ? spec.format(latest[s.key]) : "–"}`),
  );
  const chart = lineChart(
    spec.series.map((s) => ({ className: s.className, values: points.map((p) => ({ from_ms: p.from_ms, at_ms: p.at_ms, v: p[s.key] })) })),
    { windowMs: WINDOW_MS, sinceMs: history.startedMs, nowMs, format: spec.format },
  );
  return el(
    "section",
    { class: "card", id: `card-${spec.id}` },
    el("h2", {}, spec.title),
    el("div", { class: "legends" }, legend),
    chart,
    el("p", { class: "footer", dataset: { role: "totals" } }, spec.footer(scrapeTotals, latest)),
  );
}

/**
 * What the overview says when /metrics answers 403: the token works for the
 * rest of the console, the charts need `admin`, and how to get them.
 */
function adminNeeded(note, error, onRetry) {
  fill(
    note,
    el("strong", {}, "The overview's charts need a token with the admin scope. "),
    `GET /metrics answered 403 ${error.code}: ${error.message}. `,
    "Streams and records need only the read scope, so the rest of the console works with this token. ",
    "Prometheus can scrape a --metrics-listen address without a token instead. ",
    el("button", { type: "button", onclick: onRetry }, "Use an admin token"),
  );
  note.className = "note forbidden";
  note.dataset.role = "admin-needed";
}

export function overview(view) {
  const history = new History(WINDOW_MS);
  const grid = el("div", { class: "cards" });
  const note = el("p", { class: "note" }, "Scraping /metrics…");
  fill(
    view,
    el("h1", {}, "Overview"),
    note,
    grid,
  );
  let stopped = false;
  let timer = null;
  const scrape = async () => {
    try {
      const metrics = parseMetrics(await getText("/metrics"));
      if (stopped) return;
      const now = Date.now();
      history.add({ at_ms: now, metrics });
      const t = totals(metrics);
      fill(grid, CARDS.map((spec) => card(spec, history, t, now)));
      note.textContent = `From GET /metrics every ${SCRAPE_MS / 1000} s since this page opened; rates are per second between scrapes.`;
      note.className = "note";
      delete note.dataset.role;
    } catch (e) {
      if (stopped) return;
      if (e.status === 403) {
        // The same token will be refused again: scrape only once there is another.
        clearInterval(timer);
        fill(grid);
        adminNeeded(note, e, async () => {
          await askToken("The overview's charts need a token with the admin scope.");
          if (!stopped) start();
        });
        return;
      }
      note.textContent = `Cannot read /metrics: ${e.message}`;
      note.className = "note error";
      delete note.dataset.role;
    }
  };
  const start = () => {
    clearInterval(timer);
    scrape();
    timer = setInterval(scrape, SCRAPE_MS);
  };
  start();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
