/**
 * Client for fencelog, a fenced append-only log. Every append carries a
 * fencing token; the server refuses tokens below the highest it accepted,
 * and this client turns that refusal into `StaleFencingTokenError`.
 */

export { Client, Tail } from "./client.js";
export type { AppendOptions, ClientOptions, FenceOptions, ReadOptions, TailOptions } from "./client.js";
export { Producer, PRODUCER_RETRIES } from "./producer.js";
export type { ProducerOptions } from "./producer.js";
export {
  ApiError,
  BadRequestError,
  BatchRefusedError,
  ConnectionFailedError,
  CorruptError,
  CursorNotFoundError,
  DeadlineExceededError,
  FencelogError,
  ForbiddenError,
  InsufficientStorageError,
  NotFoundError,
  OutcomeUnknownError,
  OutOfRangeError,
  ProducerFencedError,
  ProducerNotFoundError,
  ProducerSeqGapError,
  ProducerSeqStaleError,
  ProtocolError,
  SeqMismatchError,
  StaleFencingTokenError,
  StreamSealedError,
  TooLargeError,
  TransportError,
  UnauthenticatedError,
  UnavailableError,
} from "./errors.js";
export type { ErrorBody } from "./errors.js";
export { parseJson } from "./json.js";
export { CaughtUp, LogRecord, SseParser, TailState, encodeBatch, encodeBatchV2 } from "./wire.js";
export type {
  AppendAck,
  BatchOp,
  Bytes,
  CursorInfo,
  FenceEntry,
  FenceList,
  ProducerInfo,
  ReadPage,
  RecordInput,
  RecordParts,
  SseEvent,
  StreamPage,
  StreamState,
  Token,
} from "./wire.js";
