// The token timeline section of a stream page: when ownership changed and
// what each owner wrote, as a bar (one segment per run of one token, wide
// as its records) and a table.

import { getJson, hasRoute, streamPath } from "./api.js";
import { el, fill } from "./dom.js";
import { bodyText, formatTime, tokenHue } from "./format.js";
import { tokenCell } from "./records.js";
import { extendRuns, fencedAbove, runsFromFences, runsFromRecords } from "./timeline.js";

/** Records read to build the timeline when the server has no fence history. */
const TIMELINE_RECORDS = 5000;
const READ_PAGE = 1000;
const FENCES_LIMIT = 64;

async function recentRecords(name, state) {
  const start = Math.max(state.first_seq, state.next_seq - TIMELINE_RECORDS);
  const records = [];
  let seq = start;
  while (seq < state.next_seq && records.length < TIMELINE_RECORDS) {
    const page = await getJson(`${streamPath(name)}/records`, { start_seq: seq, count: READ_PAGE });
    if (page.records.length === 0) break;
    records.push(...page.records);
    seq = page.next_start_seq ?? page.records[page.records.length - 1].seq + 1;
  }
  return { start, records };
}

/** `{source, runs, note}`: the fence history if the server has the route. */
async function loadRuns(name, state) {
  if (await hasRoute("get /v1/streams/{stream}/fences")) {
    const answer = await getJson(`${streamPath(name)}/fences`, { limit: FENCES_LIMIT });
    const fences = Array.isArray(answer) ? answer : answer.fences;
    return { source: "fences", fences, runs: runsFromFences(fences, state), note: "From the stream's fence history." };
  }
  const { start, records } = await recentRecords(name, state);
  const span = records.length ? `seq ${start}–${records[records.length - 1].seq}` : "no records";
  return {
    source: "records",
    runs: runsFromRecords(records),
    note: `From the tokens in the records (${span}; the server keeps no fence history). A token with no record is shown from the stream's highest token.`,
  };
}

function runText(run) {
  if (run.sample) {
    const text = bodyText(run.sample);
    return text === null ? "(binary)" : text.length > 80 ? `${text.slice(0, 80)}…` : text;
  }
  return run.by ? `by ${run.by}` : "";
}

function bar(runs, fenced) {
  const segment = (token, grow, title) =>
    el("span", { class: "segment", style: { "flex-grow": grow, "--hue": tokenHue(token) }, title, dataset: { token: String(token) } });
  return el(
    "div",
    { class: "timeline-bar", role: "img", "aria-label": "ownership over seqs" },
    runs.map((r) => segment(r.token, Math.max(r.count, 1), `token ${r.token}: seq ${r.firstSeq}–${r.lastSeq} (${r.count} records)`)),
    fenced ? segment(fenced.token, 1, `token ${fenced.token}: fenced at seq ${fenced.atSeq}, no records yet`) : null,
  );
}

function table(runs, fenced) {
  const rows = runs.map((r) =>
    el(
      "tr",
      { dataset: { token: String(r.token) } },
      tokenCell(r.token),
      el("td", { class: "num" }, r.count ? `${r.firstSeq}–${r.lastSeq}` : `at ${r.firstSeq}`),
      el("td", { class: "num" }, String(r.count)),
      el("td", { class: "time" }, formatTime(r.firstMs)),
      el("td", { class: "time" }, r.lastMs ? formatTime(r.lastMs) : ""),
      el("td", { class: "body" }, runText(r)),
    ),
  );
  if (fenced) {
    rows.push(el("tr", { dataset: { token: String(fenced.token) } }, tokenCell(fenced.token), el("td", { class: "num" }, `at ${fenced.atSeq}`), el("td", { class: "num" }, "0"), el("td", { colspan: 3 }, "fenced: took over without writing (yet)")));
  }
  return el(
    "table",
    { class: "timeline" },
    el("thead", {}, el("tr", {}, ["Token", "Seqs", "Records", "From", "To", "First record"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 6, class: "empty" }, "No token has written yet."))),
  );
}

/**
 * The section, and `add(records, state)` for the live tail to extend it.
 * The tail starts where the timeline's read ended (`state.next_seq`), so
 * records that arrive while it loads are kept and applied after.
 */
export function timelineSection(name, state) {
  const holder = el("div", {}, el("p", { class: "note" }, "Loading…"));
  const node = el("section", { class: "timeline-section" }, el("h2", {}, "Token timeline"), holder);
  let loaded = null;
  let pending = [];
  let latest = state;
  const render = () => {
    const fenced = fencedAbove(loaded.runs, latest);
    fill(holder, el("p", { class: "note" }, loaded.note), bar(loaded.runs, fenced), table(loaded.runs, fenced));
  };
  const load = () =>
    loadRuns(name, latest)
      .then((l) => {
        loaded = l;
        if (l.source === "records") extendRuns(l.runs, pending);
        pending = [];
        render();
      })
      .catch((e) => fill(holder, el("p", { class: "error" }, `Cannot build the timeline: ${e.message}`)));
  load();
  return {
    node,
    add(records, s) {
      latest = s;
      if (!loaded) {
        pending.push(...records);
      } else if (loaded.source === "records") {
        extendRuns(loaded.runs, records);
        render();
      } else {
        // A token the history does not have yet means a new owner: ask again.
        const newest = loaded.fences[0]?.fencing_token;
        if (records.some((r) => String(r.fencing_token) !== String(newest))) load();
        else {
          loaded.runs = runsFromFences(loaded.fences, s);
          render();
        }
      }
    },
  };
}
