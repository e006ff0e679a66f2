import {
  ConnectionFailedError,
  FencelogError,
  OutcomeUnknownError,
  ProducerNotFoundError,
  ProtocolError,
  TransportError,
} from "./errors.js";
import {
  type AppendAck,
  type BatchOp,
  batchBody,
  type CursorInfo,
  type FenceList,
  parseBatch,
  parseCursor,
  parseCursorList,
  parseFences,
  parseProducer,
  type ProducerInfo,
  BATCH_CONTENT_TYPE,
  BATCH_V2_CONTENT_TYPE,
  CaughtUp,
  decodeJson,
  encodeBatch,
  encodeBatchV2,
  errorFor,
  LogRecord,
  pageIsLast,
  parseAck,
  parsePage,
  parseState,
  parseStreamPage,
  type ReadPage,
  type RecordInput,
  recordParts,
  seqText,
  type StreamPage,
  type StreamState,
  streamPath,
  TailState,
  type Token,
  tokenText,
} from "./wire.js";

export interface ClientOptions {
  /** Sent as `Authorization: Bearer <token>`, for servers with access tokens. */
  token?: string;
  /** Bound on each request in ms (a long-poll read gets its `waitMs` on top). Default 30000. */
  timeoutMs?: number;
  /**
   * The fetch to use (default: the global one). TLS trust lives here: fetch
   * has no portable CA option, so in Node either start the process with
   * `NODE_EXTRA_CA_CERTS=ca.pem`, or pass a fetch that adds a dispatcher
   * with your CA; browsers use the system's trust store.
   */
  fetch?: typeof globalThis.fetch;
  /** Extra fetch options for every request (e.g. Node's `dispatcher`, a browser's `credentials`). */
  requestInit?: RequestInit & { [key: string]: unknown };
}

export interface AppendOptions {
  /** Append only if the stream's `nextSeq` equals this. */
  matchSeqNum?: number;
  /**
   * An idempotent producer's id (1-64 of `[A-Za-z0-9._:-]`), with
   * `producerSeq`: a retry of its last applied seq answers the original ack
   * with `duplicate: true` and writes nothing. `Producer` numbers and
   * retries them for you.
   */
  producerId?: string;
  producerSeq?: number;
  /** A deadline (Unix ms): accepted only if the server's timestamp for it is at most this, else `DeadlineExceededError`. */
  notAfterMs?: number;
}

export interface FenceOptions {
  /** A deadline, as for appends. */
  notAfterMs?: number;
}

export interface ReadOptions {
  startSeq?: number;
  /** Start at this named cursor's seq instead of `startSeq` (`CursorNotFoundError` if there is none). */
  cursor?: string;
  /** Most records (server default 1000, at most 10000). */
  count?: number;
  /** About this many body bytes (server default 1 MiB); the first record always comes whole. */
  bytes?: number;
  /** At the tail, wait up to this long for a record instead of answering empty. */
  waitMs?: number;
}

export interface TailOptions {
  startSeq?: number;
  /** Start at this named cursor's seq instead of `startSeq`; `position` is null until the server has said where that is. */
  cursor?: string;
  /** Reconnect when nothing (not even a ping, sent every 15 s) arrives for this long. Default 45000. */
  idleTimeoutMs?: number;
  /** Give up with TransportError after this long without a connection. Default: never. */
  retryForMs?: number;
  /** Aborting ends the tail, like `close()`. */
  signal?: AbortSignal;
}

/** Extra attempts an idempotent request gets after a transport error; appends get none. */
const IDEMPOTENT_RETRIES = 2;
const RETRY_BACKOFF_MS = 100;
const TAIL_IDLE_TIMEOUT_MS = 45_000;
const TAIL_BACKOFF_MIN_MS = 50;
const TAIL_BACKOFF_MAX_MS = 5_000;

/**
 * Errors that fetch raises only before a request leaves: no connection, no
 * TLS session, no valid URL. Anything else — a reset, a closed socket, a
 * timeout waiting for the answer — may follow a request the server applied.
 */
const NEVER_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
  "ERR_INVALID_URL",
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

function neverSent(err: unknown): boolean {
  const seen = new Set<unknown>();
  const stack = [err];
  while (stack.length > 0) {
    const e = stack.pop() as { code?: unknown; cause?: unknown; errors?: unknown } | null;
    if (typeof e !== "object" || e === null || seen.has(e)) continue;
    seen.add(e);
    if (typeof e.code === "string" && NEVER_SENT_CODES.has(e.code)) return true;
    stack.push(e.cause);
    if (Array.isArray(e.errors)) stack.push(...e.errors);
  }
  return false;
}

function describe(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let i = 0; i < 4 && typeof e === "object" && e !== null; i++) {
    const x = e as { message?: unknown; code?: unknown; cause?: unknown };
    parts.push(`${String(x.message)}${typeof x.code === "string" ? ` (${x.code})` : ""}`);
    e = x.cause;
  }
  return parts.join(": ") || String(err);
}

/**
 * A producer id or cursor name as one escaped path segment: valid names
 * are URL-safe already; anything else reaches the server's validation intact.
 */
function segment(name: string, what: string): string {
  if (typeof name !== "string" || name === "") throw new TypeError(`a ${what} is a non-empty string`);
  if (name === "." || name === "..") throw new RangeError(`a ${what} cannot be ${JSON.stringify(name)}`);
  return encodeURIComponent(name);
}

/** `,"not_after_ms":N` for a JSON body with a deadline, else nothing. */
function deadlineField(options: FenceOptions): string {
  const deadline = seqText("notAfterMs", options.notAfterMs);
  return deadline === undefined ? "" : `,"not_after_ms":${deadline}`;
}

function cursorPath(stream: string, name: string): string {
  return streamPath(stream, `/cursors/${segment(name, "cursor name")}`);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A client of one fencelog server.
 *
 * ```ts
 * const log = new Client("http://127.0.0.1:7070");
 * await log.append("invoices", 41n, "A: invoice 1001 drafted");
 * for await (const r of log.records("invoices")) console.log(r.seq, r.text);
 * ```
 */
export class Client {
  readonly url: string;
  readonly #fetch: typeof globalThis.fetch;
  readonly #headers: { [name: string]: string };
  readonly #timeoutMs: number;
  readonly #init: RequestInit;

  constructor(url = "http://127.0.0.1:7070", options: ClientOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#headers = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#init = options.requestInit ?? {};
  }

  /**
   * Appends `records` (a string or Uint8Array, or `{body, headers}` for a
   * record with headers, or an array of them) atomically with fencing
   * token `token`; resolves once durable.
   *
   * Rejects with `StaleFencingTokenError` when a higher token was accepted
   * (stop: you lost ownership). Never retried: a lost answer is
   * `OutcomeUnknownError`.
   *
   * Sent as the binary batch body: bytes go exactly as given, with 4 bytes
   * of framing each — no base64, no JSON escaping that could push a batch
   * the engine accepts over the server's body limit. Records with headers
   * go as the batch's version 2.
   */
  async append(
    stream: string,
    token: Token,
    records: RecordInput | Iterable<RecordInput>,
    options: AppendOptions = {},
  ): Promise<AppendAck> {
    const parts = recordParts(records);
    const withHeaders = parts.some((r) => r.headers.length > 0);
    const headers: { [name: string]: string } = {
      "content-type": withHeaders ? BATCH_V2_CONTENT_TYPE : BATCH_CONTENT_TYPE,
      "fencing-token": tokenText(token),
    };
    if ((options.producerId === undefined) !== (options.producerSeq === undefined)) {
      throw new TypeError("producerId and producerSeq go together");
    }
    if (options.producerId !== undefined && typeof options.producerId !== "string") {
      throw new TypeError("a producer id is a string");
    }
    // The token, producer and deadline ride in headers, which the server
    // checks before it reads the body.
    const optional = [
      ["match-seq-num", seqText("matchSeqNum", options.matchSeqNum)],
      ["producer-id", options.producerId],
      ["producer-seq", seqText("producerSeq", options.producerSeq)],
      ["not-after-ms", seqText("notAfterMs", options.notAfterMs)],
    ] as const;
    for (const [name, value] of optional) if (value !== undefined) headers[name] = value;
    const body = withHeaders ? encodeBatchV2(parts) : encodeBatch(parts.map((r) => r.body));
    const [status, text] = await this.#sendOnce(streamPath(stream, "/records"), { method: "POST", headers, body }, `append to ${stream}`);
    return parseAck(this.#decode(status, text));
  }

  /**
   * Makes the records below `trimSeq` unreadable (`firstSeq` becomes
   * `min(trimSeq, nextSeq)` and never moves back). Fenced like an append
   * (`StaleFencingTokenError`, `StreamSealedError`); `notAfterMs` is a
   * deadline. Never retried.
   */
  async trim(stream: string, token: Token, trimSeq: number, options: FenceOptions = {}): Promise<StreamState> {
    const body = `{"fencing_token":${tokenText(token)},"trim_seq":${seqText("trimSeq", trimSeq)}${deadlineField(options)}}`;
    const init = { method: "POST", headers: { "content-type": "application/json" }, body };
    const [status, text] = await this.#sendOnce(streamPath(stream, "/trim"), init, `trim ${stream}`);
    return parseState(this.#decode(status, text));
  }

  /**
   * Seals the stream: every later append, fence and trim is
   * `StreamSealedError`. Sealing again with the highest token is
   * idempotent; `notAfterMs` is a deadline. Never retried.
   */
  async seal(stream: string, token: Token, options: FenceOptions = {}): Promise<StreamState> {
    const body = `{"fencing_token":${tokenText(token)}${deadlineField(options)}}`;
    const init = { method: "POST", headers: { "content-type": "application/json" }, body };
    const [status, text] = await this.#sendOnce(streamPath(stream, "/seal"), init, `seal ${stream}`);
    return parseState(this.#decode(status, text));
  }

  /**
   * A multi-stream batch (`POST /v1/batch`), all or nothing and durable as
   * one unit: each op's outcome in order (an `AppendAck` for an append, a
   * `StreamState` for a fence). If any op is refused none is applied:
   * `BatchRefusedError`, with the first refusal as `first` and every op's
   * outcome. Never retried (make a retry safe with `matchSeqNum`).
   */
  async batch(ops: readonly BatchOp[], options: FenceOptions = {}): Promise<Array<AppendAck | StreamState>> {
    const init = { method: "POST", headers: { "content-type": "application/json" }, body: batchBody(ops, options.notAfterMs) };
    const [status, text] = await this.#sendOnce("/v1/batch", init, "batch");
    return parseBatch(this.#decode(status, text));
  }

  /**
   * Stores cursor `name` at `seq` (the next seq to consume), fenced by the
   * cursor's own highest token: a lower token is `StaleFencingTokenError`;
   * the cursor moves back only with a strictly higher one. Never retried.
   */
  async commitCursor(stream: string, name: string, token: Token, seq: number): Promise<CursorInfo> {
    const body = `{"fencing_token":${tokenText(token)},"seq":${seqText("seq", seq)}}`;
    const init = { method: "PUT", headers: { "content-type": "application/json" }, body };
    const [status, text] = await this.#sendOnce(cursorPath(stream, name), init, `commit cursor ${name} of ${stream}`);
    return parseCursor(this.#decode(status, text));
  }

  /**
   * "Did my write land?": producer `producerId`'s last applied append, or
   * null when the stream does not remember it (never seen, or evicted);
   * `NotFoundError` without such a stream. Retried on transport errors.
   */
  async producer(stream: string, producerId: string): Promise<ProducerInfo | null> {
    const path = streamPath(stream, `/producers/${segment(producerId, "producer id")}`);
    const [status, text] = await this.#idempotent(path, { method: "GET" }, `producer ${producerId} of ${stream}`, false);
    try {
      return parseProducer(this.#decode(status, text));
    } catch (e) {
      if (e instanceof ProducerNotFoundError) return null;
      throw e;
    }
  }

  /** The tokens that took effect on the stream, newest first (the server keeps the last 64; at most `limit`). */
  async fences(stream: string, options: { limit?: number } = {}): Promise<FenceList> {
    const limit = seqText("limit", options.limit);
    const path = streamPath(stream, "/fences") + (limit === undefined ? "" : `?limit=${limit}`);
    const [status, text] = await this.#idempotent(path, { method: "GET" }, `fences of ${stream}`, false);
    return parseFences(this.#decode(status, text));
  }

  /** Cursor `name`; `CursorNotFoundError` if the stream has none. */
  async cursor(stream: string, name: string): Promise<CursorInfo> {
    const [status, text] = await this.#idempotent(cursorPath(stream, name), { method: "GET" }, `cursor ${name} of ${stream}`, false);
    return parseCursor(this.#decode(status, text));
  }

  /** Every cursor of the stream, in name order. */
  async cursors(stream: string): Promise<CursorInfo[]> {
    const [status, text] = await this.#idempotent(streamPath(stream, "/cursors"), { method: "GET" }, `cursors of ${stream}`, false);
    return parseCursorList(this.#decode(status, text));
  }

  /**
   * Raises the stream's highest token to `token` without writing a record
   * (creating the stream if needed). Retried on transport errors: fencing
   * twice with one token is the same as fencing once. `notAfterMs` is a
   * deadline, as for appends.
   */
  async fence(stream: string, token: Token, options: FenceOptions = {}): Promise<StreamState> {
    const body = `{"fencing_token":${tokenText(token)}${deadlineField(options)}}`;
    const [status, text] = await this.#idempotent(
      streamPath(stream, "/fence"),
      { method: "POST", headers: { "content-type": "application/json" }, body },
      `fence ${stream}`,
      true,
    );
    return parseState(this.#decode(status, text));
  }

  /** One page of durable records; continue from `page.nextStartSeq` (or use `records()`). */
  async read(stream: string, options: ReadOptions = {}): Promise<ReadPage> {
    const startSeq = options.startSeq ?? 0;
    // The server refuses a start_seq next to a cursor.
    const q = new URLSearchParams(
      options.cursor === undefined ? { start_seq: seqText("startSeq", startSeq) as string } : { cursor: options.cursor },
    );
    for (const [name, v] of [["count", options.count], ["bytes", options.bytes], ["wait_ms", options.waitMs]] as const) {
      const s = seqText(name, v);
      if (s !== undefined) q.set(name, s);
    }
    const [status, text] = await this.#idempotent(
      `${streamPath(stream, "/records")}?${q}`,
      { method: "GET" },
      `read ${stream}`,
      false,
      this.#timeoutMs + (options.waitMs ?? 0),
    );
    return parsePage(options.cursor === undefined ? startSeq : 0, this.#decode(status, text));
  }

  /**
   * Every record from `startSeq` up to the tail, in order, page by page;
   * each page starts exactly where the previous one ended, so none is
   * skipped. To keep following, use `tail()`.
   */
  async *records(stream: string, options: Omit<ReadOptions, "waitMs"> = {}): AsyncGenerator<LogRecord, void, undefined> {
    let page = await this.read(stream, options);
    // Where the page just read started; unknown for one from a cursor.
    let at: number | null = options.cursor === undefined ? (options.startSeq ?? 0) : null;
    for (;;) {
      yield* page.records;
      if (pageIsLast(page)) return;
      if (at !== null && page.nextStartSeq <= at) throw new ProtocolError(`read of ${stream} from ${at} made no progress`);
      at = page.nextStartSeq;
      const { cursor: _started, ...rest } = options;
      page = await this.read(stream, { ...rest, startSeq: at });
    }
  }

  /** The stream's durable state; `NotFoundError` if it does not exist. */
  async state(stream: string): Promise<StreamState> {
    const [status, text] = await this.#idempotent(streamPath(stream), { method: "GET" }, `state of ${stream}`, false);
    return parseState(this.#decode(status, text));
  }

  /** One page of streams whose names start with `prefix`, in name order, after `startAfter`. */
  async listPage(options: { prefix?: string; startAfter?: string; limit?: number } = {}): Promise<StreamPage> {
    const q = new URLSearchParams({ prefix: options.prefix ?? "" });
    if (options.startAfter !== undefined) q.set("start_after", options.startAfter);
    const limit = seqText("limit", options.limit);
    if (limit !== undefined) q.set("limit", limit);
    const [status, text] = await this.#idempotent(`/v1/streams?${q}`, { method: "GET" }, "list streams", false);
    return parseStreamPage(this.#decode(status, text));
  }

  /** Every stream whose name starts with `prefix`, in name order, `limit` per page. */
  async *listStreams(options: { prefix?: string; limit?: number } = {}): AsyncGenerator<StreamState, void, undefined> {
    let after: string | undefined;
    for (;;) {
      const page = await this.listPage(after === undefined ? options : { ...options, startAfter: after });
      yield* page.streams;
      if (page.nextStartAfter === null) return;
      if (after !== undefined && page.nextStartAfter <= after) {
        throw new ProtocolError(`stream listing did not advance past ${after}`);
      }
      after = page.nextStartAfter;
    }
  }

  /**
   * Follows `stream` live over Server-Sent Events: every durable record, in
   * order, exactly once. On any disconnect — a server restart included — it
   * reconnects with backoff and resumes after the last record it delivered
   * (`Last-Event-ID`). Stop it with `break`, `close()` or `signal`.
   */
  tail(stream: string, options: TailOptions = {}): Tail<LogRecord> {
    return new Tail<LogRecord>(this, stream, false, options);
  }

  /** `tail()` that also yields `CaughtUp` each time everything durable has been delivered. */
  tailEvents(stream: string, options: TailOptions = {}): Tail<LogRecord | CaughtUp> {
    return new Tail<LogRecord | CaughtUp>(this, stream, true, options);
  }

  /** @internal */
  async _fetchStream(path: string, headers: { [name: string]: string }, signal: AbortSignal): Promise<Response> {
    return this.#fetch(this.url + path, {
      ...this.#init,
      method: "GET",
      headers: { ...this.#headers, ...headers },
      signal,
    });
  }

  /** A write sent once: a failure before anything left is ConnectionFailedError, any later one OutcomeUnknownError. */
  async #sendOnce(path: string, init: RequestInit, what: string): Promise<[number, string]> {
    try {
      const resp = await this.#send(path, init, this.#timeoutMs);
      return [resp.status, await resp.text()];
    } catch (e) {
      if (neverSent(e)) throw new ConnectionFailedError(`${what}: ${describe(e)}`, { cause: e });
      throw new OutcomeUnknownError(`${what}: sent, but no answer: ${describe(e)}`, { cause: e });
    }
  }

  async #send(path: string, init: RequestInit, timeoutMs: number): Promise<Response> {
    return this.#fetch(this.url + path, {
      ...this.#init,
      ...init,
      headers: { ...this.#headers, ...(init.headers as { [name: string]: string }) },
      signal: AbortSignal.timeout(timeoutMs),
    });
  }

  /** A request safe to repeat, retried on transport errors. */
  async #idempotent(
    path: string,
    init: RequestInit,
    what: string,
    write: boolean,
    timeoutMs = this.#timeoutMs,
  ): Promise<[number, string]> {
    let maybeSent = false;
    for (let attempt = 0; ; attempt++) {
      try {
        const resp = await this.#send(path, init, timeoutMs);
        return [resp.status, await resp.text()];
      } catch (e) {
        maybeSent ||= !neverSent(e);
        if (attempt === IDEMPOTENT_RETRIES) {
          if (write && maybeSent) throw new OutcomeUnknownError(`${what}: no answer: ${describe(e)}`, { cause: e });
          if (!maybeSent) throw new ConnectionFailedError(`${what}: ${describe(e)}`, { cause: e });
          throw new TransportError(`${what}: ${describe(e)}`, { cause: e });
        }
        await sleep(RETRY_BACKOFF_MS * (attempt + 1));
      }
    }
  }

  #decode(status: number, text: string): unknown {
    if (status >= 400) throw errorFor(status, text);
    return decodeJson(status, text);
  }
}

/**
 * A live tail: an async iterator (`for await`), with the next seq it will
 * deliver in `position` and the connections it had to make again in
 * `reconnects`.
 */
export class Tail<T extends LogRecord | CaughtUp> implements AsyncIterableIterator<T> {
  readonly #client: Client;
  readonly #state: TailState;
  readonly #idleTimeoutMs: number;
  readonly #retryForMs: number | undefined;
  readonly #gen: AsyncGenerator<T, void, undefined>;
  #closed = false;
  #conn: AbortController | null = null;
  #wake: (() => void) | null = null;
  reconnects = 0;

  constructor(client: Client, stream: string, events: boolean, options: TailOptions) {
    this.#client = client;
    this.#state = new TailState(stream, options.startSeq ?? 0, events, options.cursor ?? null);
    this.#idleTimeoutMs = options.idleTimeoutMs ?? TAIL_IDLE_TIMEOUT_MS;
    this.#retryForMs = options.retryForMs;
    this.#gen = this.#run();
    const signal = options.signal;
    if (signal) {
      if (signal.aborted) this.#closed = true;
      else signal.addEventListener("abort", () => void this.close(), { once: true });
    }
  }

  /** Null for a tail from a cursor until its position is known. */
  get position(): number | null {
    return this.#state.position;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T, void>> {
    return this.#gen.next();
  }

  async return(): Promise<IteratorResult<T, void>> {
    await this.close();
    return { done: true, value: undefined };
  }

  /** Ends the tail; a pending `next()` resolves as done. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#conn?.abort();
    this.#wake?.();
    await this.#gen.return(undefined);
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  async #connect(first: boolean): Promise<Response | null> {
    const state = this.#state;
    const giveUp = this.#retryForMs === undefined ? null : Date.now() + this.#retryForMs;
    let backoff = TAIL_BACKOFF_MIN_MS;
    for (let retry = !first; ; retry = true) {
      if (retry) {
        await this.#sleep(backoff);
        backoff = Math.min(backoff * 2, TAIL_BACKOFF_MAX_MS);
        this.reconnects++;
      }
      if (this.#closed) return null;
      const conn = new AbortController();
      this.#conn = conn;
      let failure: unknown;
      try {
        const resp = await this.#client._fetchStream(
          `${streamPath(state.stream, "/records")}?${state.query()}`,
          state.requestHeaders(),
          conn.signal,
        );
        if (resp.status === 200 && resp.body !== null) return resp;
        const err = errorFor(resp.status, await resp.text());
        if (!TailState.retryable(err)) throw err;
        failure = err;
      } catch (e) {
        if (this.#closed) return null;
        if (e instanceof FencelogError && !TailState.retryable(e)) throw e;
        failure = e;
      }
      if (giveUp !== null && Date.now() >= giveUp) {
        throw new TransportError(`tail of ${state.stream}: no connection for ${this.#retryForMs} ms: ${describe(failure)}`, {
          cause: failure,
        });
      }
    }
  }

  async *#run(): AsyncGenerator<T, void, undefined> {
    const state = this.#state;
    let first = true;
    try {
      while (!this.#closed) {
        const resp = await this.#connect(first);
        first = false;
        if (resp === null) return;
        state.newConnection();
        const conn = this.#conn as AbortController;
        const reader = (resp.body as ReadableStream<Uint8Array>).getReader();
        try {
          for (;;) {
            // Armed only while waiting on the network, so a slow consumer
            // is never mistaken for a dead connection.
            const idle = setTimeout(() => conn.abort(), this.#idleTimeoutMs);
            let chunk: ReadableStreamReadResult<Uint8Array>;
            try {
              chunk = await reader.read();
            } catch {
              break; // reset, killed, or idle: reconnect (or stop, if closed)
            } finally {
              clearTimeout(idle);
            }
            if (chunk.done) break; // the server ended the stream (shutting down)
            for (const item of state.feed(chunk.value)) yield item as T;
          }
        } finally {
          conn.abort();
        }
      }
    } finally {
      this.#closed = true;
      this.#conn?.abort();
    }
  }
}

export { CaughtUp, LogRecord };
