"""The asyncio client: the same calls as :class:`fencelog.Client`, awaited."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, AsyncIterator, Deque, Iterable, List, Optional, Tuple, Union

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


class AsyncClient:
    """:class:`fencelog.Client` for asyncio; the same options. Close it with
    ``await client.aclose()`` or ``async with``."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:7070",
        *,
        token: Optional[str] = None,
        ca_cert: _common.CaCert = None,
        verify: _common.Verify = True,
        timeout: float = 30.0,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=_common.base_headers(token),
            verify=_common.tls_verify(verify, ca_cert),
            timeout=_common.timeout(timeout),
            limits=httpx.Limits(keepalive_expiry=_common.KEEPALIVE_EXPIRY_S),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def append(
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
        """See :meth:`fencelog.Client.append`. Never retried."""
        path, headers, body = _common.append_request(
            stream,
            token,
            records,
            match_seq_num,
            producer_id=producer_id,
            producer_seq=producer_seq,
            not_after_ms=not_after_ms,
        )
        resp = await self._send_once("POST", path, what=f"append to {stream}", headers=headers, content=body)
        return _wire.parse_ack(_json(resp), resp.content)

    async def fence(self, stream: str, token: int, *, not_after_ms: Optional[int] = None) -> StreamState:
        """See :meth:`fencelog.Client.fence`."""
        resp = await self._request(
            "POST",
            _wire.stream_path(stream, "/fence"),
            what=f"fence {stream}",
            write=True,
            content=_common.fence_body(token, not_after_ms),
            headers={"Content-Type": "application/json"},
        )
        return _wire.parse_state(_json(resp), resp.content)

    async def trim(self, stream: str, token: int, trim_seq: int, *, not_after_ms: Optional[int] = None) -> StreamState:
        """Makes the records below ``trim_seq`` unreadable (``first_seq``
        becomes ``min(trim_seq, next_seq)`` and never moves back). Fenced
        like an append (:class:`StaleFencingToken`, :class:`StreamSealed`);
        ``not_after_ms`` is a deadline. Never retried."""
        resp = await self._send_once(
            "POST",
            _wire.stream_path(stream, "/trim"),
            what=f"trim {stream}",
            headers={"Content-Type": "application/json"},
            content=_common.trim_body(token, trim_seq, not_after_ms),
        )
        return _wire.parse_state(_json(resp), resp.content)

    async def seal(self, stream: str, token: int, *, not_after_ms: Optional[int] = None) -> StreamState:
        """Seals the stream: every later append, fence and trim is
        :class:`StreamSealed`. Sealing again with the highest token is
        idempotent; ``not_after_ms`` is a deadline. Never retried."""
        resp = await self._send_once(
            "POST",
            _wire.stream_path(stream, "/seal"),
            what=f"seal {stream}",
            headers={"Content-Type": "application/json"},
            content=_common.fence_body(token, not_after_ms),
        )
        return _wire.parse_state(_json(resp), resp.content)

    async def batch(
        self, ops: Iterable[Union[BatchAppend, BatchFence]], *, not_after_ms: Optional[int] = None
    ) -> List[Union[AppendAck, StreamState]]:
        """See :meth:`fencelog.Client.batch`. Never retried."""
        resp = await self._send_once(
            "POST",
            "/v1/batch",
            what="batch",
            headers={"Content-Type": "application/json"},
            content=_wire.batch_body(ops, not_after_ms),
        )
        return _wire.parse_batch(_json(resp), resp.content)

    async def commit_cursor(self, stream: str, name: str, token: int, seq: int) -> CursorInfo:
        """See :meth:`fencelog.Client.commit_cursor`. Never retried."""
        path = _wire.stream_path(stream, "/cursors/" + _common.name_segment(name, "cursor name"))
        resp = await self._send_once(
            "PUT",
            path,
            what=f"commit cursor {name} of {stream}",
            headers={"Content-Type": "application/json"},
            content=_common.cursor_body(token, seq),
        )
        return _wire.parse_cursor(_json(resp), resp.content)

    async def producer(self, stream: str, producer_id: str) -> Optional[ProducerInfo]:
        """See :meth:`fencelog.Client.producer`."""
        path = _wire.stream_path(stream, "/producers/" + _common.name_segment(producer_id, "producer id"))
        resp = await self._request("GET", path, what=f"producer {producer_id} of {stream}")
        try:
            return _wire.parse_producer(_json(resp), resp.content)
        except ProducerNotFound:
            return None

    async def fences(self, stream: str, *, limit: Optional[int] = None) -> FenceList:
        """See :meth:`fencelog.Client.fences`."""
        resp = await self._request(
            "GET", _wire.stream_path(stream, "/fences"), what=f"fences of {stream}", params=_common.fences_params(limit)
        )
        return _wire.parse_fences(_json(resp), resp.content)

    async def cursor(self, stream: str, name: str) -> CursorInfo:
        """See :meth:`fencelog.Client.cursor`."""
        path = _wire.stream_path(stream, "/cursors/" + _common.name_segment(name, "cursor name"))
        resp = await self._request("GET", path, what=f"cursor {name} of {stream}")
        return _wire.parse_cursor(_json(resp), resp.content)

    async def cursors(self, stream: str) -> Tuple[CursorInfo, ...]:
        """See :meth:`fencelog.Client.cursors`."""
        resp = await self._request("GET", _wire.stream_path(stream, "/cursors"), what=f"cursors of {stream}")
        return _wire.parse_cursor_list(_json(resp), resp.content)

    async def read(
        self,
        stream: str,
        start_seq: int = 0,
        *,
        count: Optional[int] = None,
        max_bytes: Optional[int] = None,
        wait_ms: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> ReadPage:
        """See :meth:`fencelog.Client.read`."""
        params = _common.read_params(start_seq, count, max_bytes, wait_ms, cursor)
        resp = await self._request(
            "GET",
            _wire.stream_path(stream, "/records"),
            what=f"read {stream}",
            params=params,
            timeout=_common.timeout(self._timeout + (wait_ms or 0) / 1000.0),
        )
        return _wire.parse_page(0 if cursor is not None else start_seq, _json(resp), resp.content)

    async def iter_records(
        self,
        stream: str,
        start_seq: int = 0,
        *,
        count: Optional[int] = None,
        max_bytes: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> AsyncIterator[Record]:
        """See :meth:`fencelog.Client.iter_records`."""
        page = await self.read(stream, start_seq, count=count, max_bytes=max_bytes, cursor=cursor)
        at: Optional[int] = start_seq if cursor is None else None
        while True:
            for r in page.records:
                yield r
            if _wire.page_is_last(page):
                return
            if at is not None and page.next_start_seq <= at:
                raise ProtocolError(f"read of {stream} from {at} made no progress")
            at = page.next_start_seq
            page = await self.read(stream, at, count=count, max_bytes=max_bytes)

    async def state(self, stream: str) -> StreamState:
        resp = await self._request("GET", _wire.stream_path(stream), what=f"state of {stream}")
        return _wire.parse_state(_json(resp), resp.content)

    async def list_page(
        self, prefix: str = "", *, start_after: Optional[str] = None, limit: Optional[int] = None
    ) -> StreamPage:
        resp = await self._request(
            "GET", "/v1/streams", what="list streams", params=_common.list_params(prefix, start_after, limit)
        )
        return _wire.parse_stream_page(_json(resp), resp.content)

    async def list_streams(self, prefix: str = "", *, limit: Optional[int] = None) -> AsyncIterator[StreamState]:
        after: Optional[str] = None
        while True:
            page = await self.list_page(prefix, start_after=after, limit=limit)
            for s in page.streams:
                yield s
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
    ) -> "AsyncTail":
        """See :meth:`fencelog.Client.tail`; ``async for record in ...``."""
        return AsyncTail(
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
    ) -> "AsyncTail":
        return AsyncTail(
            self, stream, start_seq, events=True, idle_timeout=idle_timeout, retry_for=retry_for, cursor=cursor
        )

    async def _send_once(self, method: str, path: str, *, what: str, **kw: Any) -> httpx.Response:
        """See :meth:`fencelog.Client._send_once`."""
        try:
            return await self._http.request(method, path, **kw)
        except httpx.TransportError as e:
            if _common.never_sent(e):
                raise ConnectionFailed(f"{what}: {e!r}") from e
            raise OutcomeUnknown(f"{what}: sent, but no answer: {e!r}") from e

    async def _request(self, method: str, path: str, *, what: str, write: bool = False, **kw: Any) -> httpx.Response:
        maybe_sent = False
        for attempt in range(_common.IDEMPOTENT_RETRIES + 1):
            try:
                return await self._http.request(method, path, **kw)
            except httpx.TransportError as e:
                maybe_sent = maybe_sent or not _common.never_sent(e)
                if attempt == _common.IDEMPOTENT_RETRIES:
                    if write and maybe_sent:
                        raise OutcomeUnknown(f"{what}: no answer: {e!r}") from e
                    if not maybe_sent:
                        raise ConnectionFailed(f"{what}: {e!r}") from e
                    raise TransportError(f"{what}: {e!r}") from e
                await asyncio.sleep(_common.RETRY_BACKOFF_S * (attempt + 1))
        raise AssertionError("unreachable")


def _json(resp: httpx.Response) -> Any:
    if resp.status_code >= 400:
        raise error_from_body(resp.status_code, resp.content)
    return _wire.decode_json(resp.status_code, resp.content)


class AsyncTail:
    """An async iterator over a live tail; see :class:`fencelog.Tail`."""

    def __init__(
        self,
        client: AsyncClient,
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
        self._chunks: Optional[AsyncIterator[bytes]] = None
        self._pending: Deque[Union[Record, CaughtUp]] = deque()
        self._closed = False
        self._backoff = _common.TAIL_BACKOFF_MIN_S
        self._connected_once = False
        self.reconnects = 0

    @property
    def position(self) -> Optional[int]:
        return self._state.position

    def __aiter__(self) -> "AsyncTail":
        return self

    async def __anext__(self) -> Union[Record, CaughtUp]:
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            if self._chunks is None:
                await self._connect()
                continue
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                await self._disconnect()
                continue
            except httpx.TransportError:
                await self._disconnect()
                continue
            try:
                self._pending.extend(self._state.feed(chunk))
            except FencelogError:
                await self.aclose()
                raise
            self._backoff = _common.TAIL_BACKOFF_MIN_S
        return self._pending.popleft()

    async def _connect(self) -> None:
        http = self._client._http
        state = self._state
        give_up = None if self._retry_for is None else time.monotonic() + self._retry_for
        while True:
            if self._connected_once:
                await asyncio.sleep(self._backoff)
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
                resp = await http.send(req, stream=True)
            except httpx.TransportError as e:
                failure = e
            else:
                if resp.status_code == 200:
                    self._response = resp
                    self._chunks = resp.aiter_bytes()
                    state.new_connection()
                    return
                await resp.aread()
                await resp.aclose()
                err = error_from_body(resp.status_code, resp.content)
                if not _wire.TailState.retryable(err):
                    await self.aclose()
                    raise err
                failure = err
            if give_up is not None and time.monotonic() >= give_up:
                await self.aclose()
                raise TransportError(
                    f"tail of {state.stream}: no connection for {self._retry_for} s: {failure!r}"
                ) from failure

    async def _disconnect(self) -> None:
        if self._response is not None:
            await self._response.aclose()
        self._response = None
        self._chunks = None

    async def aclose(self) -> None:
        self._closed = True
        self._pending.clear()
        await self._disconnect()

    async def __aenter__(self) -> "AsyncTail":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
