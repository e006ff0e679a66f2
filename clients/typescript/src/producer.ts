import type { AppendOptions, Client } from "./client.js";
import { ApiError, FencelogError, NotFoundError, TransportError } from "./errors.js";
import type { AppendAck, RecordInput, Token } from "./wire.js";

/** Retries of one idempotent producer append after a transport failure or an unknown outcome (the Rust client's PRODUCER_RETRIES_MAX). */
export const PRODUCER_RETRIES = 5;
const PRODUCER_BACKOFF_MS = 50;

/**
 * Whether an idempotent producer's append may or may not have been applied
 * (or never left), so sending it again with the same producer seq is how
 * to find out: the server applies it at most once and answers an applied
 * one as a duplicate. Storage refusals (503, 507) are retried whether or
 * not this request reached the disk, for the same reason.
 */
function shouldRetry(e: unknown): boolean {
  if (e instanceof TransportError) return true;
  return e instanceof ApiError && (e.status === 503 || e.status === 507);
}

export interface ProducerOptions {
  /** The id (1-64 of `[A-Za-z0-9._:-]`); without one, plain appends that are never retried. */
  producerId?: string;
  /** The seq the next append carries (default 0; `Producer.start` asks the server). */
  nextProducerSeq?: number;
  /** Appends carry this deadline (Unix ms); settable later as `notAfterMs`. */
  notAfterMs?: number;
}

/**
 * An idempotent producer on one stream with one fencing token. With an id
 * it numbers its appends itself (`producerSeq`) and, when an append's
 * outcome is unknown — the connection failed, or the server answered that
 * storage failed — sends it again with the same seq: the server applies it
 * at most once and answers a retry of the last applied one with its
 * original ack (`duplicate: true`). So `append` resolves with the ack or
 * rejects with an error saying it was not applied (`StaleFencingTokenError`,
 * `DeadlineExceededError`, ...) — or, after `PRODUCER_RETRIES` retries, the
 * last unknown outcome. Without an id it sends plain appends and never
 * retries them, as `Client.append` does.
 *
 * ```ts
 * const p = await Producer.start(log, "orders", "worker-a", 41n);
 * const ack = await p.append("order #1"); // ack.duplicate after a lost answer
 * ```
 */
export class Producer {
  readonly client: Client;
  readonly stream: string;
  readonly fencingToken: Token;
  readonly producerId: string | undefined;
  /** Appends from now on carry this deadline (Unix ms): a worker's lease expiry minus its clock-skew margin. */
  notAfterMs: number | undefined;
  #nextSeq: number;

  constructor(client: Client, stream: string, fencingToken: Token, options: ProducerOptions = {}) {
    if (options.producerId === undefined && (options.nextProducerSeq ?? 0) !== 0) {
      throw new TypeError("nextProducerSeq needs a producerId");
    }
    this.client = client;
    this.stream = stream;
    this.fencingToken = fencingToken;
    this.producerId = options.producerId;
    this.notAfterMs = options.notAfterMs;
    this.#nextSeq = options.nextProducerSeq ?? 0;
  }

  /**
   * A producer that continues where `producerId` left off on `stream` (its
   * last applied seq + 1, asked of the server), or starts at 0 (also for a
   * stream that does not exist yet).
   */
  static async start(
    client: Client,
    stream: string,
    producerId: string,
    fencingToken: Token,
    options: { notAfterMs?: number } = {},
  ): Promise<Producer> {
    let next = 0;
    try {
      const last = await client.producer(stream, producerId);
      if (last !== null) next = last.producerSeq + 1;
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
    return new Producer(client, stream, fencingToken, { ...options, producerId, nextProducerSeq: next });
  }

  /** The seq the next append will carry (unused without an id). */
  get nextProducerSeq(): number {
    return this.#nextSeq;
  }

  /** Appends `records` with the next producer seq, retrying unknown outcomes with the same seq (only with an id). */
  async append(records: RecordInput | Iterable<RecordInput>): Promise<AppendAck> {
    const id = this.producerId;
    const attempts = 1 + (id === undefined ? 0 : PRODUCER_RETRIES);
    const options: AppendOptions = id === undefined ? {} : { producerId: id, producerSeq: this.#nextSeq };
    if (this.notAfterMs !== undefined) options.notAfterMs = this.notAfterMs;
    for (let attempt = 1; ; attempt++) {
      try {
        const ack = await this.client.append(this.stream, this.fencingToken, records, options);
        if (id !== undefined) this.#nextSeq++;
        return ack;
      } catch (e) {
        if (attempt === attempts || !(e instanceof FencelogError) || !shouldRetry(e)) throw e;
        await new Promise((resolve) => setTimeout(resolve, PRODUCER_BACKOFF_MS * attempt));
      }
    }
  }
}
