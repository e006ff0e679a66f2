// Live tails over SSE: catching up, following, and resuming across server
// restarts — kill -9 and graceful stops — without gaps or repeats.

import assert from "node:assert/strict";
import { after, test } from "node:test";

import * as f from "../dist/index.js";
import { Servers, streamName, text } from "../testlib/server.mjs";

const servers = new Servers("tail");
after(() => servers.cleanup());

const bodies = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix} ${i}`);

/** [seq, text] of each record until the tail reports being caught up at `nextSeq`
 * (which the server says when a connection has read its backlog). */
async function untilCaughtUp(tail, nextSeq) {
  const got = [];
  for (;;) {
    const { value, done } = await tail.next();
    assert.ok(!done, "tail ended");
    if (value instanceof f.CaughtUp) {
      assert.equal(value.nextSeq, tail.position);
      if (value.nextSeq === nextSeq) return got;
    } else got.push([value.seq, text(value.body)]);
  }
}

/** [seq, text] of the next `n` records, whatever CaughtUp events come between. */
async function take(tail, n) {
  const got = [];
  while (got.length < n) {
    const { value, done } = await tail.next();
    assert.ok(!done, "tail ended");
    if (value instanceof f.LogRecord) got.push([value.seq, text(value.body)]);
  }
  return got;
}

test("backlog, then live records", async () => {
  const s = await servers.start();
  const c = new f.Client(s.url);
  const name = streamName("live");
  await c.append(name, 1, bodies("old", 3));
  const tail = c.tailEvents(name, { idleTimeoutMs: 10_000, retryForMs: 10_000 });
  assert.deepEqual(await untilCaughtUp(tail, 3), bodies("old", 3).map((b, i) => [i, b]));
  // Appended only after the tail said it was caught up: these arrive live.
  await c.append(name, 2, ["live 1", "live 2"]);
  assert.deepEqual(await take(tail, 2), [[3, "live 1"], [4, "live 2"]]);
  assert.deepEqual([tail.position, tail.reconnects], [5, 0]);
  await tail.close();
  assert.deepEqual(await tail.next(), { done: true, value: undefined });
});

test("for await, from the middle, with break", async () => {
  const s = await servers.start();
  const c = new f.Client(s.url);
  await c.append("m", 1, bodies("r", 6));
  const seqs = [];
  for await (const r of c.tail("m", { startSeq: 4 })) {
    seqs.push(r.seq);
    if (r.seq === 5) break;
  }
  assert.deepEqual(seqs, [4, 5]);
});

test("resumes across kill -9, twice", async () => {
  const s = await servers.start();
  const producer = new f.Client(s.url);
  await producer.append("t", 1, bodies("before crash", 5));
  await producer.append("t", 1, new Uint8Array([0, 255]));
  const tail = new f.Client(s.url).tailEvents("t", { idleTimeoutMs: 10_000, retryForMs: 30_000 });
  const expected = bodies("before crash", 5).map((b, i) => [i, b]);
  const first = await untilCaughtUp(tail, 6);
  assert.deepEqual(first.slice(0, 5), expected);
  assert.equal(first[5][0], 5);

  // The next read is pending on the connection when the server dies.
  const pending = take(tail, 4);
  await s.kill9();
  await s.start(); // same port, same data directory
  await producer.append("t", 2, bodies("after restart", 4));
  assert.deepEqual(await pending, bodies("after restart", 4).map((b, i) => [6 + i, b]));
  assert.ok(tail.reconnects >= 1);

  // Again, with records the tail has not seen in the log when it comes back.
  await producer.append("t", 3, bodies("unseen", 2));
  await s.kill9();
  await s.start();
  await producer.append("t", 3, bodies("later", 2));
  assert.deepEqual(await take(tail, 4), [...bodies("unseen", 2), ...bodies("later", 2)].map((b, i) => [10 + i, b]));
  const all = [];
  for await (const r of producer.records("t")) all.push(r.seq);
  assert.deepEqual(all, Array.from({ length: 14 }, (_, i) => i));
  await tail.close();
});

test("resumes across a graceful restart", async () => {
  const s = await servers.start();
  const c = new f.Client(s.url);
  await c.append("g", 1, bodies("a", 2));
  const tail = c.tailEvents("g", { idleTimeoutMs: 10_000, retryForMs: 30_000 });
  assert.deepEqual(await untilCaughtUp(tail, 2), [[0, "a 0"], [1, "a 1"]]);
  // SIGTERM ends live tails cleanly; the client need not tell that from a crash.
  assert.equal(await s.stop(), 0);
  await s.start();
  await c.append("g", 1, bodies("b", 2));
  assert.deepEqual(await take(tail, 2), [[2, "b 0"], [3, "b 1"]]);
  assert.ok(tail.reconnects >= 1);
  await tail.close();
});

test("close() and an abort signal end a tail that is waiting", async () => {
  const s = await servers.start();
  const c = new f.Client(s.url);
  await c.append("w", 1, "only");
  const tail = c.tail("w");
  assert.equal((await tail.next()).value.seq, 0);
  const waiting = tail.next(); // nothing more will come
  await tail.close();
  assert.deepEqual(await waiting, { done: true, value: undefined });

  const ac = new AbortController();
  const tail2 = c.tail("w", { signal: ac.signal });
  assert.equal((await tail2.next()).value.seq, 0);
  const waiting2 = tail2.next();
  ac.abort();
  assert.deepEqual(await waiting2, { done: true, value: undefined });
});

test("gives up after retryForMs without a server", async () => {
  const s = await servers.start();
  const c = new f.Client(s.url);
  await c.append("x", 1, "a");
  const tail = c.tail("x", { retryForMs: 500 });
  assert.equal((await tail.next()).value.seq, 0);
  await s.kill9();
  const started = Date.now();
  await assert.rejects(() => tail.next(), f.TransportError);
  assert.ok(Date.now() - started < 10_000);
});
