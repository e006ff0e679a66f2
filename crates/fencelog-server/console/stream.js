// One stream's page: its state, its records (paged, text or hex), its
// token timeline, and a live tail that keeps all three current.

import { ApiError, getJson, streamPath, tail } from "./api.js";
import { el, fill } from "./dom.js";
import { formatAgo, formatBytes, formatTime } from "./format.js";
import { recordRow, recordsSection } from "./records.js";
import { timelineSection } from "./tokens.js";

/** Newest live records kept on the page. */
const TAIL_KEEP = 200;
/** How often "last write: 5 s ago" is brought up to date. */
const AGO_MS = 5000;

function stateList(s) {
  const item = (label, value, title) => [el("dt", {}, label), el("dd", { title, dataset: { field: label } }, value)];
  const bytes = ["live_bytes", "bytes"].find((k) => k in s);
  return el(
    "dl",
    { class: "state" },
    item("first seq", String(s.first_seq)),
    item("next seq", String(s.next_seq)),
    item("highest token", String(s.highest_token)),
    item("last write", formatAgo(s.last_timestamp_ms), formatTime(s.last_timestamp_ms)),
    "sealed" in s ? item("sealed", s.sealed ? "yes" : "no") : null,
    bytes ? item("live bytes", formatBytes(s[bytes])) : null,
  );
}

function tailSection() {
  const status = el("span", { class: "tail-status", dataset: { status: "connecting" } }, "connecting");
  const body = el("tbody", {}, el("tr", { class: "waiting" }, el("td", { colspan: 4, class: "empty" }, "Waiting for new records…")));
  const table = el(
    "table",
    { class: "records live" },
    el("thead", {}, el("tr", {}, el("th", {}, "Seq"), el("th", {}, "Token"), el("th", {}, "Written"), el("th", {}, "Body"))),
    body,
  );
  const node = el("section", { class: "tail-section" }, el("h2", {}, "Live tail ", status), el("div", { class: "table-holder" }, table));
  return {
    node,
    setStatus(s, error) {
      status.dataset.status = s;
      status.textContent = error ? `${s}: ${error.message}` : s;
    },
    add(records) {
      body.querySelector("tr.waiting")?.remove();
      for (const r of records) body.prepend(recordRow(r, "text"));
      while (body.rows.length > TAIL_KEEP) body.lastElementChild.remove();
    },
  };
}

export function stream(view, name, params) {
  fill(view, el("h1", {}, el("a", { href: "#/streams" }, "Streams"), " / ", el("span", { class: "stream-name" }, name)), el("p", { class: "note" }, "Loading…"));
  let stopTail = null;
  let stopped = false;
  let agoTimer = null;
  (async () => {
    let state;
    try {
      state = await getJson(streamPath(name));
    } catch (e) {
      const why = e instanceof ApiError && e.code === "stream_not_found" ? "No such stream." : `Cannot read the stream: ${e.message}`;
      fill(view.querySelector(".note") ?? view, why);
      return;
    }
    if (stopped) return;
    const summary = el("div", {}, stateList(state));
    const records = recordsSection(name, () => state, { from: params.has("from") ? Number(params.get("from")) : undefined, as: params.get("as") }, (from, as) => {
      const q = new URLSearchParams();
      if (from !== undefined) q.set("from", String(from));
      if (as === "hex") q.set("as", "hex");
      history.replaceState(null, "", `#/stream/${encodeURIComponent(name)}${q.size ? `?${q}` : ""}`);
    });
    const timeline = timelineSection(name, state);
    const live = tailSection();
    view.querySelector(".note").remove();
    view.append(summary, live.node, timeline.node, records.node);
    stopTail = tail(name, state.next_seq, {
      onStatus: (s, error) => live.setStatus(s, error),
      onRecords: (batch) => {
        const last = batch[batch.length - 1];
        const highest = [state.highest_token, ...batch.map((r) => r.fencing_token)].reduce((a, b) => (BigInt(b) > BigInt(a) ? b : a));
        state = { ...state, next_seq: last.seq + 1, last_timestamp_ms: last.timestamp_ms, highest_token: highest };
        fill(summary, stateList(state));
        live.add(batch);
        timeline.add(batch, state);
        records.grew();
      },
    });
    agoTimer = setInterval(() => fill(summary, stateList(state)), AGO_MS);
  })();
  return {
    stop() {
      stopped = true;
      stopTail?.();
      clearInterval(agoTimer);
    },
  };
}
