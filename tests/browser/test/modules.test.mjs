// The console's pure modules in Node, without a browser: the metrics
// parser and the rates between scrapes, the histogram quantile, the token
// timeline, the SSE parser, and body formatting.

import assert from "node:assert/strict";
import { test } from "node:test";
import { bodyBytes, bodyText, formatBytes, hexDump, tokenHue } from "../../../crates/fencelog-server/console/format.js";
import { History, parseMetrics, quantile, rates } from "../../../crates/fencelog-server/console/metrics.js";
import { SseParser } from "../../../crates/fencelog-server/console/sse.js";
import { extendRuns, fencedAbove, runsFromFences, runsFromRecords } from "../../../crates/fencelog-server/console/timeline.js";

const scrape = (at_ms, text) => ({ at_ms, metrics: parseMetrics(text) });

const SCRAPE_1 = `# HELP fencelog_appends_accepted Appends acknowledged as durable.
# TYPE fencelog_appends_accepted counter
fencelog_appends_accepted_total 10
fencelog_stale_rejections_total 1
fencelog_fsync_seconds_sum 0.010
fencelog_fsync_seconds_count 10
fencelog_fsync_seconds_bucket{le="0.001"} 10
fencelog_fsync_seconds_bucket{le="0.01"} 10
fencelog_fsync_seconds_bucket{le="+Inf"} 10
fencelog_group_records_sum 20.0
fencelog_group_records_count 10
fencelog_writer_queue_depth 0
# EOF
`;

const SCRAPE_2 = SCRAPE_1.replace("accepted_total 10", "accepted_total 30")
  .replace("rejections_total 1", "rejections_total 5")
  .replace("seconds_sum 0.010", "seconds_sum 0.110")
  .replace("seconds_count 10", "seconds_count 30")
  .replace('le="0.001"} 10', 'le="0.001"} 20')
  .replace('le="0.01"} 10', 'le="0.01"} 30')
  .replace('le="+Inf"} 10', 'le="+Inf"} 30')
  .replace("records_sum 20.0", "records_sum 80.0")
  .replace("records_count 10", "records_count 30")
  .replace("queue_depth 0", "queue_depth 3");

test("rates between two scrapes", () => {
  const r = rates(scrape(1000, SCRAPE_1), scrape(3000, SCRAPE_2));
  assert.equal(r.appends, 10);
  assert.equal(r.stale, 2);
  assert.equal(r.mismatches, 0, "a metric the server lacks is 0");
  assert.equal(r.fsyncMean, 0.1 / 20);
  assert.equal(r.groupRecords, 3);
  assert.equal(r.queueDepth, 3);
  assert.deepEqual([r.from_ms, r.at_ms], [1000, 3000]);
  // 20 new observations: 10 at or below 1 ms, 10 in (1 ms, 10 ms]; the
  // 99th is 98% of the way into the second bucket.
  assert.ok(Math.abs(r.fsyncP99 - (0.001 + 0.009 * 0.98)) < 1e-12, String(r.fsyncP99));
});

test("a counter that went down is a restarted server, counted from zero", () => {
  const r = rates(scrape(0, SCRAPE_2), scrape(1000, SCRAPE_1));
  assert.equal(r.appends, 10);
  assert.equal(r.stale, 1);
});

test("nothing observed is null, not zero latency", () => {
  const r = rates(scrape(0, SCRAPE_1), scrape(1000, SCRAPE_1));
  assert.equal(r.fsyncMean, null);
  assert.equal(r.fsyncP99, null);
  assert.equal(r.groupRecords, null);
  assert.equal(r.appends, 0);
});

test("quantile interpolates within a bucket and stops below +Inf", () => {
  const b = (counts) => [0.001, 0.01, Infinity].map((le, i) => ({ le, count: counts[i] }));
  assert.equal(quantile(0.5, b([0, 0, 0]), b([10, 10, 10])), 0.0005);
  assert.equal(quantile(0.99, b([0, 0, 0]), b([0, 0, 4])), 0.01, "all above the last finite bucket");
});

test("labels are parsed with escapes", () => {
  const m = parseMetrics('x_bucket{le="0.5",path="a\\"b"} 3\n');
  assert.deepEqual(m.get("x_bucket"), [{ labels: { le: "0.5", path: 'a"b' }, value: 3 }]);
});

test("history keeps the window and starts at the first scrape", () => {
  const h = new History(10_000);
  assert.equal(h.add(scrape(0, SCRAPE_1)), null);
  for (let t = 2000; t <= 20_000; t += 2000) h.add(scrape(t, SCRAPE_1));
  assert.equal(h.startedMs, 0);
  assert.deepEqual(h.points.map((p) => p.at_ms), [10_000, 12_000, 14_000, 16_000, 18_000, 20_000]);
});

const rec = (seq, token, body) => ({ seq, fencing_token: token, timestamp_ms: 1000 + seq, body });

test("runs of one token from records, extended live", () => {
  const runs = runsFromRecords([rec(0, 41, "a"), rec(1, 41, "b"), rec(2, 42, "c")]);
  assert.deepEqual(
    runs.map((r) => [r.token, r.firstSeq, r.lastSeq, r.count, r.sample.body]),
    [
      [41, 0, 1, 2, "a"],
      [42, 2, 2, 1, "c"],
    ],
  );
  extendRuns(runs, [rec(3, 42, "d"), rec(4, 43, "e")]);
  assert.deepEqual(runs.map((r) => [r.token, r.firstSeq, r.lastSeq, r.count]), [
    [41, 0, 1, 2],
    [42, 2, 3, 2],
    [43, 4, 4, 1],
  ]);
  assert.equal(fencedAbove(runs, { highest_token: 43, next_seq: 5 }), null);
  assert.deepEqual(fencedAbove(runs, { highest_token: 44, next_seq: 5 }), { token: 44, atSeq: 5 });
  assert.deepEqual(fencedAbove([], { highest_token: 0, next_seq: 0 }), null, "a stream nobody wrote");
});

test("a token that comes back after another is a new run", () => {
  // Equal tokens may not interleave with a higher one in a real stream, but
  // the timeline must not merge runs that are not adjacent.
  const runs = runsFromRecords([rec(0, 5, "a"), rec(2, 5, "b")]);
  assert.equal(runs.length, 2);
});

test("runs from the fence history (newest first) cover up to next_seq", () => {
  const fences = [
    { fencing_token: 43, first_seq: 4, timestamp_ms: 30, by: "fence" },
    { fencing_token: 42, first_seq: 2, timestamp_ms: 20, by: "append" },
    { fencing_token: 41, first_seq: 0, timestamp_ms: 10, by: "append" },
  ];
  const runs = runsFromFences(fences, { next_seq: 6 });
  assert.deepEqual(runs.map((r) => [r.token, r.firstSeq, r.lastSeq, r.count, r.by]), [
    [41, 0, 1, 2, "append"],
    [42, 2, 3, 2, "append"],
    [43, 4, 5, 2, "fence"],
  ]);
});

test("SSE events split anywhere, with CRLF, CR, comments and multi-line data", () => {
  const p = new SseParser();
  const text = ": hello\r\nevent: records\r\nid: 3\r\ndata: [1,\r\ndata: 2]\r\n\r\nevent: ping\rdata: {}\r\revent: caught_up\nid: 3\ndata: {\"next_seq\":3}\n\n";
  const events = [];
  for (const c of text) events.push(...p.push(c));
  assert.deepEqual(events, [
    { event: "records", id: "3", data: "[1,\n2]" },
    { event: "ping", id: null, data: "{}" },
    { event: "caught_up", id: "3", data: '{"next_seq":3}' },
  ]);
  assert.deepEqual(p.push(": keep-alive\n\n"), [], "a comment block is no event");
});

test("bodies as text and hex", () => {
  assert.equal(bodyText({ body: "héllo" }), "héllo");
  assert.equal(bodyText({ body_base64: "AP9B" }), null);
  assert.equal(bodyText({ body_base64: "aGk=" }), "hi", "base64 that is UTF-8 reads as text");
  assert.deepEqual(Array.from(bodyBytes({ body_base64: "AP9B" })), [0, 255, 65]);
  assert.equal(hexDump(new Uint8Array([0, 255, 65])), "00000000  00 ff 41" + " ".repeat(39) + "  |..A|");
  const long = hexDump(new Uint8Array(40), 2);
  assert.equal(long.split("\n").length, 3);
  assert.equal(long.split("\n")[2], "… 8 more bytes");
  assert.equal(formatBytes(104.4), "104 B");
  assert.equal(formatBytes(2560), "2.5 KiB");
});

test("consecutive tokens get distinct colours; huge tokens work", () => {
  const hues = [41, 42, 43].map(tokenHue);
  for (let i = 1; i < hues.length; i++) {
    const d = Math.abs(hues[i] - hues[i - 1]);
    assert.ok(Math.min(d, 360 - d) > 60, String(hues));
  }
  assert.equal(tokenHue(18446744073709551615n), tokenHue("18446744073709551615"));
});
