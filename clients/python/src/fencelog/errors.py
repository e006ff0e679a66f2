"""Every way a fencelog call can fail, as exception types to match on.

The server answers every error with ``{"error": code, "message": text,
...fields}``; the code picks the class and the fields become attributes, so
the outcome a fenced producer must handle — "a newer owner took over, stop"
— is ``except StaleFencingToken``, never a string comparison::

    FencelogError
    ├── ApiError                 the server answered with an error body
    │   ├── StaleFencingToken    409: a higher token was accepted; stop writing
    │   ├── SeqMismatch          412: match_seq_num != the stream's next_seq
    │   ├── StreamSealed         409: the stream is sealed; nobody can write
    │   ├── ProducerSeqStale     409: producer_seq below the last applied one
    │   ├── ProducerSeqGap       409: producer_seq skips ahead of the expected one
    │   ├── ProducerFenced       409: unknown producer below the producer token floor
    │   ├── DeadlineExceeded     409: the server's time was past not_after_ms
    │   ├── BatchRefused         409/412/...: a multi-stream batch, none applied
    │   ├── ProducerNotFound     404: the stream does not remember the producer
    │   ├── CursorNotFound       404: the stream has no cursor of that name
    │   ├── NotFound             404: no such stream
    │   ├── OutOfRange           416: start_seq is past the stream's tail
    │   ├── TooLarge             413: batch or body over a server limit
    │   ├── BadRequest           400
    │   ├── Unavailable          503: storage failed or shutting down
    │   ├── InsufficientStorage  507: the server's disk is full
    │   ├── Corrupt              500: a stored frame failed its checksum
    │   ├── Unauthenticated      401 (once the server has access tokens)
    │   └── Forbidden            403 (once the server has access tokens)
    ├── TransportError           no usable answer arrived
    │   ├── ConnectionFailed     nothing was sent: safe to retry anything
    │   └── OutcomeUnknown       a write may or may not have happened
    └── ProtocolError            an answer this client cannot interpret

Any other code (``not_found`` for a route that does not exist, which means a
wrong base URL; ``io_error``; codes added after this client) is a plain
:class:`ApiError` carrying ``code`` and the whole ``body``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Type


class FencelogError(Exception):
    """Base of every error raised by this package."""


class ProtocolError(FencelogError):
    """The server answered something that breaks the wire contract: a body
    that is not the documented JSON, an error without its documented fields,
    a tail or page that skips or repeats records."""

    def __init__(self, message: str, *, status: Optional[int] = None, raw: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.raw = raw


class TransportError(FencelogError):
    """The request failed below HTTP (connection refused, reset, timed out).
    For reads, state and listing this is raised after the client's own
    retries; those calls are idempotent and may simply be called again."""


class ConnectionFailed(TransportError):
    """No connection could be made, so nothing was sent: retrying is safe
    for every operation, appends included."""


class OutcomeUnknown(TransportError):
    """A write was sent (or may have been) and no answer came back. It may
    or may not be durable. The client never retries an append; to retry
    safely, append again with ``match_seq_num`` set to the ``next_seq`` you
    expected: if the first attempt landed, the retry fails with
    :class:`SeqMismatch` instead of writing a duplicate."""


class ApiError(FencelogError):
    """The server refused the request with an error body.

    ``code`` is the body's ``error`` field (None when the body was not a
    fencelog error at all, e.g. a proxy's HTML page), ``message`` its text,
    ``body`` the whole decoded body, ``status`` the HTTP status.
    """

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        code = body.get("error")
        message = body.get("message")
        self.status: int = status
        self.code: Optional[str] = code if isinstance(code, str) else None
        self.message: str = message if isinstance(message, str) else raw.decode("utf-8", "replace")
        self.body: Dict[str, Any] = body
        self.raw: bytes = raw
        super().__init__(f"{self.code or 'HTTP ' + str(status)}: {self.message}")


def _int(body: Dict[str, Any], key: str) -> int:
    v = body.get(key)
    # bool is an int subclass; the contract's integers are never booleans.
    if not isinstance(v, int) or isinstance(v, bool):
        raise KeyError(key)
    return v


def _str(body: Dict[str, Any], key: str) -> str:
    v = body.get(key)
    if not isinstance(v, str):
        raise KeyError(key)
    return v


def _opt_int(body: Dict[str, Any], key: str) -> Optional[int]:
    return _int(body, key) if key in body else None


class StaleFencingToken(ApiError):
    """The stream has accepted a higher token than the one presented: a
    newer owner took over. This is a normal outcome, not a fault — stop
    writing, and do not retry with the same token."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.presented_token: int = _int(body, "presented_token")
        self.highest_token: int = _int(body, "highest_token")
        self.next_seq: int = _int(body, "next_seq")


class SeqMismatch(ApiError):
    """``match_seq_num`` did not equal the stream's ``next_seq``; nothing
    was written."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.match_seq_num: int = _int(body, "match_seq_num")
        self.next_seq: int = _int(body, "next_seq")


class StreamSealed(ApiError):
    """The stream is sealed: no append, fence or trim is accepted, whatever
    the token. Not a lost ownership: nobody can write any more."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.first_seq: int = _int(body, "first_seq")
        self.next_seq: int = _int(body, "next_seq")
        self.highest_token: int = _int(body, "highest_token")


class NotFound(ApiError):
    """The stream does not exist (code ``stream_not_found``). A wrong URL
    (code ``not_found``) is a plain :class:`ApiError`, not this."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")


class OutOfRange(ApiError):
    """A read or tail started past the stream's tail (``start_seq`` is
    where it started), or a cursor commit went past it (``seq`` is the
    seq the commit carried; ``start_seq`` is then None)."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.next_seq: int = _int(body, "next_seq")
        self.start_seq: Optional[int] = _opt_int(body, "start_seq")
        self.seq: Optional[int] = _opt_int(body, "seq")
        if self.start_seq is None and self.seq is None:
            raise KeyError("start_seq")


class TooLarge(ApiError):
    """Over a server limit. ``limit`` is always given; ``actual`` is given
    for the engine's batch limits (records, bytes) and absent when the HTTP
    body itself was over the body limit."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.limit: int = _int(body, "limit")
        self.actual: Optional[int] = _opt_int(body, "actual")


class BadRequest(ApiError):
    """The request is malformed (token 0, bad stream name, bad JSON...);
    sending it again fails the same way."""


class _StorageError(ApiError):
    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        v = body.get("outcome_unknown", False)
        #: True when storage failed while writing *this* request: it may or
        #: may not be durable after the server restarts.
        self.outcome_unknown: bool = v is True


class ProducerSeqStale(ApiError):
    """The append's ``producer_seq`` is below the producer's last applied
    one, ``last_producer_seq``: an old retry; nothing was written."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.last_producer_seq: int = _int(body, "last_producer_seq")


class ProducerSeqGap(ApiError):
    """The append's ``producer_seq`` skips ahead: the stream expects
    ``expected_producer_seq`` next from this producer; nothing was written."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.expected_producer_seq: int = _int(body, "expected_producer_seq")


class ProducerFenced(ApiError):
    """A producer the stream does not know (never seen, or evicted) with a
    token below the stream's ``producer_token_floor``: it could be the retry
    of an evicted producer's applied write, so it is refused. A new lease's
    higher token starts afresh."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.producer_token_floor: int = _int(body, "producer_token_floor")


class DeadlineExceeded(ApiError):
    """The server's timestamp for the write, ``writer_ms``, was past the
    request's ``not_after_ms``; nothing changed. For a worker that passed
    its lease's expiry: the lease may be over, stop."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.writer_ms: int = _int(body, "writer_ms")


class ProducerNotFound(ApiError):
    """The stream does not remember the producer (never seen, or evicted).
    :meth:`Client.producer` answers None for it instead of raising."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.producer_id: str = _str(body, "producer_id")


class CursorNotFound(ApiError):
    """The stream has no cursor of that name (a cursor read, or a read or
    tail with ``cursor=``)."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        self.stream: str = _str(body, "stream")
        self.cursor: str = _str(body, "cursor")


class BatchRefused(ApiError):
    """A multi-stream batch was refused whole: no op was applied. The answer
    carries the first refused op's code and fields (``first`` is that
    refusal as its own error, e.g. :class:`StaleFencingToken`) and every
    op's outcome in order: ``ops`` as sent (an ack, or an error body), and
    ``outcomes`` decoded — an :class:`AppendAck` or :class:`StreamState`
    for an op that would have been applied, an :class:`ApiError` for one
    that was refused (its ``status`` is the batch answer's: an op's error
    body carries no status of its own)."""

    def __init__(self, status: int, body: Dict[str, Any], *, raw: bytes = b"") -> None:
        super().__init__(status, body, raw=raw)
        ops = body.get("ops")
        if not isinstance(ops, list):
            raise KeyError("ops")
        self.ops: List[Any] = ops
        rest = {k: v for k, v in body.items() if k != "ops"}
        self.first: ApiError = _typed(status, rest, raw)
        from ._wire import parse_batch_outcome  # _wire imports this module

        try:
            self.outcomes: List[Any] = [parse_batch_outcome(status, op, raw) for op in ops]
        except ProtocolError:
            raise KeyError("ops") from None


class Unavailable(_StorageError):
    """The server takes no writes: its storage failed (until an operator
    restarts it) or it is shutting down. Reads keep working."""


class InsufficientStorage(_StorageError):
    """The server's disk is full; writes resume after space is freed and the
    server restarted."""


class Corrupt(ApiError):
    """A stored frame failed its checksum on read; the server refuses to
    serve wrong bytes. An operator problem, not retryable."""


class Unauthenticated(ApiError):
    """No or unknown access token (for servers with access tokens)."""


class Forbidden(ApiError):
    """The access token does not cover this operation or stream."""


_BY_CODE: Dict[str, Type[ApiError]] = {
    "stale_fencing_token": StaleFencingToken,
    "seq_mismatch": SeqMismatch,
    "stream_sealed": StreamSealed,
    "stream_not_found": NotFound,
    "out_of_range": OutOfRange,
    "too_large": TooLarge,
    "bad_request": BadRequest,
    "unavailable": Unavailable,
    "insufficient_storage": InsufficientStorage,
    "corrupt": Corrupt,
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "producer_seq_stale": ProducerSeqStale,
    "producer_seq_gap": ProducerSeqGap,
    "producer_fenced": ProducerFenced,
    "deadline_exceeded": DeadlineExceeded,
    "producer_not_found": ProducerNotFound,
    "cursor_not_found": CursorNotFound,
}


def _typed(status: int, body: Dict[str, Any], raw: bytes) -> ApiError:
    """The class the body's code names, built from it (KeyError when a
    field it documents is missing)."""
    cls = _BY_CODE.get(body["error"], ApiError)
    return cls(status, body, raw=raw)


def error_from_body(status: int, raw: bytes) -> FencelogError:
    """The exception for an error answer. The code decides the class, not
    the status: a 404 from a wrong URL must not look like a missing stream."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        # Not fencelog's answer (a proxy, a load balancer): keep what came.
        return ApiError(status, {}, raw=raw)
    try:
        if "ops" in body:
            # A refused multi-stream batch: the first refusal's code and
            # fields, and every op's outcome.
            return BatchRefused(status, body, raw=raw)
        return _typed(status, body, raw)
    except KeyError as missing:
        return ProtocolError(
            f"{body['error']} error without its {missing.args[0]!r} field: {raw!r}",
            status=status,
            raw=raw,
        )

