/**
 * The wire format without I/O: values the API answers, request bodies,
 * response decoding, the SSE parser and the tail's cursor.
 */

import { errorFromBody, FencelogError, InsufficientStorageError, ProtocolError, UnavailableError } from "./errors.js";
import { parseJson } from "./json.js";

/** A fencing token: bigint, because tokens go up to 2^64-1. */
export type Token = bigint | number;

/** Text (sent as UTF-8) or bytes. */
export type Bytes = string | Uint8Array;

/**
 * A record as appended: text (sent as UTF-8) or bytes, or a body with
 * headers — (name, value) pairs kept in order, names may repeat; at most
 * 64 per record and 8 KiB of names and values, names 1-255 bytes (the
 * server refuses more with TooLargeError / BadRequestError).
 */
export type RecordInput = Bytes | { readonly body: Bytes; readonly headers?: ReadonlyArray<readonly [Bytes, Bytes]> };

/** A record's body and headers as bytes. */
export type RecordParts = { body: Uint8Array; headers: Array<readonly [Uint8Array, Uint8Array]> };

const utf8 = new TextEncoder();

/** One durable record. `body` holds the exact bytes appended. */
export class LogRecord {
  readonly kind = "record" as const;
  constructor(
    readonly seq: number,
    readonly fencingToken: bigint,
    readonly timestampMs: number,
    readonly body: Uint8Array,
    /** (name, value) pairs in the order appended; empty for a record without headers. */
    readonly headers: ReadonlyArray<readonly [Uint8Array, Uint8Array]> = [],
  ) {}

  /** The body as text; throws a TypeError for bodies that are not UTF-8. */
  get text(): string {
    return new TextDecoder("utf-8", { fatal: true }).decode(this.body);
  }
}

/** A tail event: everything durable before `nextSeq` has been delivered. */
export class CaughtUp {
  readonly kind = "caught_up" as const;
  constructor(readonly nextSeq: number) {}
}

export interface AppendAck {
  stream: string;
  firstSeq: number;
  lastSeq: number;
  nextSeq: number;
  fencingToken: bigint;
  timestampMs: number;
  /**
   * True when this answers an idempotent producer's retry of its last
   * applied append: it is that append's original ack, and nothing was
   * written this time.
   */
  duplicate: boolean;
}

/** "Did my write land?": an idempotent producer's last applied append (records `firstSeq..=lastSeq`). */
export interface ProducerInfo {
  producerId: string;
  producerSeq: number;
  firstSeq: number;
  lastSeq: number;
  fencingToken: bigint;
  timestampMs: number;
}

/** A token that took effect: `firstSeq` is the stream's `nextSeq` then; `by` what carried it. */
export interface FenceEntry {
  fencingToken: bigint;
  firstSeq: number;
  timestampMs: number;
  by: "append" | "fence" | "trim" | "seal" | "delete" | "config" | string;
}

/** A stream's fence history, newest first. */
export interface FenceList {
  stream: string;
  fences: FenceEntry[];
}

/** A named, fenced consumer position: `seq` is the next seq to consume. */
export interface CursorInfo {
  stream: string;
  name: string;
  fencingToken: bigint;
  seq: number;
  timestampMs: number;
}

/**
 * One op of `Client.batch()`: an append (`records`, text or bytes without
 * headers, only if the stream's `nextSeq` is `matchSeqNum` when given) or a
 * fence (`fence: true`).
 */
export type BatchOp =
  | { stream: string; fencingToken: Token; records: Bytes | Bytes[]; matchSeqNum?: number; fence?: false }
  | { stream: string; fencingToken: Token; fence: true };

export interface StreamState {
  stream: string;
  firstSeq: number;
  nextSeq: number;
  highestToken: bigint;
  lastTimestampMs: number;
  /** True once the stream is sealed: no append, fence or trim any more. */
  sealed: boolean;
}

/**
 * One page of a read. Continue from `nextStartSeq`: `nextSeq` is the
 * stream's *tail* when the page was read, and starting the next page there
 * would skip every record between this page's end and the tail.
 */
export interface ReadPage {
  records: LogRecord[];
  /** The stream's tail at read time — not where the next page starts. */
  nextSeq: number;
  /** The server's `next_start_seq` when it sends one, else the seq after the last record, else the page's start. */
  nextStartSeq: number;
}

export interface StreamPage {
  streams: StreamState[];
  /** Pass as `startAfter` for the next page; null on the last page. */
  nextStartAfter: string | null;
}

export const BATCH_CONTENT_TYPE = "application/vnd.fencelog.batch";
/** The binary batch with record headers. */
export const BATCH_V2_CONTENT_TYPE = "application/vnd.fencelog.batch; version=2";

export function tokenText(token: Token): string {
  if (typeof token === "bigint") return token.toString();
  if (typeof token === "number" && Number.isSafeInteger(token)) return BigInt(token).toString();
  throw new TypeError(`a fencing token is a bigint or a safe integer, got ${String(token)}`);
}

export function seqText(name: string, v: number | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (!Number.isSafeInteger(v)) throw new TypeError(`${name} is an integer, got ${String(v)}`);
  return String(v);
}

function asBytes(v: unknown, what: string): Uint8Array {
  if (typeof v === "string") return utf8.encode(v);
  if (v instanceof Uint8Array) return v;
  throw new TypeError(`a ${what} is a string or a Uint8Array, got ${typeof v}`);
}

/**
 * Records as bytes with their headers: strings become UTF-8; a lone
 * string, Uint8Array or `{body, headers}` is one record.
 */
export function recordParts(records: RecordInput | Iterable<RecordInput>): RecordParts[] {
  const single = typeof records === "string" || records instanceof Uint8Array || !(Symbol.iterator in Object(records));
  const list = (single ? [records] : records) as Iterable<RecordInput>;
  const out: RecordParts[] = [];
  for (const r of list) {
    if (typeof r === "string" || r instanceof Uint8Array) {
      out.push({ body: asBytes(r, "record"), headers: [] });
    } else if (typeof r === "object" && r !== null && "body" in r) {
      const headers = (r.headers ?? []).map(([n, v]) => [asBytes(n, "header name"), asBytes(v, "header value")] as const);
      out.push({ body: asBytes(r.body, "record"), headers });
    } else {
      throw new TypeError(`a record is a string, a Uint8Array or {body, headers}, got ${typeof r}`);
    }
  }
  return out;
}

/** The binary batch body: each record as a u32 little-endian length, then its bytes. */
export function encodeBatch(records: Uint8Array[]): Uint8Array<ArrayBuffer> {
  let size = 0;
  for (const r of records) {
    if (r.length > 0xffffffff) throw new RangeError("a record over 4 GiB cannot be framed");
    size += 4 + r.length;
  }
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const r of records) {
    view.setUint32(at, r.length, true);
    out.set(r, at + 4);
    at += 4 + r.length;
  }
  return out;
}

/**
 * The binary batch body version 2, records with headers: per record a u16
 * header count, per header u16 name length, name, u32 value length,
 * value, then u32 body length, body (little-endian). The server checks
 * the header limits.
 */
export function encodeBatchV2(records: RecordParts[]): Uint8Array<ArrayBuffer> {
  let size = 0;
  for (const r of records) {
    if (r.headers.length > 0xffff) throw new RangeError("over 65535 headers on a record cannot be framed");
    size += 2 + 4 + r.body.length;
    for (const [n, v] of r.headers) {
      if (n.length > 0xffff) throw new RangeError("a header name over 64 KiB cannot be framed");
      size += 2 + n.length + 4 + v.length;
    }
  }
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let at = 0;
  const put = (b: Uint8Array, lenBytes: 2 | 4) => {
    if (lenBytes === 2) view.setUint16(at, b.length, true);
    else view.setUint32(at, b.length, true);
    out.set(b, at + lenBytes);
    at += lenBytes + b.length;
  };
  for (const r of records) {
    view.setUint16(at, r.headers.length, true);
    at += 2;
    for (const [n, v] of r.headers) {
      put(n, 2);
      put(v, 4);
    }
    put(r.body, 4);
  }
  return out;
}

/**
 * `/v1/streams/{stream}{tail}` with the name escaped: an invalid name
 * reaches the server's validation intact (and gets its BadRequestError)
 * instead of changing the path.
 */
export function streamPath(stream: string, tail = ""): string {
  if (typeof stream !== "string") throw new TypeError("a stream name is a string");
  if (stream === "") throw new RangeError("a stream name cannot be empty");
  // WHATWG URL parsing (fetch) resolves "." and ".." — escaped or not — as
  // path segments, so these two can never reach the server's validation.
  if (stream === "." || stream === "..") throw new RangeError(`a stream name cannot be ${JSON.stringify(stream)}`);
  const name = encodeURIComponent(stream).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
  return `/v1/streams/${name}${tail}`;
}

// --- decoding ---------------------------------------------------------------

type Obj = { [key: string]: unknown };

function obj(v: unknown, what: string): Obj {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ProtocolError(`${what} is not an object`);
  return v as Obj;
}

function seqOf(o: Obj, key: string): number {
  const v = o[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new ProtocolError(`field ${key} missing or not a non-negative safe integer: ${String(v)}`);
  }
  return v;
}

function tokenOf(o: Obj, key: string): bigint {
  const v = o[key];
  if (typeof v === "bigint") return v;
  if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v);
  throw new ProtocolError(`field ${key} missing or not an integer: ${String(v)}`);
}

function strOf(o: Obj, key: string): string {
  const v = o[key];
  if (typeof v !== "string") throw new ProtocolError(`field ${key} missing or not a string`);
  return v;
}

function base64(text: unknown, what: string): Uint8Array {
  if (typeof text !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
    throw new ProtocolError(`${what} is not valid base64`);
  }
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * Record headers, for servers that have them: `[name, value]` text pairs
 * in `headers` (or `{name|name_base64, value|value_base64}` objects), and
 * base64 pairs in `headers_base64`. All forms are accepted until the
 * server's format is settled; none is required.
 */
function headersOf(o: Obj): Array<readonly [Uint8Array, Uint8Array]> {
  const out: Array<readonly [Uint8Array, Uint8Array]> = [];
  for (const [key, isBase64] of [["headers", false], ["headers_base64", true]] as const) {
    const items = o[key];
    if (items === undefined || items === null) continue;
    if (!Array.isArray(items)) throw new ProtocolError(`record ${key} is not a list`);
    for (const h of items) {
      if (Array.isArray(h) && h.length === 2) {
        if (isBase64) out.push([base64(h[0], "header name"), base64(h[1], "header value")]);
        else if (typeof h[0] === "string" && typeof h[1] === "string") out.push([utf8.encode(h[0]), utf8.encode(h[1])]);
        else throw new ProtocolError("a header pair is not two strings");
      } else if (typeof h === "object" && h !== null) {
        const ho = h as Obj;
        const part = (p: string): Uint8Array => {
          if (typeof ho[p] === "string") return utf8.encode(ho[p] as string);
          if (`${p}_base64` in ho) return base64(ho[`${p}_base64`], `header ${p}`);
          throw new ProtocolError(`a header has no ${p}`);
        };
        out.push([part("name"), part("value")]);
      } else {
        throw new ProtocolError("a header is neither a pair nor an object");
      }
    }
  }
  return out;
}

export function parseRecord(v: unknown): LogRecord {
  const o = obj(v, "a record");
  const seq = seqOf(o, "seq");
  let body: Uint8Array;
  if ("body" in o && !("body_base64" in o)) {
    if (typeof o.body !== "string") throw new ProtocolError(`record ${seq} body is not a string`);
    body = utf8.encode(o.body);
  } else if ("body_base64" in o && !("body" in o)) {
    body = base64(o.body_base64, `record ${seq} body_base64`);
  } else {
    throw new ProtocolError(`record ${seq} has not exactly one of body, body_base64`);
  }
  return new LogRecord(seq, tokenOf(o, "fencing_token"), seqOf(o, "timestamp_ms"), body, headersOf(o));
}

export function parseAck(v: unknown): AppendAck {
  const o = obj(v, "the append answer");
  return {
    stream: strOf(o, "stream"),
    firstSeq: seqOf(o, "first_seq"),
    lastSeq: seqOf(o, "last_seq"),
    nextSeq: seqOf(o, "next_seq"),
    fencingToken: tokenOf(o, "fencing_token"),
    timestampMs: seqOf(o, "timestamp_ms"),
    duplicate: flagOf(o, "duplicate"),
  };
}

function flagOf(o: Obj, key: string): boolean {
  const v = o[key] ?? false;
  if (typeof v !== "boolean") throw new ProtocolError(`field ${key} is not a boolean: ${String(v)}`);
  return v;
}

function listOf(o: Obj, key: string, what: string): unknown[] {
  const v = o[key];
  if (!Array.isArray(v)) throw new ProtocolError(`${what} has no ${key} array`);
  return v;
}

export function parseProducer(v: unknown): ProducerInfo {
  const o = obj(v, "the producer lookup");
  return {
    producerId: strOf(o, "producer_id"),
    producerSeq: seqOf(o, "producer_seq"),
    firstSeq: seqOf(o, "first_seq"),
    lastSeq: seqOf(o, "last_seq"),
    fencingToken: tokenOf(o, "fencing_token"),
    timestampMs: seqOf(o, "timestamp_ms"),
  };
}

export function parseFences(v: unknown): FenceList {
  const o = obj(v, "the fence history");
  const fences = listOf(o, "fences", "the fence history").map((f) => {
    const e = obj(f, "a fence");
    return {
      fencingToken: tokenOf(e, "fencing_token"),
      firstSeq: seqOf(e, "first_seq"),
      timestampMs: seqOf(e, "timestamp_ms"),
      by: strOf(e, "by"),
    };
  });
  return { stream: strOf(o, "stream"), fences };
}

export function parseCursor(v: unknown): CursorInfo {
  const o = obj(v, "a cursor");
  return {
    stream: strOf(o, "stream"),
    name: strOf(o, "name"),
    fencingToken: tokenOf(o, "fencing_token"),
    seq: seqOf(o, "seq"),
    timestampMs: seqOf(o, "timestamp_ms"),
  };
}

export function parseCursorList(v: unknown): CursorInfo[] {
  return listOf(obj(v, "the cursor list"), "cursors", "the cursor list").map(parseCursor);
}

/** A record of a JSON body: `body` when its bytes are UTF-8 (the server's rule), else `body_base64`. */
function jsonRecord(r: Bytes): string {
  if (typeof r === "string") return `{"body":${JSON.stringify(r)}}`;
  const bytes = asBytes(r, "record");
  try {
    return `{"body":${JSON.stringify(new TextDecoder("utf-8", { fatal: true }).decode(bytes))}}`;
  } catch {
    let bin = "";
    for (const b of bytes) bin += String.fromCharCode(b);
    return `{"body_base64":${JSON.stringify(btoa(bin))}}`;
  }
}

/** The body of `POST /v1/batch`. Tokens go as JSON integers, exactly (no float). */
export function batchBody(ops: readonly BatchOp[], notAfterMs: number | undefined): string {
  const items = ops.map((op) => {
    const parts = [`"stream":${JSON.stringify(op.stream)}`, `"fencing_token":${tokenText(op.fencingToken)}`];
    if (op.fence === true) {
      parts.push(`"fence":true`);
    } else {
      const list = typeof op.records === "string" || op.records instanceof Uint8Array ? [op.records] : op.records;
      parts.push(`"records":[${list.map(jsonRecord).join(",")}]`);
      const m = seqText("matchSeqNum", op.matchSeqNum);
      if (m !== undefined) parts.push(`"match_seq_num":${m}`);
    }
    return `{${parts.join(",")}}`;
  });
  const deadline = seqText("notAfterMs", notAfterMs);
  return `{"ops":[${items.join(",")}]${deadline === undefined ? "" : `,"not_after_ms":${deadline}`}}`;
}

/** One op's outcome in a batch answer: an append's ack (it has `last_seq`), a fence's state, or an error. */
export function parseBatchOutcome(status: number, v: unknown): AppendAck | StreamState | FencelogError {
  const o = obj(v, "a batch op's outcome");
  if ("error" in o) return errorFromBody(status, "", () => o);
  return "last_seq" in o ? parseAck(o) : parseState(o);
}

export function parseBatch(v: unknown): Array<AppendAck | StreamState> {
  return listOf(obj(v, "the batch answer"), "ops", "the batch answer").map((op) => {
    const outcome = parseBatchOutcome(200, op);
    if (outcome instanceof FencelogError) throw new ProtocolError("a 200 batch answer holds an error");
    return outcome;
  });
}

export function parseState(v: unknown): StreamState {
  const o = obj(v, "the stream state");
  return {
    stream: strOf(o, "stream"),
    firstSeq: seqOf(o, "first_seq"),
    nextSeq: seqOf(o, "next_seq"),
    highestToken: tokenOf(o, "highest_token"),
    lastTimestampMs: seqOf(o, "last_timestamp_ms"),
    sealed: flagOf(o, "sealed"),
  };
}

export function parseStreamPage(v: unknown): StreamPage {
  const o = obj(v, "the stream list");
  if (!Array.isArray(o.streams)) throw new ProtocolError("the stream list has no streams array");
  const after = o.next_start_after;
  if (after !== null && after !== undefined && typeof after !== "string") {
    throw new ProtocolError("next_start_after is not a string");
  }
  return { streams: o.streams.map(parseState), nextStartAfter: after ?? null };
}

export function parsePage(startSeq: number, v: unknown): ReadPage {
  const o = obj(v, "the read answer");
  if (!Array.isArray(o.records)) throw new ProtocolError("the read answer has no records array");
  const records = o.records.map(parseRecord);
  let expected = startSeq;
  for (const r of records) {
    // Within a page seqs only go up; anything else would make every cursor wrong.
    if (r.seq < expected) throw new ProtocolError(`read from ${startSeq} returned seq ${r.seq} out of order`);
    expected = r.seq + 1;
  }
  const nextSeq = seqOf(o, "next_seq");
  let nextStartSeq: number;
  if ("next_start_seq" in o) {
    nextStartSeq = seqOf(o, "next_start_seq");
    if (nextStartSeq < expected) {
      throw new ProtocolError(`next_start_seq ${nextStartSeq} would re-read records (last returned ${expected - 1})`);
    }
  } else {
    // Never next_seq: that is the tail, and paging from it skips records.
    nextStartSeq = expected;
  }
  return { records, nextSeq, nextStartSeq };
}

export function pageIsLast(page: ReadPage): boolean {
  return page.records.length === 0 || page.nextStartSeq >= page.nextSeq;
}

export function decodeJson(status: number, text: string): unknown {
  try {
    return parseJson(text);
  } catch (e) {
    throw new ProtocolError(`answer ${status} is not JSON: ${text.slice(0, 200)}`, { cause: e });
  }
}

export function errorFor(status: number, text: string): FencelogError {
  return errorFromBody(status, text, parseJson, parseBatchOutcome);
}

// --- server-sent events -----------------------------------------------------

export interface SseEvent {
  event: string;
  data: string;
  id: string | null;
}

/**
 * Incremental `text/event-stream` parser: bytes in, complete events out.
 * Lines end in LF, CRLF or CR, even split across chunks; a line is decoded
 * only once whole, so a UTF-8 sequence split across chunks is fine.
 */
export class SseParser {
  #pending: Uint8Array = new Uint8Array(0);
  #skipLf = false;
  #event = "";
  #data: string[] = [];
  #hasData = false;
  #id: string | null = null;
  #decoder = new TextDecoder("utf-8");

  feed(chunk: Uint8Array): SseEvent[] {
    const out: SseEvent[] = [];
    let buf: Uint8Array;
    if (this.#pending.length === 0) buf = chunk;
    else {
      buf = new Uint8Array(this.#pending.length + chunk.length);
      buf.set(this.#pending);
      buf.set(chunk, this.#pending.length);
    }
    let start = 0;
    if (this.#skipLf && buf[0] === 0x0a) start = 1;
    this.#skipLf = false;
    for (let i = start; i < buf.length; i++) {
      const b = buf[i];
      if (b !== 0x0a && b !== 0x0d) continue;
      const ev = this.#line(this.#decoder.decode(buf.subarray(start, i)));
      if (ev) out.push(ev);
      if (b === 0x0d) {
        if (i + 1 < buf.length) {
          if (buf[i + 1] === 0x0a) i++;
        } else {
          // A CR that ends the chunk may be the first half of a CRLF.
          this.#skipLf = true;
        }
      }
      start = i + 1;
    }
    this.#pending = buf.slice(start);
    return out;
  }

  #line(line: string): SseEvent | null {
    if (line === "") {
      if (!this.#hasData) {
        this.#event = "";
        return null;
      }
      const ev = { event: this.#event || "message", data: this.#data.join("\n"), id: this.#id };
      this.#event = "";
      this.#data = [];
      this.#hasData = false;
      return ev;
    }
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") this.#event = value;
    else if (name === "data") {
      this.#data.push(value);
      this.#hasData = true;
    } else if (name === "id" && !value.includes("\0")) this.#id = value;
    return null;
  }
}

export type TailItem = LogRecord | CaughtUp;

/**
 * The cursor of a live tail: the next seq to deliver, what to ask for on
 * (re)connect, and what each event means.
 */
export class TailState {
  /**
   * The next seq to deliver; where a reconnect resumes. Null for a tail
   * from a named cursor until the server has said where that is (its first
   * record or `caught_up`).
   */
  position: number | null;
  deliveredAny = false;
  parser = new SseParser();

  constructor(
    readonly stream: string,
    startSeq: number,
    readonly events: boolean,
    readonly cursor: string | null = null,
  ) {
    this.position = cursor === null ? startSeq : null;
  }

  /** Last-Event-ID is how SSE resumes; start_seq in the query says the same for proxies that drop it. */
  requestHeaders(): { [name: string]: string } {
    if (this.position === null) return { accept: "text/event-stream" };
    return { accept: "text/event-stream", "last-event-id": String(this.position) };
  }

  /** The cursor is read again on each connection until a position is known; then the tail resumes where it is. */
  query(): string {
    if (this.position === null) return new URLSearchParams({ cursor: String(this.cursor) }).toString();
    return `start_seq=${this.position}`;
  }

  newConnection(): void {
    this.parser = new SseParser();
  }

  feed(chunk: Uint8Array): TailItem[] {
    const out: TailItem[] = [];
    for (const ev of this.parser.feed(chunk)) {
      if (ev.event === "records") out.push(...this.#records(ev.data));
      else if (ev.event === "caught_up") {
        const seq = this.#caughtUpSeq(ev.data);
        if (this.position === null) this.position = seq;
        if (this.events) out.push(new CaughtUp(seq ?? 0));
      } else if (ev.event === "error") {
        throw errorFor(200, ev.data);
      }
      // ping, and events added later: liveness only.
    }
    return out;
  }

  #records(data: string): LogRecord[] {
    const items = decodeJson(200, data);
    if (!Array.isArray(items)) throw new ProtocolError("a records event is not a list");
    const out: LogRecord[] = [];
    for (const item of items) {
      const rec = parseRecord(item);
      const at = this.position ?? rec.seq;
      // A resumed connection may repeat what was delivered.
      if (rec.seq < at) continue;
      if (rec.seq !== at && this.deliveredAny) {
        throw new ProtocolError(`tail of ${this.stream} skipped from seq ${this.position} to ${rec.seq}`);
      }
      this.position = rec.seq + 1;
      this.deliveredAny = true;
      out.push(rec);
    }
    return out;
  }

  #caughtUpSeq(data: string): number | null {
    try {
      const v = parseJson(data) as Obj;
      if (typeof v?.next_seq === "number") return v.next_seq;
    } catch {
      // fall through
    }
    return this.position;
  }

  /** Answers worth reconnecting after: 503 and 507 say the server is alive but refusing for now. */
  static retryable(err: unknown): boolean {
    return err instanceof UnavailableError || err instanceof InsufficientStorageError;
  }
}
