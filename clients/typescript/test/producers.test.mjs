// The TypeScript client against the real server: idempotent
// producers (a lost answer retried with the same producerSeq comes back as
// a duplicate, one copy on the stream), deadlines, "did my write land?",
// the fence history, fenced cursors and multi-stream batches — and every
// new error type from a real answer, with its exact body and fields.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import * as f from "../dist/index.js";
import { AnswerDroppingProxy, caught, Servers, streamName, text } from "../testlib/server.mjs";

const servers = new Servers("producers");
let shared;
let c;

before(async () => {
  shared = await servers.start();
  c = new f.Client(shared.url);
});
after(() => servers.cleanup());

async function bodies(stream) {
  const out = [];
  for await (const r of c.records(stream)) out.push(text(r.body));
  return out;
}

test("a lost answer is retried with the same seq and answered as a duplicate", async () => {
  const s = streamName("lost");
  await c.fence(s, 41n);
  const proxy = await new AnswerDroppingProxy(shared.port).start();
  try {
    // Its first append is the proxy's first connection: the answer is lost.
    const p = new f.Producer(new f.Client(proxy.url), s, 41n, { producerId: "worker-a" });
    const ack = await p.append("A: order 1");
    assert.equal(proxy.dropped, 1);
    const first = await c.producer(s, "worker-a");
    assert.deepEqual(ack, {
      stream: s, firstSeq: 0, lastSeq: 0, nextSeq: 1, fencingToken: 41n, timestampMs: first.timestampMs, duplicate: true,
    });
    assert.equal(p.nextProducerSeq, 1);
    const next = await p.append("A: order 2");
    assert.deepEqual([next.firstSeq, next.lastSeq, next.duplicate], [1, 1, false]);
    assert.deepEqual(await bodies(s), ["A: order 1", "A: order 2"]);
    assert.deepEqual(await c.producer(s, "worker-a"), {
      producerId: "worker-a", producerSeq: 1, firstSeq: 1, lastSeq: 1, fencingToken: 41n, timestampMs: next.timestampMs,
    });
    assert.equal(await c.producer(s, "nobody"), null);
    // A producer started later continues after its last applied seq.
    const q = await f.Producer.start(c, s, "worker-a", 41n);
    assert.equal(q.nextProducerSeq, 2);
    // Fenced out: the typed stale token, never retried.
    await c.fence(s, 42n);
    const stale = await caught(() => q.append("late"), f.StaleFencingTokenError);
    assert.deepEqual([stale.highestToken, stale.nextSeq, q.nextProducerSeq], [42n, 2, 2]);
    // The paused owner's retry of its last applied append still answers its
    // original ack and writes nothing.
    const again = await c.append(s, 41n, "A: order 2", { producerId: "worker-a", producerSeq: 1 });
    assert.deepEqual(again, { ...next, duplicate: true });
    assert.deepEqual(await bodies(s), ["A: order 1", "A: order 2"]);
  } finally {
    await proxy.close();
  }
});

test("without a producer id a lost answer is never retried", async () => {
  const s = streamName("plain");
  const proxy = await new AnswerDroppingProxy(shared.port).start();
  try {
    const p = new f.Producer(new f.Client(proxy.url), s, 7n);
    await caught(() => p.append("once"), f.OutcomeUnknownError);
    assert.equal(proxy.dropped, 1);
    // It landed, once; nothing sent it again.
    assert.deepEqual(await bodies(s), ["once"]);
    assert.throws(() => new f.Producer(c, s, 7n, { nextProducerSeq: 3 }), TypeError);
  } finally {
    await proxy.close();
  }
});

test("producer_seq_stale and producer_seq_gap", async () => {
  const s = streamName("seq");
  await c.append(s, 5n, "x", { producerId: "p", producerSeq: 4 });
  const plain = await c.append(s, 5n, "y", { producerId: "p", producerSeq: 5 });
  assert.equal(plain.duplicate, false);
  const e = await caught(() => c.append(s, 5n, "old", { producerId: "p", producerSeq: 3 }), f.ProducerSeqStaleError);
  assert.deepEqual(e.body, {
    error: "producer_seq_stale",
    message: "producer_seq is below the producer's last applied producer_seq 5",
    stream: s,
    last_producer_seq: 5,
  });
  assert.deepEqual([e.status, e.code, e.stream, e.lastProducerSeq], [409, "producer_seq_stale", s, 5]);
  const g = await caught(() => c.append(s, 5n, "skip", { producerId: "p", producerSeq: 7 }), f.ProducerSeqGapError);
  assert.deepEqual(g.body, {
    error: "producer_seq_gap",
    message: "producer_seq skips ahead: the stream expects producer_seq 6 from this producer",
    stream: s,
    expected_producer_seq: 6,
  });
  assert.deepEqual([g.status, g.stream, g.expectedProducerSeq], [409, s, 6]);
  await caught(() => new f.Producer(c, s, 5n, { producerId: "p", nextProducerSeq: 9 }).append("z"), f.ProducerSeqGapError);
  assert.deepEqual(await bodies(s), ["x", "y"]);
  await assert.rejects(() => c.append(s, 5n, "half", { producerId: "p" }), TypeError);
});

test("deadline_exceeded on append and fence", async () => {
  const s = streamName("deadline");
  const before = Date.now();
  const e = await caught(() => c.append(s, 1n, "late", { notAfterMs: 1 }), f.DeadlineExceededError);
  assert.ok(e.writerMs >= before, `${e.writerMs} >= ${before}`);
  assert.deepEqual(e.body, {
    error: "deadline_exceeded",
    message: `the writer's time ${e.writerMs} ms is past the request's not_after_ms; nothing changed`,
    stream: s,
    writer_ms: e.writerMs,
  });
  assert.deepEqual([e.status, e.code, e.stream], [409, "deadline_exceeded", s]);
  const fenced = await caught(() => c.fence(s, 2n, { notAfterMs: 1 }), f.DeadlineExceededError);
  assert.ok(fenced.writerMs >= e.writerMs);
  const p = new f.Producer(c, s, 1n, { producerId: "w", notAfterMs: 1 });
  await caught(() => p.append("late too"), f.DeadlineExceededError);
  assert.equal(p.nextProducerSeq, 0);
  await caught(() => c.state(s), f.NotFoundError); // nothing changed: not even created
  const far = Date.now() + 600_000;
  p.notAfterMs = far;
  const ack = await p.append("in time");
  assert.ok(ack.timestampMs <= far);
  assert.equal((await c.fence(s, 2n, { notAfterMs: far })).highestToken, 2n);
});

test("producer_not_found from the server, and a start on a stream that does not exist", async () => {
  const s = streamName("ghost");
  assert.equal((await f.Producer.start(c, s, "fresh", 3n)).nextProducerSeq, 0);
  await caught(() => c.producer(s, "ghost"), f.NotFoundError);
  await c.append(s, 1n, "a");
  assert.equal(await c.producer(s, "ghost"), null);
  const resp = await fetch(`${shared.url}/v1/streams/${s}/producers/ghost`);
  const e = await errorOf(resp);
  assert.ok(e instanceof f.ProducerNotFoundError, String(e));
  assert.deepEqual(e.body, {
    error: "producer_not_found",
    message: `stream ${s} does not remember producer "ghost"`,
    stream: s,
    producer_id: "ghost",
  });
  assert.deepEqual([e.status, e.stream, e.producerId], [404, s, "ghost"]);
});

/** The typed error of a raw answer, decoded as the client decodes one. */
async function errorOf(resp) {
  const { errorFor } = await import("../dist/wire.js");
  return errorFor(resp.status, await resp.text());
}

test("producer_fenced after eviction", async () => {
  const srv = await servers.start();
  const own = new f.Client(srv.url);
  const s = streamName("evicted");
  await own.append(s, 5n, "p0", { producerId: "p", producerSeq: 0 });
  // 1024 other producers (the server's producers_per_stream_max) evict p.
  for (let i = 0; i < 1024; i += 16) {
    await Promise.all(
      Array.from({ length: 16 }, (_, j) => own.append(s, 5n, `q${i + j}`, { producerId: `q${i + j}`, producerSeq: 0 })),
    );
  }
  assert.equal(await own.producer(s, "p"), null);
  const e = await caught(() => own.append(s, 5n, "p0", { producerId: "p", producerSeq: 0 }), f.ProducerFencedError);
  assert.deepEqual(e.body, {
    error: "producer_fenced",
    message:
      "unknown producer with a fencing token below the stream's producer token floor 6: " +
      "it may retry a write of an evicted producer; use a token of at least 6",
    stream: s,
    producer_token_floor: 6,
  });
  assert.deepEqual([e.status, e.stream, e.producerTokenFloor], [409, s, 6n]);
  assert.equal((await own.state(s)).nextSeq, 1025);
});

test("fence history", async () => {
  const s = streamName("fences");
  const a = await c.append(s, 1n, ["a", "b"]);
  await c.fence(s, 3n);
  const last = await c.append(s, 4n, "c");
  const h = await c.fences(s);
  assert.equal(h.stream, s);
  assert.deepEqual(
    h.fences.map((x) => [x.fencingToken, x.firstSeq, x.by]),
    [[4n, 2, "append"], [3n, 2, "fence"], [1n, 0, "append"]],
  );
  assert.deepEqual([h.fences[0].timestampMs, h.fences[2].timestampMs], [last.timestampMs, a.timestampMs]);
  assert.deepEqual((await c.fences(s, { limit: 1 })).fences.map((x) => x.fencingToken), [4n]);
});

test("fenced cursors: commit, stale, rewind, list, read and tail from one", async () => {
  const s = streamName("cursors");
  await c.append(s, 1n, ["r0", "r1", "r2"]);
  const cur = await c.commitCursor(s, "billing", 5n, 1);
  assert.deepEqual(cur, { stream: s, name: "billing", fencingToken: 5n, seq: 1, timestampMs: cur.timestampMs });
  assert.deepEqual(await c.cursor(s, "billing"), cur);
  const stale = await caught(() => c.commitCursor(s, "billing", 4n, 2), f.StaleFencingTokenError);
  assert.deepEqual([stale.presentedToken, stale.highestToken, stale.body.cursor], [4n, 5n, "billing"]);
  await c.commitCursor(s, "billing", 6n, 2); // a higher token may rewind
  await c.commitCursor(s, "audit", 1n, 0);
  assert.deepEqual(
    (await c.cursors(s)).map((x) => [x.name, x.seq, x.fencingToken]),
    [["audit", 0, 1n], ["billing", 2, 6n]],
  );
  const past = await caught(() => c.commitCursor(s, "billing", 6n, 9), f.OutOfRangeError);
  assert.deepEqual([past.seq, past.nextSeq, past.startSeq], [9, 3, null]);
  assert.deepEqual((await c.read(s, { cursor: "billing" })).records.map((r) => r.seq), [2]);
  const all = [];
  for await (const r of c.records(s, { cursor: "audit", count: 1 })) all.push(text(r.body));
  assert.deepEqual(all, ["r0", "r1", "r2"]);
  const e = await caught(() => c.cursor(s, "none"), f.CursorNotFoundError);
  assert.deepEqual(e.body, { error: "cursor_not_found", message: `stream ${s} has no cursor "none"`, stream: s, cursor: "none" });
  assert.deepEqual([e.status, e.stream, e.cursor], [404, s, "none"]);
  await caught(() => c.read(s, { cursor: "none" }), f.CursorNotFoundError);
  const tail = c.tail(s, { cursor: "billing" });
  try {
    assert.equal(tail.position, null);
    const first = (await tail.next()).value;
    assert.deepEqual([first.seq, text(first.body), tail.position], [2, "r2", 3]);
    await c.append(s, 1n, "r3");
    assert.equal((await tail.next()).value.seq, 3);
  } finally {
    await tail.close();
  }
});

test("multi-stream batch: all applied, or none with every op's outcome", async () => {
  const s = streamName("batch");
  const [x, y] = [`${s}.x`, `${s}.y`];
  const acks = await c.batch([
    { stream: x, fencingToken: 7n, fence: true },
    { stream: y, fencingToken: 7n, records: ["y0", new Uint8Array([0xff])] },
  ]);
  assert.deepEqual([acks[0].stream, acks[0].highestToken], [x, 7n]);
  assert.deepEqual(acks[1], { stream: y, firstSeq: 0, lastSeq: 1, nextSeq: 2, fencingToken: 7n, timestampMs: acks[1].timestampMs, duplicate: false });
  const stored = [];
  for await (const r of c.records(y)) stored.push([...r.body]);
  assert.deepEqual(stored, [[0x79, 0x30], [0xff]]);
  const e = await caught(
    () => c.batch([{ stream: y, fencingToken: 7n, records: "y2" }, { stream: x, fencingToken: 6n, fence: true }]),
    f.BatchRefusedError,
  );
  assert.deepEqual([e.status, e.code, e.serverMessage], [409, "stale_fencing_token", "1 of the batch's 2 operations were refused; none was applied"]);
  assert.ok(e.first instanceof f.StaleFencingTokenError);
  assert.deepEqual([e.first.stream, e.first.presentedToken, e.first.highestToken, e.first.nextSeq], [x, 6n, 7n, 0]);
  assert.equal(e.ops.length, 2);
  assert.equal(e.ops[1].error, "stale_fencing_token");
  const [would, refused] = e.outcomes;
  assert.deepEqual([would.stream, would.firstSeq], [y, 2]);
  assert.ok(refused instanceof f.StaleFencingTokenError && refused.highestToken === 7n);
  const m = await caught(() => c.batch([{ stream: y, fencingToken: 7n, records: ["y2"], matchSeqNum: 5 }]), f.BatchRefusedError);
  assert.ok(m.first instanceof f.SeqMismatchError);
  assert.deepEqual([m.status, m.first.nextSeq], [412, 2]);
  const late = await caught(() => c.batch([{ stream: y, fencingToken: 7n, records: ["y2"] }], { notAfterMs: 1 }), f.BatchRefusedError);
  assert.ok(late.first instanceof f.DeadlineExceededError);
  assert.equal((await c.state(y)).nextSeq, 2);
});

test("deadlines on trim and seal, and a sealed stream", async () => {
  const s = streamName("sealed");
  await c.append(s, 3n, ["a", "b", "c"]);
  const late = await caught(() => c.trim(s, 3n, 2, { notAfterMs: 1 }), f.DeadlineExceededError);
  assert.equal(late.stream, s);
  await caught(() => c.seal(s, 3n, { notAfterMs: 1 }), f.DeadlineExceededError);
  const st = await c.state(s);
  assert.deepEqual([st.firstSeq, st.sealed], [0, false]); // nothing changed
  const far = Date.now() + 600_000;
  assert.equal((await c.trim(s, 3n, 2, { notAfterMs: far })).firstSeq, 2);
  const sealed = await c.seal(s, 3n, { notAfterMs: far });
  assert.deepEqual([sealed.sealed, sealed.nextSeq, sealed.highestToken], [true, 3, 3n]);
  const e = await caught(() => c.append(s, 4n, "d"), f.StreamSealedError);
  assert.deepEqual(e.body, {
    error: "stream_sealed",
    message: `stream ${s} is sealed (next_seq 3, highest token 3): no more appends, fences or trims`,
    stream: s,
    first_seq: 2,
    next_seq: 3,
    highest_token: 3,
    sealed: true,
  });
  assert.deepEqual([e.status, e.firstSeq, e.nextSeq, e.highestToken], [409, 2, 3, 3n]);
  // A producer on a sealed stream is refused the same way, not retried.
  await caught(() => new f.Producer(c, s, 4n, { producerId: "late" }).append("d"), f.StreamSealedError);
});
