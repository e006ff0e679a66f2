// Every typed error, raised by the real server, with its exact body and
// fields; and the transport errors, with what each promises about a write.

import assert from "node:assert/strict";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { createServer as createHttpServer } from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";

import * as f from "../dist/index.js";
import { caught, freePort, mount, Servers, streamName, umount, FencelogServer } from "../testlib/server.mjs";

const TOKEN_RANGE = "an integer in 1..=18446744073709551615";
const servers = new Servers("errors");
let shared;
let c;

before(async () => {
  shared = await servers.start();
  c = new f.Client(shared.url);
});
after(() => servers.cleanup());

test("StaleFencingTokenError on append and fence", async () => {
  const s = streamName("stale");
  await c.append(s, 41, "A: invoice 1001 drafted");
  await c.append(s, 42n, "B: invoice 1001 sent");
  const e = await caught(() => c.append(s, 41, "A: invoice 1001 cancelled"), f.StaleFencingTokenError);
  assert.deepEqual(e.body, {
    error: "stale_fencing_token",
    highest_token: 42,
    message: "fencing token 41 is below the stream's highest accepted token 42 (next_seq 2)",
    next_seq: 2,
    presented_token: 41,
    stream: s,
  });
  assert.deepEqual([e.status, e.code, e.stream, e.presentedToken, e.highestToken, e.nextSeq], [409, "stale_fencing_token", s, 41n, 42n, 2]);
  assert.ok(e instanceof f.ApiError && e instanceof f.FencelogError);
  const fence = await caught(() => c.fence(s, 40), f.StaleFencingTokenError);
  assert.equal(fence.serverMessage, "fencing token 40 is below the stream's highest accepted token 42 (next_seq 2)");
  const bodies = [];
  for await (const r of c.records(s)) bodies.push(r.text);
  assert.deepEqual(bodies, ["A: invoice 1001 drafted", "B: invoice 1001 sent"]);
});

test("SeqMismatchError", async () => {
  const s = streamName("mismatch");
  await c.append(s, 1, ["a", "b"]);
  const e = await caught(() => c.append(s, 1, "c", { matchSeqNum: 7 }), f.SeqMismatchError);
  assert.deepEqual(e.body, {
    error: "seq_mismatch",
    match_seq_num: 7,
    message: "match_seq_num 7 does not equal the stream's next_seq 2",
    next_seq: 2,
    stream: s,
  });
  assert.deepEqual([e.status, e.stream, e.matchSeqNum, e.nextSeq], [412, s, 7, 2]);
  assert.equal((await c.append(s, 1, "c", { matchSeqNum: 2 })).firstSeq, 2);
});

test("NotFoundError from state, read and tail", async () => {
  for (const call of [() => c.state("no-such-stream"), () => c.read("no-such-stream"), () => c.tail("no-such-stream").next()]) {
    const e = await caught(call, f.NotFoundError);
    assert.deepEqual(e.body, { error: "stream_not_found", message: "stream not found", stream: "no-such-stream" });
    assert.deepEqual([e.status, e.stream], [404, "no-such-stream"]);
  }
});

test("OutOfRangeError from read and tail", async () => {
  const s = streamName("range");
  await c.append(s, 1, ["a", "b"]);
  for (const call of [() => c.read(s, { startSeq: 9 }), () => c.tail(s, { startSeq: 9 }).next()]) {
    const e = await caught(call, f.OutOfRangeError);
    assert.deepEqual(e.body, {
      error: "out_of_range",
      message: "start_seq 9 is past the stream's next_seq 2",
      first_seq: 0,
      next_seq: 2,
      start_seq: 9,
      stream: s,
    });
    assert.deepEqual([e.status, e.stream, e.startSeq, e.nextSeq], [416, s, 9, 2]);
  }
  assert.deepEqual((await c.read(s, { startSeq: 2 })).records, []);
});

test("TooLargeError for records, bytes and the body", async () => {
  const small = await servers.start({ args: ["--batch-records-max", "3", "--batch-bytes-max", "100", "--body-bytes-max", "1000"] });
  const sc = new f.Client(small.url);
  const cases = [
    [["a", "a", "a", "a"], { actual: 4, limit: 3, message: "records in the batch is 4, the limit is 3" }],
    ["x".repeat(101), { actual: 101, limit: 100, message: "bytes in the batch is 101, the limit is 100" }],
    ["y".repeat(1001), { limit: 1000, message: "request body is 1005 bytes or more, the limit is 1000" }],
  ];
  for (const [records, fields] of cases) {
    const e = await caught(() => sc.append("big", 1, records), f.TooLargeError);
    assert.deepEqual(e.body, { error: "too_large", ...fields, stream: "big" });
    assert.deepEqual([e.status, e.limit, e.actual], [413, fields.limit, fields.actual ?? null]);
  }
  await caught(() => sc.state("big"), f.NotFoundError);
});

test("BadRequestError", async () => {
  const s = streamName("bad");
  // Every refusal of a request naming a valid stream names it.
  const named = { stream: s };
  const cases = [
    [() => c.append(s, 0, "a"), `header Fencing-Token must be ${TOKEN_RANGE}, got "0"`, named],
    [() => c.append(s, 18446744073709551616n, "a"), `header Fencing-Token must be ${TOKEN_RANGE}, got "18446744073709551616"`, named],
    [() => c.fence(s, 0), `fencing_token must be ${TOKEN_RANGE}, got 0`, named],
    [
      () => c.append(s, 1, []),
      "the application/vnd.fencelog.batch body is empty: it needs at least one record (a u32 little-endian length, then that many bytes)",
      named,
    ],
    [
      () => c.state("a/b"),
      "invalid stream name: '/' is not allowed in a stream name (at byte 1; allowed are A-Z a-z 0-9 . _ : -)",
      {},
    ],
    [() => c.read(s, { count: 0 }), "query parameter count must be at least 1", named],
  ];
  for (const [call, message, fields] of cases) {
    const e = await caught(call, f.BadRequestError);
    assert.deepEqual(e.body, { error: "bad_request", message, ...fields });
    assert.equal(e.status, 400);
  }
  // fetch resolves "." and ".." as path segments, so they are refused here.
  await assert.rejects(() => c.state(".."), RangeError);
});

test("a wrong base URL is an ApiError, not a missing stream", async () => {
  const e = await caught(() => new f.Client(`${shared.url}/not-fencelog`).state("s"), f.ApiError);
  assert.equal(e.constructor, f.ApiError);
  assert.deepEqual([e.status, e.code, e.body], [404, "not_found", { error: "not_found", message: "no such route" }]);
});

/** Appends 100 KB records until storage fails with `cls`; returns how many were acknowledged. */
async function fill(client, cls) {
  const body = new Uint8Array(100_000).fill(120);
  for (let acked = 0; acked < 500; acked++) {
    try {
      await client.append("s", 1, body);
    } catch (e) {
      assert.ok(e instanceof cls, `${e?.name}: ${e?.message}`);
      return [acked, e];
    }
  }
  assert.fail("storage never failed");
}

const REFUSED = "storage refused the write before any of it was written; nothing changed: ";

test("UnavailableError when storage refuses before writing: nothing changed, not poisoned", async () => {
  // Writes past 6 MB fail with EFBIG (an I/O error that is not "disk
  // full"); SIGXFSZ, ignored by the shell, stays ignored across exec.
  const s = await servers.start({ wrap: "trap '' XFSZ; ulimit -f 5859" });
  const sc = new f.Client(s.url);
  const failure = "preallocate of 00000000000000000000.seg failed: File too large (os error 27)";
  const [acked] = await fill(sc, f.UnavailableError);
  // The space ahead could not be zero-filled, so none of the refused group
  // was written: the outcome is known and the engine goes on.
  const again = await caught(() => sc.append("s", 1, new Uint8Array(100_000)), f.UnavailableError);
  assert.deepEqual(again.body, { error: "unavailable", message: REFUSED + failure, stream: "s" });
  assert.deepEqual([again.status, again.outcomeUnknown], [503, false]);
  assert.equal((await sc.state("s")).nextSeq, acked);
  // A write that fits in the space already zero-filled still lands.
  const ack = await sc.append("s", 1, "after");
  assert.deepEqual([ack.firstSeq, ack.nextSeq], [acked, acked + 1]);
});

test("a storage failure after writing began is outcomeUnknown", async () => {
  // The real server says outcome_unknown only when a group failed after
  // some of it was written (a failed write or fsync), which cannot be
  // provoked from outside its process; the Rust suites inject that fault
  // in-process and pin this body. This checks what the client makes of it.
  for (const [status, code, cls] of [
    [503, "unavailable", f.UnavailableError],
    [507, "insufficient_storage", f.InsufficientStorageError],
  ]) {
    const body = {
      error: code,
      message:
        "storage failed while writing this request; outcome unknown: fdatasync of 00000000000000000000.seg failed: Input/output error (os error 5)",
      outcome_unknown: true,
    };
    const stub = createHttpServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(status, { "content-type": "application/json", connection: "close" });
        res.end(JSON.stringify(body));
      });
    });
    await new Promise((ok) => stub.listen(0, "127.0.0.1", ok));
    try {
      const e = await caught(() => new f.Client(`http://127.0.0.1:${stub.address().port}`).append("s", 1, "x"), cls);
      assert.deepEqual(e.body, body);
      assert.deepEqual([e.status, e.outcomeUnknown], [status, true]);
    } finally {
      await new Promise((ok) => stub.close(ok));
    }
  }
});

test("InsufficientStorageError on a full disk, and writes resume once space is freed", async (t) => {
  const mnt = join(servers.dir, "small-disk");
  mkdirSync(mnt);
  try {
    mount(["-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt]);
  } catch (e) {
    assert.fail(`this test mounts a 2 MiB tmpfs (as root, like CI) to fill the server's disk: ${e.stderr ?? e}`);
  }
  // Small segments, so a segment's zero-fill fits the small disk a few
  // times over and the disk fills with records, not preallocation.
  const small = new FencelogServer(join(mnt, "data"), { args: ["--segment-bytes", "262144"] });
  try {
    await small.start();
    const sc = new f.Client(small.url);
    // A small first record fits; it makes the stream exist.
    await sc.append("s", 1, "first");
    const [filled] = await fill(sc, f.InsufficientStorageError);
    const acked = 1 + filled;
    const then = await caught(() => sc.append("s", 1, new Uint8Array(100_000)), f.InsufficientStorageError);
    const { message, ...rest } = then.body;
    // Which segment ran out depends on how the space was used.
    assert.match(message, /^storage refused the write before any of it was written; nothing changed: preallocate of \d{20}\.seg failed: No space left on device \(os error 28\)$/);
    assert.deepEqual(rest, { error: "insufficient_storage", stream: "s" });
    assert.deepEqual([then.status, then.outcomeUnknown], [507, false]);
    assert.equal((await sc.state("s")).nextSeq, acked);
    mount(["-o", "remount,size=8m", mnt]);
    const ack = await sc.append("s", 1, new Uint8Array(100_000));
    assert.equal(ack.firstSeq, acked);
  } finally {
    await small.kill9();
    umount(mnt);
  }
});

test("CorruptError from a read and from a tail", async () => {
  const s = await servers.start();
  const sc = new f.Client(s.url);
  await sc.append("c", 1, "HELLO-CORRUPT-ME");
  const seg = join(s.dataDir, "00000000000000000000.seg");
  const data = readFileSync(seg);
  data[data.indexOf("HELLO-CORRUPT-ME")] = "J".charCodeAt(0); // damage at rest
  writeFileSync(seg, data);
  const pattern =
    /^corrupt log: 00000000000000000000\.seg at offset \d+: checksum mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}$/;
  const e = await caught(() => sc.read("c"), f.CorruptError);
  assert.equal(e.status, 500);
  // The file and offset of the damaged frame, and the stream read.
  assert.deepEqual(Object.keys(e.body).sort(), ["error", "file", "message", "offset", "stream"]);
  assert.deepEqual([e.body.file, e.body.stream], ["00000000000000000000.seg", "c"]);
  assert.match(e.serverMessage, pattern);
  // In a tail it arrives as an SSE `error` event, and ends the tail.
  const tail = sc.tail("c");
  const inTail = await caught(() => tail.next(), f.CorruptError);
  assert.match(inTail.serverMessage, pattern);
  assert.deepEqual(await tail.next(), { done: true, value: undefined });
});

test("ConnectionFailedError means nothing was sent", async () => {
  const dead = new f.Client(`http://127.0.0.1:${await freePort()}`);
  await caught(() => dead.append("s", 1, "a"), f.ConnectionFailedError);
  await caught(() => dead.fence("s", 1), f.ConnectionFailedError);
  await caught(() => dead.state("s"), f.ConnectionFailedError);
});

test("OutcomeUnknownError when the server reads the append and hangs up", async () => {
  // A TCP server that reads each whole request and closes without an
  // answer: the moment between "received" and "acknowledged".
  const requests = [];
  const srv = createServer((sock) => {
    let data = Buffer.alloc(0);
    sock.on("data", (d) => {
      data = Buffer.concat([data, d]);
      const end = data.indexOf("\r\n\r\n");
      if (end < 0) return;
      const len = Number(/content-length: *(\d+)/i.exec(data.subarray(0, end).toString())?.[1] ?? 0);
      if (data.length >= end + 4 + len) {
        requests.push(data);
        sock.destroy();
      }
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  try {
    const sc = new f.Client(`http://127.0.0.1:${srv.address().port}`);
    await caught(() => sc.append("s", 7n, ["one", new Uint8Array([255])]), f.OutcomeUnknownError);
    assert.equal(requests.length, 1, "an append is never retried");
    const req = requests[0];
    const head = req.subarray(0, req.indexOf("\r\n\r\n")).toString().toLowerCase();
    assert.match(head, /\r\nfencing-token: 7\r\n/);
    assert.match(head, /\r\ncontent-type: application\/vnd\.fencelog\.batch\r\n/);
    assert.deepEqual([...req.subarray(req.indexOf("\r\n\r\n") + 4)], [3, 0, 0, 0, 111, 110, 101, 1, 0, 0, 0, 255]);
    // A fence is idempotent: retried, and still unknown.
    await caught(() => sc.fence("s", 7), f.OutcomeUnknownError);
    assert.equal(requests.length, 4);
    // A read has no outcome to be unsure of.
    const read = await caught(() => sc.state("s"), f.TransportError);
    assert.ok(!(read instanceof f.OutcomeUnknownError) && !(read instanceof f.ConnectionFailedError));
  } finally {
    srv.close();
  }
});
