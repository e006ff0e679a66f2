"""Settings and request shapes shared by :class:`fencelog.Client` and
:class:`fencelog.AsyncClient`."""

from __future__ import annotations

import os
import ssl
from typing import Dict, Optional, Tuple, Union

import httpx

from . import _wire

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


def append_request(
    stream: str, token: int, records: _wire.Records, match_seq_num: Optional[int]
) -> Tuple[str, Dict[str, str], bytes]:
    """The path, headers and body of an append.

    Sent as the binary batch body rather than JSON: the bytes go exactly as
    given, with 4 bytes of framing each — no base64 (a third more for
    binary records) and no JSON escaping, which for text full of control
    characters can grow a body six-fold and push a batch the engine would
    accept over the server's body limit. The token and match_seq_num ride
    in headers, which the server checks before it reads the body. Records
    with headers go as the batch's version 2; a batch without any as
    version 1.
    """
    parts = _wire.record_parts(records)
    with_headers = any(h for _, h in parts)
    headers = {
        "Content-Type": _wire.BATCH_V2_CONTENT_TYPE if with_headers else _wire.BATCH_CONTENT_TYPE,
        "Fencing-Token": _wire.check_token(token),
    }
    m = _wire.check_seq("match_seq_num", match_seq_num)
    if m is not None:
        headers["Match-Seq-Num"] = m
    if with_headers:
        body = _wire.encode_batch_v2(parts)
    else:
        body = _wire.encode_batch([b for b, _ in parts])
    return _wire.stream_path(stream, "/records"), headers, body


def fence_body(token: int) -> bytes:
    return b'{"fencing_token":%s}' % _wire.check_token(token).encode()


def read_params(
    start_seq: int, count: Optional[int], max_bytes: Optional[int], wait_ms: Optional[int]
) -> Dict[str, str]:
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
