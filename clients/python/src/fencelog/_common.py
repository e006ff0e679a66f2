"""Settings and request shapes shared by :class:`fencelog.Client` and
:class:`fencelog.AsyncClient`."""

from __future__ import annotations

import os
import ssl
from typing import Dict, Optional, Tuple, Union
from urllib.parse import quote

import httpx

from . import _wire
from .errors import ApiError, TransportError

#: Extra attempts an idempotent request (read, state, list, fence) gets
#: after a transport error. Appends get none.
IDEMPOTENT_RETRIES = 2
RETRY_BACKOFF_S = 0.1
#: The server pings an idle tail every 15 s; three missed pings mean the
#: connection is dead even if TCP has not noticed.
TAIL_IDLE_TIMEOUT_S = 45.0
TAIL_BACKOFF_MIN_S = 0.05
TAIL_BACKOFF_MAX_S = 5.0
#: The server closes a keep-alive connection that stays idle for its
#: header-read timeout (10 s by default). Reusing a connection the server
#: is closing turns an append into OutcomeUnknown for nothing, so pooled
#: connections are dropped well before that.
KEEPALIVE_EXPIRY_S = 4.0

Verify = Union[bool, ssl.SSLContext]
CaCert = Union[str, "os.PathLike[str]", None]


def tls_verify(verify: Verify, ca_cert: CaCert) -> Verify:
    """httpx's ``verify`` from the two options: ``ca_cert`` (a PEM file of
    the CA that signed the server's certificate) wins over ``verify``."""
    if ca_cert is not None:
        if verify is False:
            raise ValueError("ca_cert and verify=False contradict each other")
        return ssl.create_default_context(cafile=os.fspath(ca_cert))
    return verify


def base_headers(token: Optional[str]) -> Dict[str, str]:
    headers = {"User-Agent": "fencelog-python/0.1"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds, connect=min(seconds, 5.0))


#: Retries of one idempotent producer append after a transport failure or
#: an unknown outcome, before the error is raised (the Rust client's
#: PRODUCER_RETRIES_MAX).
PRODUCER_RETRIES = 5
PRODUCER_BACKOFF_S = 0.05


def append_request(
    stream: str,
    token: int,
    records: _wire.Records,
    match_seq_num: Optional[int],
    *,
    producer_id: Optional[str] = None,
    producer_seq: Optional[int] = None,
    not_after_ms: Optional[int] = None,
) -> Tuple[str, Dict[str, str], bytes]:
    """The path, headers and body of an append.

    Sent as the binary batch body rather than JSON: the bytes go exactly as
    given, with 4 bytes of framing each — no base64 (a third more for
    binary records) and no JSON escaping, which for text full of control
    characters can grow a body six-fold and push a batch the engine would
    accept over the server's body limit. The token and match_seq_num ride
    in headers, which the server checks before it reads the body. Records
    with headers go as the batch's version 2; a batch without any as
    version 1. An idempotent producer's id and seq and the deadline ride
    in headers too (``Producer-Id``, ``Producer-Seq``, ``Not-After-Ms``).
    """
    parts = _wire.record_parts(records)
    with_headers = any(h for _, h in parts)
    headers = {
        "Content-Type": _wire.BATCH_V2_CONTENT_TYPE if with_headers else _wire.BATCH_CONTENT_TYPE,
        "Fencing-Token": _wire.check_token(token),
    }
    if (producer_id is None) != (producer_seq is None):
        raise ValueError("producer_id and producer_seq go together")
    if producer_id is not None and not isinstance(producer_id, str):
        raise TypeError(f"a producer id is a str, got {type(producer_id).__name__}")
    optional = (
        ("Match-Seq-Num", _wire.check_seq("match_seq_num", match_seq_num)),
        ("Producer-Id", producer_id),
        ("Producer-Seq", _wire.check_seq("producer_seq", producer_seq)),
        ("Not-After-Ms", _wire.check_seq("not_after_ms", not_after_ms)),
    )
    for name, value in optional:
        if value is not None:
            headers[name] = value
    if with_headers:
        body = _wire.encode_batch_v2(parts)
    else:
        body = _wire.encode_batch([b for b, _ in parts])
    return _wire.stream_path(stream, "/records"), headers, body


def fence_body(token: int, not_after_ms: Optional[int] = None) -> bytes:
    body = b'{"fencing_token":%s' % _wire.check_token(token).encode()
    deadline = _wire.check_seq("not_after_ms", not_after_ms)
    if deadline is not None:
        body += b',"not_after_ms":%s' % deadline.encode()
    return body + b"}"


def trim_body(token: int, trim_seq: int, not_after_ms: Optional[int]) -> bytes:
    fence = fence_body(token, not_after_ms)
    return fence[:-1] + b',"trim_seq":%s}' % (_wire.check_seq("trim_seq", trim_seq) or "0").encode()


def cursor_body(token: int, seq: int) -> bytes:
    return b'{"fencing_token":%s,"seq":%s}' % (
        _wire.check_token(token).encode(),
        (_wire.check_seq("seq", seq) or "0").encode(),
    )


def name_segment(name: str, what: str) -> str:
    """A producer id or cursor name as one escaped path segment (valid
    names are URL-safe already; anything else reaches the server's
    validation intact)."""
    if not isinstance(name, str):
        raise TypeError(f"a {what} is a str, got {type(name).__name__}")
    if name == "":
        raise ValueError(f"a {what} cannot be empty")
    seg = quote(name, safe=":")
    return seg.replace(".", "%2E") if seg in (".", "..") else seg


def fences_params(limit: Optional[int]) -> Dict[str, str]:
    s = _wire.check_seq("limit", limit)
    return {} if s is None else {"limit": s}


def producer_should_retry(e: Exception) -> bool:
    """Whether an idempotent producer's append may or may not have been
    applied (or never left), so sending it again with the same producer
    seq is how to find out: the server applies it at most once and answers
    an applied one as a duplicate. Storage refusals (503, 507) are retried
    whether or not this request reached the disk, for the same reason."""
    if isinstance(e, TransportError):
        return True
    return isinstance(e, ApiError) and e.status in (503, 507)


def read_params(
    start_seq: int,
    count: Optional[int],
    max_bytes: Optional[int],
    wait_ms: Optional[int],
    cursor: Optional[str] = None,
) -> Dict[str, str]:
    # A read at a named cursor starts where it says; the server refuses a
    # start_seq next to it.
    if cursor is not None:
        params = {"cursor": cursor}
    else:
        params = {"start_seq": _wire.check_seq("start_seq", start_seq) or "0"}
    for name, v in (("count", count), ("bytes", max_bytes), ("wait_ms", wait_ms)):
        s = _wire.check_seq(name, v)
        if s is not None:
            params[name] = s
    return params


def list_params(prefix: str, start_after: Optional[str], limit: Optional[int]) -> Dict[str, str]:
    params = {"prefix": prefix}
    if start_after is not None:
        params["start_after"] = start_after
    s = _wire.check_seq("limit", limit)
    if s is not None:
        params["limit"] = s
    return params


def never_sent(exc: httpx.TransportError) -> bool:
    """Whether a transport error happened before any byte of the request
    could have reached the server. Only a failed connect (or no free
    connection in the pool) is that certain; any error later — a write
    error, a reset, a timeout waiting for the answer — may follow a request
    the server received and applied."""
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol))
