// A small SVG line chart for the overview: series over the history
// window, the newest point at the right edge, the top of the scale
// labelled outside the drawing (the SVG stretches to its box).

import { el, svg } from "./dom.js";

const W = 600;
const H = 100;
const MIN_SPAN_MS = 10_000;

/** `12 s`, `3 min`. */
function span(ms) {
  return ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}

/**
 * Each value held over the interval it was measured in, `[from_ms, at_ms]`
 * (a rate between two scrapes), as runs of points; `v` null (nothing
 * observed) breaks the line.
 */
function steps(values, x, y) {
  const runs = [[]];
  for (const p of values) {
    if (p.v === null) {
      if (runs[runs.length - 1].length) runs.push([]);
      continue;
    }
    runs[runs.length - 1].push(`${x(p.from_ms).toFixed(1)},${y(p.v).toFixed(1)}`, `${x(p.at_ms).toFixed(1)},${y(p.v).toFixed(1)}`);
  }
  return runs.filter((r) => r.length).map((r) => r.join(" "));
}

/**
 * `series`: `[{values: [{from_ms, at_ms, v}], className}]`. `format(v)`
 * labels the scale. The x axis ends at `nowMs` and spans `windowMs`, or
 * less while the history is younger (from `sinceMs`), so a new page draws
 * at once.
 */
export function lineChart(series, { windowMs: maxMs, sinceMs, nowMs, format }) {
  const windowMs = Math.max(MIN_SPAN_MS, Math.min(maxMs, nowMs - sinceMs));
  const visible = (p) => p.v !== null && nowMs - p.at_ms <= windowMs;
  const max = Math.max(0, ...series.flatMap((s) => s.values.filter(visible).map((p) => p.v)));
  const top = max > 0 ? max : 1;
  const x = (at) => Math.max(0, W - ((nowMs - at) / windowMs) * W);
  const y = (v) => H - 1 - (v / top) * (H - 6);
  const lines = series.flatMap((s) =>
    steps(s.values.filter((p) => nowMs - p.at_ms <= windowMs), x, y).map((points) => svg("polyline", { class: `line ${s.className}`, points })),
  );
  return el(
    "div",
    { class: "chart", dataset: { peak: String(max), points: String(series[0]?.values.length ?? 0) } },
    el("span", { class: "scale" }, format(max)),
    svg(
      "svg",
      { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" },
      svg("line", { class: "axis", x1: 0, y1: H, x2: W, y2: H }),
      ...lines,
    ),
    el("span", { class: "span-label" }, `last ${span(windowMs)}`),
  );
}
