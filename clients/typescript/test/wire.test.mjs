// The parts that do not need the server's present version: exact JSON for
// big integers, the SSE parser, the tail's cursor, the fields the server is
// about to gain (next_start_seq, record headers) and bearer tokens. Answers
// come from a fetch stand-in, so every request can be inspected.

import assert from "node:assert/strict";
import { test } from "node:test";

import * as f from "../dist/index.js";
import { bytes, text } from "../testlib/server.mjs";

test("parseJson keeps integers past 2^53 exact and leaves strings alone", () => {
  const v = f.parseJson('{"t": 18446744073709551615, "s": 9007199254740991, "n": -3, "x": 1.5e3, "b": "18446744073709551615 \\"q\\" \\\\", "a": [true, false, null, {}, []]}');
  assert.deepEqual(v, { t: 18446744073709551615n, s: 9007199254740991, n: -3, x: 1500, b: '18446744073709551615 "q" \\', a: [true, false, null, {}, []] });
  assert.equal(f.parseJson("9007199254740993"), 9007199254740993n);
  for (const bad of ['{"a":1,}', "[1 2]", '"open', "01", "tru", "{} x"]) {
    assert.throws(() => f.parseJson(bad), f.ProtocolError, bad);
  }
});

function events(chunks) {
  const p = new f.SseParser();
  return chunks.flatMap((c) => p.feed(c).map((e) => [e.event, e.data, e.id]));
}

test("the SSE parser handles every line ending and every split", () => {
  const stream = bytes('event: records\r\nid: 3\r\ndata: [1,\r\ndata: 2]\r\n\r\n: comment\n\nevent: ping\rdata: {}\r\r');
  const expected = [["records", "[1,\n2]", "3"], ["ping", "{}", "3"]];
  assert.deepEqual(events([stream]), expected);
  for (let cut = 1; cut < stream.length; cut++) {
    assert.deepEqual(events([stream.subarray(0, cut), stream.subarray(cut)]), expected, `cut at ${cut}`);
  }
  const utf = bytes("event: records\ndata: ünï\n\n");
  assert.deepEqual(events([...utf].map((b) => new Uint8Array([b]))), [["records", "ünï", null]]);
});

const recordsEvent = (seqs) =>
  bytes(`event: records\nid: ${seqs.at(-1) + 1}\ndata: ${JSON.stringify(seqs.map((seq) => ({ seq, fencing_token: 1, timestamp_ms: 0, body: `r${seq}` })))}\n\n`);

test("the tail cursor drops repeats, refuses gaps, and raises error events", () => {
  const st = new f.TailState("s", 0, true);
  assert.deepEqual(st.feed(recordsEvent([0, 1])).map((r) => r.seq), [0, 1]);
  st.newConnection();
  assert.deepEqual(st.feed(recordsEvent([1, 2])).map((r) => r.seq), [2]); // a resumed connection may repeat
  assert.deepEqual(st.requestHeaders(), { accept: "text/event-stream", "last-event-id": "3" });
  assert.equal(st.query(), "start_seq=3");
  assert.deepEqual(st.feed(bytes('event: caught_up\nid: 3\ndata: {"next_seq":3}\n\n')), [new f.CaughtUp(3)]);
  assert.throws(() => st.feed(recordsEvent([5])), /skipped from seq 3 to 5/);
  assert.throws(
    () => new f.TailState("s", 0, false).feed(bytes('event: error\ndata: {"error":"corrupt","message":"bad frame"}\n\n')),
    (e) => e instanceof f.CorruptError && e.serverMessage === "bad frame",
  );
});

/** A Client whose fetch is `handler(url, init)`; requests are recorded. */
function mocked(handler, options = {}) {
  const seen = [];
  const fetch = async (url, init) => {
    seen.push({ url: new URL(url), init });
    const [status, body] = await handler(new URL(url), init);
    return new Response(typeof body === "string" ? body : JSON.stringify(body), { status });
  };
  return [new f.Client("http://fencelog.test/", { ...options, fetch }), seen];
}

test("paging follows next_start_seq when the server sends one, never next_seq", async () => {
  const pages = {
    0: { records: [{ seq: 0, fencing_token: 1, timestamp_ms: 5, body: "a" }], next_seq: 100, next_start_seq: 2 },
    2: { records: [{ seq: 2, fencing_token: 1, timestamp_ms: 5, body: "c" }], next_seq: 100, next_start_seq: 3 },
    3: { records: [], next_seq: 100, next_start_seq: 3 },
  };
  const [c, seen] = mocked((url) => [200, pages[url.searchParams.get("start_seq")]]);
  const got = [];
  for await (const r of c.records("s")) got.push(r.text);
  assert.deepEqual(got, ["a", "c"]);
  assert.deepEqual(seen.map((r) => r.url.searchParams.get("start_seq")), ["0", "2", "3"]);
});

test("paging without next_start_seq continues after the last record", async () => {
  const [c] = mocked((url) => {
    const start = Number(url.searchParams.get("start_seq"));
    const records = [];
    for (let s = start; s < Math.min(start + 2, 5); s++) records.push({ seq: s, fencing_token: 1, timestamp_ms: 0, body: String(s) });
    return [200, { records, next_seq: 5 }];
  });
  const seqs = [];
  for await (const r of c.records("s")) seqs.push(r.seq);
  assert.deepEqual(seqs, [0, 1, 2, 3, 4]);
  const [back] = mocked(() => [200, { records: [{ seq: 4, fencing_token: 1, timestamp_ms: 0, body: "x" }], next_seq: 9, next_start_seq: 4 }]);
  await assert.rejects(() => back.read("s", { startSeq: 4 }), /would re-read/);
});

test("record headers are exposed as bytes", async () => {
  const b64 = (u8) => btoa(String.fromCharCode(...u8));
  const rec = {
    seq: 0, fencing_token: 1, timestamp_ms: 0, body_base64: b64([0, 1]),
    headers: [["trace-id", "abc"], { name: "bin", value_base64: b64([255]) }],
    headers_base64: [[b64([107, 254]), b64([118, 253])]],
  };
  const [c] = mocked(() => [200, { records: [rec], next_seq: 1 }]);
  const r = (await c.read("s")).records[0];
  assert.deepEqual(r.body, new Uint8Array([0, 1]));
  assert.deepEqual(r.headers.map(([n, v]) => [[...n], [...v]]), [
    [[...bytes("trace-id")], [...bytes("abc")]],
    [[...bytes("bin")], [255]],
    [[107, 254], [118, 253]],
  ]);
});

test("bearer token and the shape of each write", async () => {
  const [c, seen] = mocked(
    (url) =>
      url.pathname.endsWith("/fence")
        ? [200, { stream: "s", first_seq: 0, next_seq: 0, highest_token: 9, last_timestamp_ms: 0 }]
        : [200, { stream: "s", first_seq: 0, last_seq: 1, next_seq: 2, fencing_token: 9, timestamp_ms: 0 }],
    { token: "s3cret" },
  );
  await c.append("s", 9n, ["ab", new Uint8Array([0])], { matchSeqNum: 0 });
  await c.fence("s", 18446744073709551615n);
  const [append, fence] = seen;
  assert.equal(append.url.href, "http://fencelog.test/v1/streams/s/records");
  assert.deepEqual(append.init.headers, {
    authorization: "Bearer s3cret",
    "content-type": "application/vnd.fencelog.batch",
    "fencing-token": "9",
    "match-seq-num": "0",
  });
  assert.deepEqual([...append.init.body], [2, 0, 0, 0, 97, 98, 1, 0, 0, 0, 0]);
  assert.equal(fence.init.headers.authorization, "Bearer s3cret");
  assert.equal(fence.init.body, '{"fencing_token":18446744073709551615}');
});

test("error bodies that are not fencelog's, or break the contract", async () => {
  const answers = [
    [502, "<html>Bad Gateway</html>"],
    [409, { error: "stale_fencing_token", message: "no fields" }],
    [429, { error: "overloaded", message: "later", retry_after_ms: 50 }],
    [403, { error: "forbidden", message: "no append scope" }],
  ];
  const [c] = mocked(() => answers.shift());
  const proxy = await c.append("s", 1, "a").catch((e) => e);
  assert.deepEqual([proxy.constructor, proxy.status, proxy.code, proxy.raw], [f.ApiError, 502, null, "<html>Bad Gateway</html>"]);
  await assert.rejects(() => c.append("s", 1, "a"), (e) => e instanceof f.ProtocolError && /"stream" field/.test(e.message));
  const unknown = await c.append("s", 1, "a").catch((e) => e);
  assert.deepEqual([unknown.constructor, unknown.code, unknown.body.retry_after_ms], [f.ApiError, "overloaded", 50]);
  await assert.rejects(() => c.append("s", 1, "a"), f.ForbiddenError);
});

test("inputs are checked before anything is sent", async () => {
  const [c, seen] = mocked(() => assert.fail("nothing may be sent"));
  await assert.rejects(() => c.append("s", "41", "a"), TypeError);
  await assert.rejects(() => c.append("s", 1.5, "a"), TypeError);
  await assert.rejects(() => c.append("s", 1, [1, 2]), TypeError);
  await assert.rejects(() => c.state(""), RangeError);
  await assert.rejects(() => c.state("."), RangeError);
  assert.equal(seen.length, 0);
  assert.equal(text(new f.LogRecord(0, 1n, 0, bytes("ok")).body), "ok");
});
