// Appends, reads, paging and listing against the real server.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";

import * as f from "../dist/index.js";
import { bytes, Servers, streamName } from "../testlib/server.mjs";

const U64_MAX = 18446744073709551615n;
const servers = new Servers("records");
let c;

before(async () => {
  c = new f.Client((await servers.start()).url);
});
after(() => servers.cleanup());

async function collect(iter) {
  const out = [];
  for await (const x of iter) out.push(x);
  return out;
}

test("text and binary bodies round-trip exactly", async () => {
  const s = streamName("bodies");
  const random = new Uint8Array(randomBytes(65536));
  const inputs = ["plain text", "unicode: ünïcødé ✓ 🚀", "control \x00\x01\n\t\r", "", new Uint8Array([0xff, 0xfe, 0x00]), new Uint8Array(0), random];
  const ack = await c.append(s, 3, inputs);
  assert.deepEqual([ack.stream, ack.firstSeq, ack.lastSeq, ack.nextSeq, ack.fencingToken], [s, 0, 6, 7, 3n]);
  const page = await c.read(s);
  assert.deepEqual(page.records.map((r) => r.seq), [0, 1, 2, 3, 4, 5, 6]);
  assert.deepEqual(page.records.map((r) => r.body), inputs.map((x) => (typeof x === "string" ? bytes(x) : x)));
  assert.ok(page.records.every((r) => r.body instanceof Uint8Array && r.fencingToken === 3n && r.timestampMs === ack.timestampMs));
  assert.equal(page.records[1].text, "unicode: ünïcødé ✓ 🚀");
  assert.throws(() => page.records[4].text, TypeError); // not UTF-8
  assert.deepEqual(page.records[0].headers, []);
  // A lone string or Uint8Array is one record.
  assert.equal((await c.append(s, 3, "one")).lastSeq, 7);
  assert.equal((await c.append(s, 3, new Uint8Array([1, 2]))).lastSeq, 8);
});

test("a page continues after its last record, not at the tail", async () => {
  const s = streamName("page");
  await c.append(s, 1, Array.from({ length: 25 }, (_, i) => `r${i}`));
  const page = await c.read(s, { count: 4 });
  assert.deepEqual(page.records.map((r) => r.seq), [0, 1, 2, 3]);
  assert.deepEqual([page.nextSeq, page.nextStartSeq], [25, 4]);
});

test("records() pages through every record in order", async () => {
  const s = streamName("pages");
  const expected = [];
  for (let batch = 0; batch < 5; batch++) {
    const bodies = Array.from({ length: batch + 3 }, (_, i) => `batch ${batch} record ${i}`);
    await c.append(s, 10 + batch, bodies);
    expected.push(...bodies.map((b) => [BigInt(10 + batch), b]));
  }
  assert.equal(expected.length, 25);
  const got = (await collect(c.records(s, { count: 4 }))).map((r) => [r.seq, r.fencingToken, r.text]); // 7 pages
  assert.deepEqual(got, expected.map(([tok, b], seq) => [seq, tok, b]));
  // From the middle, one record per page (the first record always comes whole).
  const tail = (await collect(c.records(s, { startSeq: 20, bytes: 1 }))).map((r) => [r.seq, r.text]);
  assert.deepEqual(tail, expected.slice(20).map(([, b], i) => [20 + i, b]));
  assert.deepEqual(await collect(c.records(s, { startSeq: 25 })), []);
});

test("records() includes appends made while paging", async () => {
  const s = streamName("growing");
  await c.append(s, 1, ["a", "b", "c"]);
  const seen = [];
  for await (const r of c.records(s, { count: 2 })) {
    seen.push(r.text);
    if (r.text === "a") await c.append(s, 1, ["d", "e"]);
  }
  assert.deepEqual(seen, ["a", "b", "c", "d", "e"]);
});

test("a long-poll read returns the record that arrives", async () => {
  const s = streamName("poll");
  await c.append(s, 1, "existing");
  const polled = c.read(s, { startSeq: 1, waitMs: 20_000 });
  await c.append(s, 1, "new");
  assert.deepEqual((await polled).records.map((r) => [r.seq, r.text]), [[1, "new"]]);
});

test("fence creates the stream; the whole u64 token range is exact", async () => {
  const s = streamName("fence");
  const st = await c.fence(s, 43);
  assert.deepEqual(st, { stream: s, firstSeq: 0, nextSeq: 0, highestToken: 43n, lastTimestampMs: st.lastTimestampMs, sealed: false });
  assert.deepEqual(await c.state(s), st);
  assert.equal((await c.append(s, 43, "mine")).firstSeq, 0); // equal tokens are accepted
  // 2^64-1 is past Number's exact range; as a bigint it survives both ways.
  assert.equal((await c.fence(s, U64_MAX)).highestToken, U64_MAX);
  assert.equal((await c.append(s, U64_MAX, "max")).fencingToken, U64_MAX);
  const records = (await c.read(s)).records;
  assert.deepEqual(records.map((r) => r.fencingToken), [43n, U64_MAX]);
  const stale = await c.append(s, 2n ** 63n, "late").catch((e) => e);
  assert.ok(stale instanceof f.StaleFencingTokenError);
  assert.deepEqual([stale.presentedToken, stale.highestToken], [2n ** 63n, U64_MAX]);
  await assert.rejects(() => c.append(s, 2 ** 60, "unsafe number"), TypeError);
});

test("listStreams() pages in name order", async () => {
  const p = streamName("list");
  const names = [7, 3, 11, 0, 5, 9, 1].map((i) => `${p}:${String(i).padStart(2, "0")}`);
  for (const n of names) await c.append(n, 1, `record of ${n}`);
  await c.append(`${p}-other`, 1, "not under the prefix");
  const listed = await collect(c.listStreams({ prefix: `${p}:`, limit: 2 })); // 4 pages
  const sorted = [...names].sort();
  assert.deepEqual(listed.map((s) => s.stream), sorted);
  assert.ok(listed.every((s) => s.firstSeq === 0 && s.nextSeq === 1 && s.highestToken === 1n));
  const first = await c.listPage({ prefix: `${p}:`, limit: 3 });
  assert.deepEqual([first.streams.map((s) => s.stream), first.nextStartAfter], [sorted.slice(0, 3), sorted[2]]);
  const last = await c.listPage({ prefix: `${p}:`, startAfter: sorted[4], limit: 3 });
  assert.deepEqual([last.streams.map((s) => s.stream), last.nextStartAfter], [sorted.slice(5), null]);
});

test("headers round-trip in a mixed batch, through reads and tails", async () => {
  const s = streamName("headers");
  const inputs = [
    { body: "traced", headers: [["trace-id", "abc"], ["trace-id", ""]] },
    "plain",
    { body: new Uint8Array([0xff]), headers: [[new Uint8Array([0x62, 0xfe]), new Uint8Array([0, 1])]] },
  ];
  const ack = await c.append(s, 1, inputs);
  assert.deepEqual([ack.firstSeq, ack.lastSeq], [0, 2]);
  const want = [
    [bytes("traced"), [[bytes("trace-id"), bytes("abc")], [bytes("trace-id"), bytes("")]]],
    [bytes("plain"), []],
    [new Uint8Array([0xff]), [[new Uint8Array([0x62, 0xfe]), new Uint8Array([0, 1])]]],
  ];
  const page = await c.read(s);
  assert.deepEqual(page.records.map((r) => [r.body, r.headers]), want);
  const tailed = [];
  for await (const r of c.tail(s, { startSeq: 0 })) {
    tailed.push([r.body, r.headers]);
    if (tailed.length === 3) break;
  }
  assert.deepEqual(tailed, want);
});

test("over the header limits is refused and writes nothing", async () => {
  const s = streamName("header-limits");
  const many = { body: "b", headers: Array.from({ length: 65 }, () => ["n", "v"]) };
  await assert.rejects(() => c.append(s, 1, [many]), (e) => e instanceof f.TooLargeError && /65 headers, the limit is 64 per record/.test(e.message));
  await assert.rejects(() => c.append(s, 1, { body: "b", headers: [["", "v"]] }), (e) => e instanceof f.BadRequestError && /header 0 has an empty name/.test(e.message));
  await assert.rejects(() => c.read(s), f.NotFoundError);
});
