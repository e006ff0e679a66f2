"""The synchronous client."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Deque, Iterable, Iterator, List, Optional, Tuple, Union

import httpx

from . import _common, _wire
from .errors import (
    ConnectionFailed,
    FencelogError,
    OutcomeUnknown,
    ProducerNotFound,
    ProtocolError,
    TransportError,
    error_from_body,
)
from .types import (
    AppendAck,
    BatchAppend,
    BatchFence,
    CaughtUp,
    CursorInfo,
    FenceList,
    ProducerInfo,
    ReadPage,
    Record,
    StreamPage,
    StreamState,
)


class Client:
    """A connection pool to one fencelog server. Thread-safe; close it (or
    use it as a context manager) when done.

    ``token`` is sent as ``Authorization: Bearer <token>``. For ``https://``
    URLs, ``ca_cert`` names a PEM file with the CA that signed the server's
    certificate (otherwise the system's CAs are used); ``verify`` may also be
    an :class:`ssl.SSLContext`, or False to skip verification in tests.
    ``timeout`` bounds each request, in seconds (a long-poll read gets its
    ``wait_ms`` on top). ``transport`` replaces httpx's transport (proxies,
    Unix sockets, tests).

    >>> with fencelog.Client("http://127.0.0.1:7070") as c:   # doctest: +SKIP
    ...     c.append("orders", 41, "order #1")
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:7070",
        *,
        token: Optional[str] = None,
        ca_cert: _common.CaCert = None,
        verify: _common.Verify = True,
        timeout: float = 30.0,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=self.url,
            headers=_common.base_headers(token),
            verify=_common.tls_verify(verify, ca_cert),
            timeout=_common.timeout(timeout),
            limits=httpx.Limits(keepalive_expiry=_common.KEEPALIVE_EXPIRY_S),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ---------------------------------------------------------

    def append(
        self,
        stream: str,
        token: int,
        records: _wire.Records,
        match_seq_num: Optional[int] = None,
        *,
        producer_id: Optional[str] = None,
        producer_seq: Optional[int] = None,
        not_after_ms: Optional[int] = None,
    ) -> AppendAck:
        """Appends ``records`` (a str, bytes or :class:`RecordIn` with
        headers, or a list of them) to
        ``stream`` atomically with fencing token ``token``; returns once they
        are durable. With ``match_seq_num`` the append happens only if the
        stream's ``next_seq`` equals it.

        ``producer_id`` and ``producer_seq`` (together) make it an
        idempotent producer's append: a retry of the producer's last
        applied seq answers its original ack with ``duplicate=True`` and
        writes nothing (:class:`Producer` numbers and retries them for
        you). With ``not_after_ms`` (Unix ms) it is accepted only if the
        server's timestamp for it is at most that, else
        :class:`DeadlineExceeded`.

        Raises :class:`StaleFencingToken` when a higher token was accepted
        (stop: you lost ownership). Never retried: if the answer is lost
        after sending, :class:`OutcomeUnknown`.
        """
        path, headers, body = _common.append_request(
            stream,
            token,
            records,
            match_seq_num,
            producer_id=producer_id,
            producer_seq=producer_seq,
            not_after_ms=not_after_ms,
        )
        resp = self._send_once("POST", path, what=f"append to {stream}", headers=headers, content=body)
        return _wire.parse_ack(self._json(resp), resp.content)

    def fence(self, stream: str, token: int, *, not_after_ms: Optional[int] = None) -> StreamState:
        """Raises the stream's highest token to ``token`` without writing a
        record (creating the stream if needed), so older owners are refused
        from now on. Retried on transport errors: fencing twice with the
        same token is the same as fencing once. ``not_after_ms`` is a
        deadline, as for :meth:`append`."""
        body = _common.fence_body(token, not_after_ms)
        resp = self._request(
            "POST",
            _wire.stream_path(stream, "/fence"),
            what=f"fence {stream}",
            write=True,
            content=body,
            headers={"Content-Type": "application/json"},
        )
        return _wire.parse_state(self._json(resp), resp.content)

    def trim(self, stream: str, token: int, trim_seq: int, *, not_after_ms: Optional[int] = None) -> StreamState:
        """Makes the records below ``trim_seq`` unreadable (``first_seq``
        becomes ``min(trim_seq, next_seq)`` and never moves back). Fenced
        like an append (:class:`StaleFencingToken`, :class:`StreamSealed`);
        ``not_after_ms`` is a deadline. Never retried."""
        resp = self._send_once(
            "POST",
            _wire.stream_path(stream, "/trim"),
            what=f"trim {stream}",
            headers={"Content-Type": "application/json"},
            content=_common.trim_body(token, trim_seq, not_after_ms),
        )
        return _wire.parse_state(self._json(resp), resp.content)

    def seal(self, stream: str, token: int, *, not_after_ms: Optional[int] = None) -> StreamState:
        """Seals the stream: every later append, fence and trim is
        :class:`StreamSealed`. Sealing again with the highest token is
        idempotent; ``not_after_ms`` is a deadline. Never retried."""
        resp = self._send_once(
            "POST",
            _wire.stream_path(stream, "/seal"),
            what=f"seal {stream}",
            headers={"Content-Type": "application/json"},
            content=_common.fence_body(token, not_after_ms),
        )
        return _wire.parse_state(self._json(resp), resp.content)

    def batch(
        self, ops: Iterable[Union[BatchAppend, BatchFence]], *, not_after_ms: Optional[int] = None
    ) -> List[Union[AppendAck, StreamState]]:
        """A multi-stream batch (``POST /v1/batch``), all or nothing and
        durable as one unit: each op's outcome in order — an
        :class:`AppendAck` for a :class:`BatchAppend`, a :class:`StreamState`
        for a :class:`BatchFence`. If any op is refused none is applied:
        :class:`BatchRefused`, with the first refusal as ``first`` and every
        op's outcome. Never retried (make a retry safe with
        ``match_seq_num`` on its appends)."""
        resp = self._send_once(
            "POST",
            "/v1/batch",
            what="batch",
            headers={"Content-Type": "application/json"},
            content=_wire.batch_body(ops, not_after_ms),
        )
        return _wire.parse_batch(self._json(resp), resp.content)

    def commit_cursor(self, stream: str, name: str, token: int, seq: int) -> CursorInfo:
        """Stores cursor ``name`` of ``stream`` at ``seq`` (the next seq to
        consume), fenced by the cursor's own highest token: a lower token is
        :class:`StaleFencingToken`, and the cursor moves back only with a
        strictly higher one. Never retried."""
        path = _wire.stream_path(stream, "/cursors/" + _common.name_segment(name, "cursor name"))
        resp = self._send_once(
            "PUT",
            path,
            what=f"commit cursor {name} of {stream}",
            headers={"Content-Type": "application/json"},
            content=_common.cursor_body(token, seq),
        )
        return _wire.parse_cursor(self._json(resp), resp.content)

    # --- reads ----------------------------------------------------------

    def read(
        self,
        stream: str,
        start_seq: int = 0,
        *,
        count: Optional[int] = None,
        max_bytes: Optional[int] = None,
        wait_ms: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> ReadPage:
        """One page of durable records from ``start_seq``: at most ``count``
        records and about ``max_bytes`` body bytes (the server's defaults
        when None). With ``wait_ms``, a read at the tail waits that long for
        a record instead of answering empty. With ``cursor``, the page
        starts at that named cursor's seq instead (:class:`CursorNotFound`
        if there is none). Continue from ``page.next_start_seq``;
        :meth:`iter_records` does that for you."""
        params = _common.read_params(start_seq, count, max_bytes, wait_ms, cursor)
        extra = (wait_ms or 0) / 1000.0
        resp = self._request(
            "GET",
            _wire.stream_path(stream, "/records"),
            what=f"read {stream}",
            params=params,
            timeout=_common.timeout(self._timeout + extra),
        )
        return _wire.parse_page(0 if cursor is not None else start_seq, self._json(resp), resp.content)

    def iter_records(
        self,
        stream: str,
        start_seq: int = 0,
        *,
        count: Optional[int] = None,
        max_bytes: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Iterator[Record]:
        """Every record from ``start_seq`` (or the named ``cursor``) up to
        the tail, in order, page by page. Each page starts exactly where the
        previous one ended, so no record is skipped; records appended while
        iterating are included until a page reaches the tail. To keep
        following, use :meth:`tail`."""
        page = self.read(stream, start_seq, count=count, max_bytes=max_bytes, cursor=cursor)
        # Where the page just read started; unknown for one at a cursor.
        at: Optional[int] = start_seq if cursor is None else None
        while True:
            yield from page.records
            if _wire.page_is_last(page):
                return
            if at is not None and page.next_start_seq <= at:
                raise ProtocolError(f"read of {stream} from {at} made no progress")
            at = page.next_start_seq
            page = self.read(stream, at, count=count, max_bytes=max_bytes)

    def state(self, stream: str) -> StreamState:
        """The stream's durable state; :class:`NotFound` if it does not exist."""
        resp = self._request("GET", _wire.stream_path(stream), what=f"state of {stream}")
        return _wire.parse_state(self._json(resp), resp.content)

    def producer(self, stream: str, producer_id: str) -> Optional[ProducerInfo]:
        """"Did my write land?": producer ``producer_id``'s last applied
        append on ``stream``, or None when the stream does not remember it
        (never seen, or evicted). :class:`NotFound` when there is no such
        stream. A read: retried on transport errors."""
        seg = _common.name_segment(producer_id, "producer id")
        path = _wire.stream_path(stream, "/producers/" + seg)
        resp = self._request("GET", path, what=f"producer {producer_id} of {stream}")
        try:
            return _wire.parse_producer(self._json(resp), resp.content)
        except ProducerNotFound:
            return None

    def fences(self, stream: str, *, limit: Optional[int] = None) -> FenceList:
        """The tokens that took effect on ``stream``, newest first (the
        server keeps the last 64; at most ``limit``)."""
        resp = self._request(
            "GET", _wire.stream_path(stream, "/fences"), what=f"fences of {stream}", params=_common.fences_params(limit)
        )
        return _wire.parse_fences(self._json(resp), resp.content)

    def cursor(self, stream: str, name: str) -> CursorInfo:
        """Cursor ``name`` of ``stream``; :class:`CursorNotFound` if it has none."""
        path = _wire.stream_path(stream, "/cursors/" + _common.name_segment(name, "cursor name"))
        resp = self._request("GET", path, what=f"cursor {name} of {stream}")
        return _wire.parse_cursor(self._json(resp), resp.content)

    def cursors(self, stream: str) -> Tuple[CursorInfo, ...]:
        """Every cursor of ``stream``, in name order."""
        resp = self._request("GET", _wire.stream_path(stream, "/cursors"), what=f"cursors of {stream}")
        return _wire.parse_cursor_list(self._json(resp), resp.content)

    def list_page(
        self, prefix: str = "", *, start_after: Optional[str] = None, limit: Optional[int] = None
    ) -> StreamPage:
        """One page of streams whose names start with ``prefix``, in name
        order, after ``start_after``."""
        resp = self._request(
            "GET", "/v1/streams", what="list streams", params=_common.list_params(prefix, start_after, limit)
        )
        return _wire.parse_stream_page(self._json(resp), resp.content)

    def list_streams(self, prefix: str = "", *, limit: Optional[int] = None) -> Iterator[StreamState]:
        """Every stream whose name starts with ``prefix``, in name order,
        fetched ``limit`` per page."""
        after: Optional[str] = None
        while True:
            page = self.list_page(prefix, start_after=after, limit=limit)
            yield from page.streams
            if page.next_start_after is None:
                return
            if after is not None and page.next_start_after <= after:
                raise ProtocolError(f"stream listing did not advance past {after!r}")
            after = page.next_start_after

    def tail(
        self,
        stream: str,
        start_seq: int = 0,
        *,
        idle_timeout: float = _common.TAIL_IDLE_TIMEOUT_S,
        retry_for: Optional[float] = None,
        cursor: Optional[str] = None,
    ) -> "Tail":
        """Follows ``stream`` live from ``start_seq`` (or from the named
        ``cursor``'s seq): every durable record,
        in order, exactly once, forever. On any disconnect — including a
        server restart — it reconnects with backoff and resumes after the
        last record it delivered (``Last-Event-ID``). ``retry_for`` bounds
        how long it keeps trying without a connection before raising
        :class:`TransportError` (None: forever)."""
        return Tail(
            self, stream, start_seq, events=False, idle_timeout=idle_timeout, retry_for=retry_for, cursor=cursor
        )

    def tail_events(
        self,
        stream: str,
        start_seq: int = 0,
        *,
        idle_timeout: float = _common.TAIL_IDLE_TIMEOUT_S,
        retry_for: Optional[float] = None,
        cursor: Optional[str] = None,
    ) -> "Tail":
        """:meth:`tail` that also yields :class:`CaughtUp` each time the
        consumer has read everything durable."""
        return Tail(
            self, stream, start_seq, events=True, idle_timeout=idle_timeout, retry_for=retry_for, cursor=cursor
        )

    # --- plumbing -------------------------------------------------------

    def _send_once(self, method: str, path: str, *, what: str, **kw: Any) -> httpx.Response:
        """A write sent once: a failure before anything left is
        ConnectionFailed, any later one OutcomeUnknown."""
        try:
            return self._http.request(method, path, **kw)
        except httpx.TransportError as e:
            if _common.never_sent(e):
                raise ConnectionFailed(f"{what}: {e!r}") from e
            raise OutcomeUnknown(f"{what}: sent, but no answer: {e!r}") from e

    def _request(self, method: str, path: str, *, what: str, write: bool = False, **kw: Any) -> httpx.Response:
        """An idempotent request, retried on transport errors. For a write
        (fence), a failure after anything may have been sent is
        OutcomeUnknown even though retrying it was safe."""
        maybe_sent = False
        for attempt in range(_common.IDEMPOTENT_RETRIES + 1):
            try:
                return self._http.request(method, path, **kw)
            except httpx.TransportError as e:
                maybe_sent = maybe_sent or not _common.never_sent(e)
                if attempt == _common.IDEMPOTENT_RETRIES:
                    if write and maybe_sent:
                        raise OutcomeUnknown(f"{what}: no answer: {e!r}") from e
                    if not maybe_sent:
                        raise ConnectionFailed(f"{what}: {e!r}") from e
                    raise TransportError(f"{what}: {e!r}") from e
                time.sleep(_common.RETRY_BACKOFF_S * (attempt + 1))
        raise AssertionError("unreachable")

    @staticmethod
    def _json(resp: httpx.Response) -> Any:
        if resp.status_code >= 400:
            raise error_from_body(resp.status_code, resp.content)
        return _wire.decode_json(resp.status_code, resp.content)


class Tail:
    """An iterator over a live tail (see :meth:`Client.tail`). ``position``
    is the next seq it will deliver; ``reconnects`` counts the connections
    it had to make again. Close it, or use it as a context manager, to stop."""

    def __init__(
        self,
        client: Client,
        stream: str,
        start_seq: int,
        *,
        events: bool,
        idle_timeout: float,
        retry_for: Optional[float],
        cursor: Optional[str] = None,
    ) -> None:
        self._client = client
        self._state = _wire.TailState(stream, start_seq, events, cursor)
        self._idle_timeout = idle_timeout
        self._retry_for = retry_for
        self._response: Optional[httpx.Response] = None
        self._chunks: Optional[Iterator[bytes]] = None
        self._pending: Deque[Union[Record, CaughtUp]] = deque()
        self._closed = False
        self._backoff = _common.TAIL_BACKOFF_MIN_S
        self._connected_once = False
        self.reconnects = 0

    @property
    def position(self) -> Optional[int]:
        """None for a tail from a cursor until its position is known."""
        return self._state.position

    def __iter__(self) -> "Tail":
        return self

    def __next__(self) -> Union[Record, CaughtUp]:
        while not self._pending:
            if self._closed:
                raise StopIteration
            if self._chunks is None:
                self._connect()
                continue
            try:
                chunk = next(self._chunks)
            except StopIteration:
                # The server ended the stream (it is shutting down).
                self._disconnect()
                continue
            except httpx.TransportError:
                # Reset, killed, or silent past idle_timeout.
                self._disconnect()
                continue
            try:
                self._pending.extend(self._state.feed(chunk))
            except FencelogError:
                self.close()
                raise
            self._backoff = _common.TAIL_BACKOFF_MIN_S
        return self._pending.popleft()

    def _connect(self) -> None:
        """Connects (again), sleeping with exponential backoff before each
        retry. Returns with a live stream, or raises what reconnecting
        cannot fix."""
        http = self._client._http
        state = self._state
        give_up = None if self._retry_for is None else time.monotonic() + self._retry_for
        while True:
            if self._connected_once:
                time.sleep(self._backoff)
                self._backoff = min(self._backoff * 2, _common.TAIL_BACKOFF_MAX_S)
                self.reconnects += 1
            self._connected_once = True
            failure: Optional[BaseException] = None
            try:
                req = http.build_request(
                    "GET",
                    _wire.stream_path(state.stream, "/records"),
                    params=state.request_params(),
                    headers=state.request_headers(),
                    timeout=httpx.Timeout(self._idle_timeout, connect=5.0),
                )
                resp = http.send(req, stream=True)
            except httpx.TransportError as e:
                failure = e
            else:
                if resp.status_code == 200:
                    self._response = resp
                    self._chunks = resp.iter_bytes()
                    state.new_connection()
                    return
                resp.read()
                resp.close()
                err = error_from_body(resp.status_code, resp.content)
                if not _wire.TailState.retryable(err):
                    self.close()
                    raise err
                failure = err
            if give_up is not None and time.monotonic() >= give_up:
                self.close()
                raise TransportError(
                    f"tail of {state.stream}: no connection for {self._retry_for} s: {failure!r}"
                ) from failure

    def _disconnect(self) -> None:
        if self._response is not None:
            self._response.close()
        self._response = None
        self._chunks = None

    def close(self) -> None:
        self._closed = True
        self._pending.clear()
        self._disconnect()

    def __enter__(self) -> "Tail":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Client", "Tail"]

