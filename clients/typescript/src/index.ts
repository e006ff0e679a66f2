/**
 * Client for fencelog, a fenced append-only log. Every append carries a
 * fencing token; the server refuses tokens below the highest it accepted,
 * and this client turns that refusal into `StaleFencingTokenError`.
 */

export { Client, Tail } from "./client.js";
export type { AppendOptions, ClientOptions, ReadOptions, TailOptions } from "./client.js";
export {
  ApiError,
  BadRequestError,
  ConnectionFailedError,
  CorruptError,
  FencelogError,
  ForbiddenError,
  InsufficientStorageError,
  NotFoundError,
  OutcomeUnknownError,
  OutOfRangeError,
  ProtocolError,
  SeqMismatchError,
  StaleFencingTokenError,
  TooLargeError,
  TransportError,
  UnauthenticatedError,
  UnavailableError,
} from "./errors.js";
export type { ErrorBody } from "./errors.js";
export { parseJson } from "./json.js";
export { CaughtUp, LogRecord, SseParser, TailState, encodeBatch, encodeBatchV2 } from "./wire.js";
export type { AppendAck, Bytes, ReadPage, RecordInput, RecordParts, SseEvent, StreamPage, StreamState, Token } from "./wire.js";
