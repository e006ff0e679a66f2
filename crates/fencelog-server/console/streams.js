// The streams table: every stream in name order, with prefix search and
// paging (the API's start_after / next_start_after), refreshed while open.
// Columns the server does not send (sealed, live bytes, before the
// lifecycle routes exist) are left out rather than shown empty.

import { getJson } from "./api.js";
import { el, fill } from "./dom.js";
import { formatAgo, formatBytes, formatTime } from "./format.js";

const REFRESH_MS = 5000;
const PAGE_SIZES = [25, 100, 500];

const num = (v) => el("td", { class: "num" }, String(v));
const has = (key) => (rows) => rows.some((r) => key in r);
const bytesKey = (r) => ["live_bytes", "bytes"].find((k) => k in r);

const COLUMNS = [
  {
    title: "Stream",
    show: () => true,
    cell: (r) => el("td", {}, el("a", { href: `#/stream/${encodeURIComponent(r.stream)}` }, r.stream)),
  },
  { title: "First seq", show: () => true, cell: (r) => num(r.first_seq) },
  { title: "Next seq", show: () => true, cell: (r) => num(r.next_seq) },
  { title: "Highest token", show: () => true, cell: (r) => num(r.highest_token) },
  { title: "Sealed", show: has("sealed"), cell: (r) => el("td", {}, r.sealed ? "sealed" : "") },
  {
    title: "Last write",
    show: () => true,
    cell: (r) => el("td", { title: formatTime(r.last_timestamp_ms) }, formatAgo(r.last_timestamp_ms)),
  },
  {
    title: "Live bytes",
    show: (rows) => rows.some(bytesKey),
    cell: (r) => el("td", { class: "num" }, bytesKey(r) ? formatBytes(r[bytesKey(r)]) : ""),
  },
];

function table(rows) {
  const columns = COLUMNS.filter((c) => c.show(rows));
  return el(
    "table",
    { class: "streams" },
    el("thead", {}, el("tr", {}, columns.map((c) => el("th", {}, c.title)))),
    el(
      "tbody",
      {},
      rows.length
        ? rows.map((r) => el("tr", { dataset: { stream: r.stream } }, columns.map((c) => c.cell(r))))
        : el("tr", {}, el("td", { colspan: columns.length, class: "empty" }, "No streams match.")),
    ),
  );
}

/**
 * `params`: prefix, limit, and `trail`, the start_after of each page so far
 * joined with commas (stream names never contain one).
 */
export function streams(view, params) {
  const state = {
    prefix: params.get("prefix") ?? "",
    limit: Number(params.get("limit")) || PAGE_SIZES[0],
    trail: (params.get("trail") ?? "").split(",").filter(Boolean),
  };
  const search = el("input", { type: "search", placeholder: "name prefix", value: state.prefix, "aria-label": "Prefix" });
  const size = el("select", { "aria-label": "Page size" }, PAGE_SIZES.map((n) => el("option", { value: n, selected: n === state.limit }, `${n} per page`)));
  const holder = el("div", { class: "table-holder" });
  const prev = el("button", { type: "button" }, "‹ Previous");
  const next = el("button", { type: "button" }, "Next ›");
  const where = el("span", { class: "where" });
  fill(view, el("h1", {}, "Streams"), el("div", { class: "toolbar" }, search, size), holder, el("div", { class: "pager" }, prev, where, next));

  let nextAfter = null;
  let generation = 0;
  const load = async () => {
    const mine = ++generation;
    const query = { prefix: state.prefix, limit: state.limit, start_after: state.trail[state.trail.length - 1] };
    try {
      const page = await getJson("/v1/streams", query);
      if (mine !== generation) return;
      nextAfter = page.next_start_after ?? null;
      fill(holder, table(page.streams));
      prev.disabled = state.trail.length === 0;
      next.disabled = nextAfter === null;
      where.textContent = `page ${state.trail.length + 1}`;
    } catch (e) {
      if (mine === generation) fill(holder, el("p", { class: "error" }, `Cannot list streams: ${e.message}`));
    }
  };
  const go = () => {
    const q = new URLSearchParams();
    if (state.prefix) q.set("prefix", state.prefix);
    if (state.limit !== PAGE_SIZES[0]) q.set("limit", String(state.limit));
    if (state.trail.length) q.set("trail", state.trail.join(","));
    history.replaceState(null, "", `#/streams${q.size ? `?${q}` : ""}`);
    load();
  };
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      state.prefix = search.value.trim();
      state.trail = [];
      go();
    }, 200);
  });
  size.addEventListener("change", () => {
    state.limit = Number(size.value);
    state.trail = [];
    go();
  });
  next.addEventListener("click", () => {
    if (nextAfter !== null) state.trail.push(nextAfter);
    go();
  });
  prev.addEventListener("click", () => {
    state.trail.pop();
    go();
  });
  load();
  const timer = setInterval(load, REFRESH_MS);
  return { stop: () => clearInterval(timer) };
}
