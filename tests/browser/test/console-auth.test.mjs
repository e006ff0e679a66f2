// The web console against a server with scoped access tokens, made by
// `fencelog token create`: the console asks for a token, a `read` token
// shows the streams table, a stream's records and its live tail, the
// overview says its charts need `admin` (instead of failing), and with an
// admin token the charts load. A producer with its own append token writes
// through the API. Screenshots land in target/browser/.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Servers, fencelogBin } from "../../../clients/typescript/testlib/server.mjs";
import { api } from "../lib/api.mjs";
import { launch, screenshot, shown, texts, watchedPage } from "../lib/browser.mjs";

const STREAM = "invoices";

let servers;
let server;
let browser;
let w;
/** name → secret, of the tokens the server's config file lists. */
const secrets = {};

const eventually = (fn, arg, what) => shown(w.page, fn, arg, what);
const rowTexts = (selector) => texts(w.page, selector);

/** `fencelog token create`: the secret it prints, and the whole output (the stanza). */
function tokenCreate(name, scopes) {
  const out = execFileSync(fencelogBin(), ["token", "create", "--name", name, "--scopes", scopes], { encoding: "utf8" });
  const secret = out.match(/^# (fl_[0-9a-f]{64})$/m)?.[1];
  assert.ok(secret, `no secret in the output of token create:\n${out}`);
  assert.match(out, /^\[\[auth\.tokens\]\]$/m);
  secrets[name] = secret;
  return out;
}

/** Enters `secret` in the open token dialog and submits it. */
async function enterToken(secret) {
  await eventually(() => document.getElementById("auth").open, null, "the token dialog");
  await w.page.getByLabel("Token", { exact: true }).fill(secret);
  await w.page.getByRole("button", { name: "Use token" }).click();
}

const dialogWhy = () => w.page.locator("#auth-why").innerText();

describe("the web console with access tokens", () => {
  before(async () => {
    servers = new Servers("console-auth");
    const config = join(servers.dir, "fencelog.toml");
    writeFileSync(config, [tokenCreate("console-read", "read"), tokenCreate("console-admin", "admin,read"), tokenCreate("producer", "append,fence")].join("\n"));
    server = await servers.start({ args: ["--config", config] });
    browser = await launch();
    w = await watchedPage(browser.context);
  });

  after(async () => {
    await browser?.close();
    await servers?.cleanup();
  });

  test("the tokens are scoped: none is refused, read cannot append, the producer can", async () => {
    const anonymous = await fetch(`${server.url}/v1/streams`);
    assert.equal(anonymous.status, 401);
    assert.equal((await anonymous.json()).error, "unauthenticated");
    const reader = await api(server.url, { bearer: secrets["console-read"] }).append(STREAM, 41, ["read-only"]);
    assert.equal(reader.status, 403);
    assert.deepEqual([reader.body.error, reader.body.scope, reader.body.principal], ["forbidden", "append", "console-read"]);
    const log = api(server.url, { bearer: secrets.producer });
    assert.equal((await log.append(STREAM, 41, ["A: invoice 1001 drafted", "A: invoice 1001 priced"])).status, 200);
    assert.equal((await log.append(STREAM, 42, ["B: invoice 1001 sent"])).status, 200);
  });

  test("the console asks for a token, says what each scope shows, and refuses a wrong one", async () => {
    await w.page.goto(`${server.url}/console`);
    await eventually(() => document.getElementById("auth").open, null, "the token dialog");
    assert.equal(await dialogWhy(), "This server asks for an access token.");
    assert.equal(
      await w.page.locator("#auth-scopes").innerText(),
      "A token with the read scope shows streams and records. The overview's charts read /metrics, which needs the admin scope; " +
        "a server started with --metrics-listen serves its metrics without a token on that separate address, for scrapers.",
    );
    await enterToken("fl_not-a-token");
    await eventually(() => document.getElementById("auth-why").textContent.startsWith("The server refused"), null, "the wrong token refused");
    assert.equal(await dialogWhy(), "The server refused that token (unknown access token). Enter another one.");
    assert.equal(await w.page.locator("#auth").evaluate((d) => d.open), true);
  });

  test("with the read token the overview says its charts need admin", async () => {
    await enterToken(secrets["console-read"]);
    await eventually(() => document.querySelector("[data-role=admin-needed]"), null, "the admin note");
    assert.equal(
      (await w.page.locator("[data-role=admin-needed]").innerText()).replace(/\s+/g, " ").trim(),
      "The overview's charts need a token with the admin scope. " +
        'GET /metrics answered 403 forbidden: token "console-read" lacks scope admin. ' +
        "Streams and records need only the read scope, so the rest of the console works with this token. " +
        "Prometheus can scrape a --metrics-listen address without a token instead. Use an admin token",
    );
    assert.equal(await w.page.locator(".card").count(), 0, "no charts without admin");
    assert.equal(await w.page.locator("#auth").evaluate((d) => d.open), false);
    assert.equal(await w.page.locator("#health").innerText(), "accepting writes");
    await screenshot(w.page, "console-auth-read.png");
  });

  test("the read token shows the streams table, a stream's records and its live tail", async () => {
    await w.page.getByRole("link", { name: "Streams" }).click();
    await eventually(() => document.querySelectorAll("table.streams tbody tr").length === 1, null, "the streams table");
    assert.equal((await rowTexts("table.streams tbody tr"))[0].split(" ").slice(0, 4).join(" "), `${STREAM} 0 3 42`);
    await w.page.getByRole("link", { name: STREAM }).click();
    await eventually(() => document.querySelectorAll("table.records:not(.live) tbody tr").length === 3, null, "the records");
    const records = await rowTexts("table.records:not(.live) tbody tr");
    assert.match(records[0], /^0 41 \S+ \S+ A: invoice 1001 drafted$/);
    assert.match(records[1], /^1 41 \S+ \S+ A: invoice 1001 priced$/);
    assert.match(records[2], /^2 42 \S+ \S+ B: invoice 1001 sent$/);
    await eventually(() => document.querySelector(".tail-status")?.dataset.status === "live", null, "the live tail connected");
    assert.equal((await api(server.url, { bearer: secrets.producer }).append(STREAM, 42, ["B: invoice 1001 paid"])).status, 200);
    await eventually(() => document.querySelector("table.live tbody tr")?.dataset.seq === "3", null, "the new record in the live tail");
    assert.match((await rowTexts("table.live tbody tr"))[0], /^3 42 \S+ \S+ B: invoice 1001 paid$/);
    assert.equal(await w.page.locator("#auth").evaluate((d) => d.open), false, "no second token asked for");
  });

  test("with the admin token the overview's charts load", async () => {
    await w.page.getByRole("link", { name: "Overview" }).click();
    await eventually(() => document.querySelector("[data-role=admin-needed]"), null, "the admin note, still the read token");
    await w.page.getByRole("button", { name: "Use an admin token" }).click();
    await eventually(() => document.getElementById("auth").open, null, "the token dialog");
    assert.equal(await dialogWhy(), "The overview's charts need a token with the admin scope.");
    await enterToken(secrets["console-admin"]);
    await eventually(() => document.querySelector(".note")?.textContent.startsWith("From GET /metrics"), null, "a scrape with the admin token");
    assert.equal(await w.page.locator("[data-role=admin-needed]").count(), 0);
    assert.deepEqual(await w.page.locator(".card").evaluateAll((cards) => cards.map((c) => c.id)), ["card-appends", "card-rejections", "card-fsync", "card-group"]);
    // The producer's three appends of four records, counted since the server started.
    assert.match(await w.page.locator("#card-appends [data-role=totals]").innerText(), /^3 appends, 4 records, /);
    await eventually(() => Number(document.querySelector("#card-appends .chart")?.dataset.points) >= 1, null, "a second scrape drawn");
    await screenshot(w.page, "console-auth-admin.png");
  });

  test("nothing failed but the refusals the test asked for, and nothing foreign loaded", () => {
    const foreign = w.requests.filter((u) => !u.startsWith(server.url) && !u.startsWith("data:"));
    assert.deepEqual(foreign, []);
    const unexpected = w.problems.filter((p) => !/^console: Failed to load resource: the server responded with a status of (401|403) /.test(p));
    assert.deepEqual(unexpected, []);
  });
});
