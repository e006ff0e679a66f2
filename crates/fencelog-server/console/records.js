// A stream's records, one page at a time, as text or as a hex dump. Pages
// continue after the last record shown (next_start_seq when the server
// sends it), never at next_seq, so paging cannot skip a record.

import { getJson, streamPath } from "./api.js";
import { el, fill } from "./dom.js";
import { bodyBytes, bodyText, formatTime, hexDump, tokenHue } from "./format.js";

export const PAGE_RECORDS = 50;

export function tokenCell(token) {
  return el("td", { class: "num token", style: { "--hue": tokenHue(token) } }, String(token));
}

/** The body cell: text (binary shown as hex anyway), or a hex dump. */
function bodyCell(record, as) {
  const text = bodyText(record);
  if (as === "hex" || text === null) {
    const bytes = bodyBytes(record);
    return el("td", { class: "body hex" }, el("pre", {}, hexDump(bytes, as === "hex" ? 16 : 4)));
  }
  return el("td", { class: "body" }, el("pre", {}, text));
}

export function recordRow(record, as) {
  return el(
    "tr",
    { dataset: { seq: String(record.seq) } },
    el("td", { class: "num" }, String(record.seq)),
    tokenCell(record.fencing_token),
    el("td", { class: "time" }, formatTime(record.timestamp_ms)),
    bodyCell(record, as),
  );
}

export function recordsTable(records, as, emptyText) {
  return el(
    "table",
    { class: "records" },
    el("thead", {}, el("tr", {}, el("th", {}, "Seq"), el("th", {}, "Token"), el("th", {}, "Written"), el("th", {}, "Body"))),
    el(
      "tbody",
      {},
      records.length ? records.map((r) => recordRow(r, as)) : el("tr", {}, el("td", { colspan: 4, class: "empty" }, emptyText)),
    ),
  );
}

/**
 * The paged records section. `opts.from` is the first seq to show (default:
 * the last page), `opts.as` "text" or "hex"; `onMove(from, as)` is told so
 * the page's address can follow.
 */
export function recordsSection(name, getState, opts, onMove) {
  let from = opts.from;
  let as = opts.as === "hex" ? "hex" : "text";
  const holder = el("div", { class: "table-holder" });
  const where = el("span", { class: "where" });
  const button = (label, onclick) => el("button", { type: "button", onclick }, label);
  const seqInput = el("input", { type: "number", min: 0, placeholder: "seq", "aria-label": "Go to seq" });
  const toggle = el("button", { type: "button", class: "toggle" }, "");
  let page = null;

  const load = async () => {
    const s = getState();
    const start = Math.max(s.first_seq, from ?? s.next_seq - PAGE_RECORDS);
    try {
      page = await getJson(`${streamPath(name)}/records`, { start_seq: start, count: PAGE_RECORDS });
      page.start = start;
      fill(holder, recordsTable(page.records, as, "No records here."));
      const last = page.records.length ? page.records[page.records.length - 1].seq : start - 1;
      where.textContent = page.records.length ? `seq ${start}–${last} of ${s.first_seq}–${page.next_seq - 1}` : `nothing at seq ${start}`;
    } catch (e) {
      fill(holder, el("p", { class: "error" }, `Cannot read records: ${e.message}`));
    }
    toggle.textContent = as === "hex" ? "Show as text" : "Show as hex";
    onMove(from, as);
  };
  const move = (to) => {
    from = to;
    load();
  };
  const afterPage = () => page.next_start_seq ?? page.start + page.records.length;
  const controls = el(
    "div",
    { class: "pager" },
    button("« First", () => move(getState().first_seq)),
    button("‹ Older", () => move(Math.max(getState().first_seq, (page?.start ?? 0) - PAGE_RECORDS))),
    where,
    button("Newer ›", () => move(page ? afterPage() : undefined)),
    button("Latest »", () => move(undefined)),
    el("form", { class: "goto", onsubmit: (e) => (e.preventDefault(), seqInput.value !== "" && move(Number(seqInput.value))) }, seqInput, el("button", { type: "submit" }, "Go")),
    toggle,
  );
  toggle.addEventListener("click", () => {
    as = as === "hex" ? "text" : "hex";
    load();
  });
  load();
  return {
    node: el("section", { class: "records-section" }, el("h2", {}, "Records"), controls, holder),
    /** New records arrived: the last page (the default) shows them. */
    grew() {
      if (from === undefined) load();
    },
  };
}
