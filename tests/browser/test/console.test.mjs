// The web console in a real browser against the real server: producers
// write through the API while the page is open, and the test asserts what
// the page shows — the overview counts a stale rejection, the streams
// table pages and searches, a stream page shows its records as text and
// hex, its token timeline, and a new record arriving in the live tail.
// Screenshots land in target/browser/ (docs/console-*.png are copies).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Servers } from "../../../clients/typescript/testlib/server.mjs";
import { api } from "../lib/api.mjs";
import { launch, screenshot, shown, texts, watchedPage } from "../lib/browser.mjs";

const STREAM = "invoices";

let servers;
let server;
let browser;
let w;

const eventually = (fn, arg, what) => shown(w.page, fn, arg, what);
const rowTexts = (selector) => texts(w.page, selector);

describe("the web console", () => {
  before(async () => {
    servers = new Servers("console");
    server = await servers.start();
    browser = await launch();
    w = await watchedPage(browser.context);
  });

  after(async () => {
    await browser?.close();
    await servers?.cleanup();
  });

  test("the overview shows appends and a stale rejection as they happen", async () => {
    await w.page.goto(`${server.url}/console`);
    await eventually(() => document.querySelector(".note")?.textContent.startsWith("From GET /metrics"), null, "a first scrape");
    const log = api(server.url);
    // Load in a few waves, one per scrape (each scrape adds a point), so the
    // charts have a history to draw: the noise of other producers.
    for (let wave = 1; wave <= 4; wave++) {
      for (let i = 0; i < wave * 3; i++) assert.equal((await log.append("load", 1, [`wave ${wave} record ${i}`])).status, 200);
      await eventually((n) => Number(document.querySelector("#card-appends .chart")?.dataset.points) >= n, wave, `scrape ${wave}`);
    }
    assert.equal((await log.append(STREAM, 41, ["A: invoice 1001 drafted", "A: invoice 1001 priced"])).status, 200);
    assert.equal((await log.append(STREAM, 42, ["B: invoice 1001 sent"])).status, 200);
    const stale = await log.append(STREAM, 41, ["A: invoice 1001 cancelled"]);
    assert.equal(stale.status, 409);
    assert.equal(stale.body.error, "stale_fencing_token");

    await eventually(
      () => {
        const card = document.getElementById("card-rejections");
        return card?.querySelector("[data-role=totals]").textContent.startsWith("1 stale-token") && Number(card.querySelector(".chart").dataset.peak) > 0;
      },
      null,
      "the stale rejection, counted and drawn",
    );
    await eventually(() => Number(document.querySelector("#card-appends .chart")?.dataset.peak) > 0, null, "the appends drawn");
    await eventually(() => document.querySelector("#card-fsync .legend")?.textContent !== "mean –", null, "an fsync latency");
    const totals = await w.page.locator("#card-appends [data-role=totals]").innerText();
    assert.match(totals, /^32 appends, 33 records, /);
    assert.equal(await w.page.locator("#health").innerText(), "accepting writes");
    await screenshot(w.page, "console-overview.png");
  });

  test("the streams table searches by prefix and pages", async () => {
    const log = api(server.url);
    for (let i = 0; i < 30; i++) assert.equal((await log.fence(`orders.${String(i).padStart(2, "0")}`, 7)).status, 200);
    await w.page.goto(`${server.url}/console#/streams`);
    await eventually(() => document.querySelectorAll("table.streams tbody tr").length === 25, null, "a page of 25 streams");
    const first = await rowTexts("table.streams tbody tr");
    assert.equal(first[0].split(" ").slice(0, 4).join(" "), `${STREAM} 0 3 42`);
    assert.equal(first[1].split(" ").slice(0, 4).join(" "), "load 0 30 1");
    assert.equal(first[24].split(" ")[0], "orders.22");
    await w.page.getByRole("button", { name: "Next ›" }).click();
    await eventually(() => document.querySelectorAll("table.streams tbody tr").length === 7, null, "the second page");
    assert.deepEqual((await rowTexts("table.streams tbody tr")).map((r) => r.split(" ")[0]), ["orders.23", "orders.24", "orders.25", "orders.26", "orders.27", "orders.28", "orders.29"]);
    assert.match(w.page.url(), /#\/streams\?trail=orders\.22$/);
    await w.page.getByRole("button", { name: "‹ Previous" }).click();
    await eventually(() => document.querySelector("table.streams tbody tr")?.dataset.stream === "invoices", null, "the first page again");
    await w.page.getByLabel("Prefix").fill("orders.1");
    await eventually(() => document.querySelectorAll("table.streams tbody tr").length === 10, null, "the prefix search");
    const found = (await rowTexts("table.streams tbody tr")).map((r) => r.split(" ")[0]);
    assert.deepEqual(found, Array.from({ length: 10 }, (_, i) => `orders.1${i}`));
    await w.page.getByLabel("Prefix").fill("nothing-here");
    await eventually(() => document.querySelector("table.streams td.empty")?.textContent === "No streams match.", null, "an empty search");
  });

  test("a stream page shows records, the token timeline and the live tail", async () => {
    const log = api(server.url);
    assert.equal((await log.appendRaw(STREAM, 42, new Uint8Array([0x00, 0xff, 0x41]))).status, 200);
    assert.equal((await log.fence(STREAM, 43)).status, 200);
    await w.page.goto(`${server.url}/console#/stream/${STREAM}`);
    await eventually(() => document.querySelectorAll("table.records:not(.live) tbody tr").length === 4, null, "the records");
    const records = await rowTexts("table.records:not(.live) tbody tr");
    assert.match(records[0], /^0 41 \S+ \S+ A: invoice 1001 drafted$/);
    assert.match(records[2], /^2 42 \S+ \S+ B: invoice 1001 sent$/);
    assert.match(records[3], /^3 42 \S+ \S+ 00000000 00 ff 41 \|\.\.A\|$/, "binary bodies are shown as hex");

    // Who owned the stream when, from the server's fence history (this
    // server has the route): A for two records, B for two, then C fenced
    // without writing. (Without the route the console derives the runs
    // from the records and shows a record of each: modules.test.mjs.)
    await eventually(() => document.querySelectorAll("table.timeline tbody tr").length === 3, null, "the token timeline");
    const timeline = await rowTexts("table.timeline tbody tr");
    assert.match(timeline[0], /^41 0–1 2 .* by append$/);
    assert.match(timeline[1], /^42 2–3 2 .* by append$/);
    assert.match(timeline[2], /^43 at 4 0 .* by fence$/);
    assert.equal(await w.page.locator(".timeline-bar .segment").count(), 3);

    await eventually(() => document.querySelector(".tail-status")?.dataset.status === "live", null, "the live tail connected");
    assert.equal((await log.append(STREAM, 43, ["C: invoice 1001 archived"])).status, 200);
    await eventually(() => document.querySelector("table.live tbody tr")?.dataset.seq === "4", null, "the new record in the live tail");
    assert.match((await rowTexts("table.live tbody tr"))[0], /^4 43 \S+ \S+ C: invoice 1001 archived$/);
    await eventually(() => document.querySelector("dd[data-field='next seq']")?.textContent === "5", null, "the state following the tail");
    await eventually(() => /^43\s+4–4\s+1\b/.test(document.querySelector("table.timeline tbody tr:last-child")?.innerText ?? ""), null, "C's record in the timeline");
    const stale = await log.append(STREAM, 42, ["B: too late"]);
    assert.equal(stale.status, 409);
    await screenshot(w.page, "console-stream.png");

    await w.page.getByRole("button", { name: "Show as hex" }).click();
    await eventually(() => document.querySelector("table.records:not(.live) tbody td.body")?.textContent.startsWith("00000000  41 3a 20"), null, "the records as hex");
    assert.match(w.page.url(), /#\/stream\/invoices\?as=hex$/);
  });

  test("the console loads nothing from anywhere but the server, and nothing failed", () => {
    const foreign = w.requests.filter((u) => !u.startsWith(server.url) && !u.startsWith("data:"));
    assert.deepEqual(foreign, []);
    assert.deepEqual(w.problems, []);
  });
});
