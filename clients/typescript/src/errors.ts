/**
 * Every way a fencelog call can fail, as classes to test with `instanceof`.
 *
 * The server answers each error with `{"error": code, "message", ...fields}`;
 * the code picks the class and the fields become properties. The outcome a
 * fenced producer must handle — "a newer owner took over, stop" — is
 * `StaleFencingTokenError`, never a string comparison.
 *
 * ```text
 * FencelogError
 * ├── ApiError                        the server answered with an error body
 * │   ├── StaleFencingTokenError      409: a higher token was accepted; stop
 * │   ├── SeqMismatchError            412
 * │   ├── StreamSealedError           409: the stream is sealed; nobody can write
 * │   ├── ProducerSeqStaleError       409: producer_seq below the last applied one
 * │   ├── ProducerSeqGapError         409: producer_seq skips ahead
 * │   ├── ProducerFencedError         409: unknown producer below the token floor
 * │   ├── DeadlineExceededError       409: the server's time was past notAfterMs
 * │   ├── BatchRefusedError           409/412/...: a multi-stream batch, none applied
 * │   ├── ProducerNotFoundError       404 producer_not_found
 * │   ├── CursorNotFoundError         404 cursor_not_found
 * │   ├── NotFoundError               404 stream_not_found
 * │   ├── OutOfRangeError             416
 * │   ├── TooLargeError               413
 * │   ├── BadRequestError             400
 * │   ├── UnavailableError            503
 * │   ├── InsufficientStorageError    507
 * │   ├── CorruptError                500 corrupt
 * │   ├── UnauthenticatedError        401 (servers with access tokens)
 * │   └── ForbiddenError              403 (servers with access tokens)
 * ├── TransportError                  no usable answer
 * │   ├── ConnectionFailedError       nothing was sent: safe to retry
 * │   └── OutcomeUnknownError         a write may or may not have happened
 * └── ProtocolError                   an answer that breaks the wire contract
 * ```
 *
 * Any other code (`not_found` for a route that does not exist, i.e. a wrong
 * base URL; codes newer than this client) is a plain `ApiError` with its
 * `code` and `body`.
 */

export type ErrorBody = { [key: string]: unknown };

export class FencelogError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An answer that breaks the wire contract. */
export class ProtocolError extends FencelogError {}

/** The request failed below HTTP; for reads, after the client's retries. */
export class TransportError extends FencelogError {}

/** No connection could be made, so nothing was sent: any call may be retried. */
export class ConnectionFailedError extends TransportError {}

/**
 * A write was sent (or may have been) and no answer came: it may or may not
 * be durable. Appends are never retried by the client; retry with
 * `matchSeqNum` set to the `nextSeq` you expected, so a first attempt that
 * did land makes the retry fail with `SeqMismatchError` instead of
 * duplicating. In browsers, where fetch does not say why it failed, every
 * failed write is this.
 */
export class OutcomeUnknownError extends TransportError {}

/** The server refused the request with an error body. */
export class ApiError extends FencelogError {
  /** The body's `error` field; null when the body was not fencelog's (a proxy page). */
  readonly code: string | null;
  readonly status: number;
  /** The decoded body (integers past 2^53 as bigint). */
  readonly body: ErrorBody;
  /** The body as received. */
  readonly raw: string;

  constructor(status: number, body: ErrorBody, raw: string) {
    const code = typeof body.error === "string" ? body.error : null;
    const message = typeof body.message === "string" ? body.message : raw;
    super(`${code ?? `HTTP ${status}`}: ${message}`);
    this.code = code;
    this.status = status;
    this.body = body;
    this.raw = raw;
  }

  /** The server's message. */
  get serverMessage(): string {
    return typeof this.body.message === "string" ? this.body.message : this.raw;
  }
}

class MissingField extends Error {}

function str(body: ErrorBody, key: string): string {
  const v = body[key];
  if (typeof v !== "string") throw new MissingField(key);
  return v;
}

function seq(body: ErrorBody, key: string): number {
  const v = body[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new MissingField(key);
  return v;
}

function token(body: ErrorBody, key: string): bigint {
  const v = body[key];
  if (typeof v === "bigint") return v;
  if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v);
  throw new MissingField(key);
}

/** The stream accepted a higher token: a newer owner took over. Stop writing. */
export class StaleFencingTokenError extends ApiError {
  readonly stream: string;
  readonly presentedToken: bigint;
  readonly highestToken: bigint;
  readonly nextSeq: number;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.presentedToken = token(body, "presented_token");
    this.highestToken = token(body, "highest_token");
    this.nextSeq = seq(body, "next_seq");
  }
}

/** `matchSeqNum` was not the stream's `nextSeq`; nothing was written. */
export class SeqMismatchError extends ApiError {
  readonly stream: string;
  readonly matchSeqNum: number;
  readonly nextSeq: number;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.matchSeqNum = seq(body, "match_seq_num");
    this.nextSeq = seq(body, "next_seq");
  }
}

/** The stream is sealed: no append, fence or trim, whatever the token. Not a lost ownership: nobody can write. */
export class StreamSealedError extends ApiError {
  readonly stream: string;
  readonly firstSeq: number;
  readonly nextSeq: number;
  readonly highestToken: bigint;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.firstSeq = seq(body, "first_seq");
    this.nextSeq = seq(body, "next_seq");
    this.highestToken = token(body, "highest_token");
  }
}

/** No such stream (`stream_not_found`); a wrong URL is a plain ApiError. */
export class NotFoundError extends ApiError {
  readonly stream: string;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
  }
}

/**
 * A read or tail started past the stream's tail (`startSeq` is where), or
 * a cursor commit went past it (`seq` is what it carried; `startSeq` is
 * then null).
 */
export class OutOfRangeError extends ApiError {
  readonly stream: string;
  readonly startSeq: number | null;
  readonly seq: number | null;
  readonly nextSeq: number;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.startSeq = "start_seq" in body ? seq(body, "start_seq") : null;
    this.seq = "seq" in body ? seq(body, "seq") : null;
    if (this.startSeq === null && this.seq === null) throw new MissingField("start_seq");
    this.nextSeq = seq(body, "next_seq");
  }
}

/** `producerSeq` is below the producer's last applied one, `lastProducerSeq`; nothing was written. */
export class ProducerSeqStaleError extends ApiError {
  readonly stream: string;
  readonly lastProducerSeq: number;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.lastProducerSeq = seq(body, "last_producer_seq");
  }
}

/** `producerSeq` skips ahead: the stream expects `expectedProducerSeq`; nothing was written. */
export class ProducerSeqGapError extends ApiError {
  readonly stream: string;
  readonly expectedProducerSeq: number;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.expectedProducerSeq = seq(body, "expected_producer_seq");
  }
}

/**
 * A producer the stream does not know (never seen, or evicted) with a token
 * below `producerTokenFloor`: it could retry an evicted producer's applied
 * write, so it is refused. A new lease's higher token starts afresh.
 */
export class ProducerFencedError extends ApiError {
  readonly stream: string;
  readonly producerTokenFloor: bigint;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.producerTokenFloor = token(body, "producer_token_floor");
  }
}

/** The server's time for the write, `writerMs`, was past its `notAfterMs`; nothing changed. */
export class DeadlineExceededError extends ApiError {
  readonly stream: string;
  readonly writerMs: number;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.writerMs = seq(body, "writer_ms");
  }
}

/** The stream does not remember the producer; `Client.producer()` resolves null for it instead. */
export class ProducerNotFoundError extends ApiError {
  readonly stream: string;
  readonly producerId: string;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.producerId = str(body, "producer_id");
  }
}

/** The stream has no cursor of that name. */
export class CursorNotFoundError extends ApiError {
  readonly stream: string;
  readonly cursor: string;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.stream = str(body, "stream");
    this.cursor = str(body, "cursor");
  }
}

/**
 * A multi-stream batch refused whole: no op was applied. The answer has
 * the first refused op's code and fields — `first` is that refusal as its
 * own error (e.g. `StaleFencingTokenError`) — and every op's outcome in
 * order: `ops` as sent (an ack or an error body), `outcomes` decoded (an
 * `AppendAck` or `StreamState` for an op that would have been applied, an
 * `ApiError` for one that was refused; its `status` is the batch answer's,
 * as an op's error body carries none of its own).
 */
export class BatchRefusedError extends ApiError {
  readonly first: ApiError;
  readonly ops: unknown[];
  readonly outcomes: unknown[];
  constructor(status: number, body: ErrorBody, raw: string, decodeOutcome: (status: number, v: unknown) => unknown) {
    super(status, body, raw);
    if (!Array.isArray(body.ops)) throw new MissingField("ops");
    this.ops = body.ops;
    const rest: ErrorBody = { ...body };
    delete rest.ops;
    this.first = typed(status, rest, raw);
    try {
      this.outcomes = body.ops.map((op) => decodeOutcome(status, op));
    } catch (e) {
      if (e instanceof ProtocolError) throw new MissingField("ops");
      throw e;
    }
  }
}

/** Over a limit; `actual` is null when the HTTP body itself was too large. */
export class TooLargeError extends ApiError {
  readonly limit: number;
  readonly actual: number | null;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.limit = seq(body, "limit");
    this.actual = "actual" in body ? seq(body, "actual") : null;
  }
}

export class BadRequestError extends ApiError {}

class StorageError extends ApiError {
  /** True when storage failed while writing this very request. */
  readonly outcomeUnknown: boolean;
  constructor(status: number, body: ErrorBody, raw: string) {
    super(status, body, raw);
    this.outcomeUnknown = body.outcome_unknown === true;
  }
}

/** The server takes no writes (storage failed, or shutting down); reads work. */
export class UnavailableError extends StorageError {}

/** The server's disk is full. */
export class InsufficientStorageError extends StorageError {}

/** A stored frame failed its checksum; the server refuses to serve it. */
export class CorruptError extends ApiError {}

export class UnauthenticatedError extends ApiError {}

export class ForbiddenError extends ApiError {}

type ApiErrorClass = new (status: number, body: ErrorBody, raw: string) => ApiError;

const BY_CODE: { [code: string]: ApiErrorClass } = {
  stale_fencing_token: StaleFencingTokenError,
  seq_mismatch: SeqMismatchError,
  stream_sealed: StreamSealedError,
  stream_not_found: NotFoundError,
  out_of_range: OutOfRangeError,
  too_large: TooLargeError,
  bad_request: BadRequestError,
  unavailable: UnavailableError,
  insufficient_storage: InsufficientStorageError,
  corrupt: CorruptError,
  unauthenticated: UnauthenticatedError,
  forbidden: ForbiddenError,
  producer_seq_stale: ProducerSeqStaleError,
  producer_seq_gap: ProducerSeqGapError,
  producer_fenced: ProducerFencedError,
  deadline_exceeded: DeadlineExceededError,
  producer_not_found: ProducerNotFoundError,
  cursor_not_found: CursorNotFoundError,
};

/** The class the body's code names (MissingField when a documented field is missing). */
function typed(status: number, body: ErrorBody, raw: string): ApiError {
  const Cls = BY_CODE[body.error as string] ?? ApiError;
  return new Cls(status, body, raw);
}

/**
 * The error for an answer with status `status` and body `raw`, decoded by
 * `parse`. The code decides the class, not the status: a 404 from a wrong
 * URL must not look like a missing stream.
 */
export function errorFromBody(
  status: number,
  raw: string,
  parse: (text: string) => unknown,
  decodeOutcome: (status: number, v: unknown) => unknown = (_s, v) => v,
): FencelogError {
  let body: unknown;
  try {
    body = parse(raw);
  } catch {
    body = null;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body) || typeof (body as ErrorBody).error !== "string") {
    return new ApiError(status, {}, raw);
  }
  const b = body as ErrorBody;
  try {
    // A refused multi-stream batch: the first refusal's code and fields,
    // and every op's outcome.
    if ("ops" in b) return new BatchRefusedError(status, b, raw, decodeOutcome);
    return typed(status, b, raw);
  } catch (e) {
    if (e instanceof MissingField) {
      return new ProtocolError(`${String(b.error)} error without its ${JSON.stringify(e.message)} field: ${raw}`);
    }
    throw e;
  }
}
