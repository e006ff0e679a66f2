"""The wire format without any I/O: request bodies, response decoding, the
SSE parser, and the cursors of paging and tailing. The sync and asyncio
clients share all of it and differ only in how bytes move."""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union
from urllib.parse import quote

from .errors import (
    FencelogError,
    InsufficientStorage,
    ProtocolError,
    Unavailable,
    error_from_body,
)
from .types import (
    AppendAck,
    BatchAppend,
    BatchFence,
    CaughtUp,
    CursorInfo,
    FenceEntry,
    FenceList,
    ProducerInfo,
    ReadPage,
    Record,
    RecordIn,
    StreamPage,
    StreamState,
)

RecordInput = Union[str, bytes, bytearray, memoryview, RecordIn]
Records = Union[RecordInput, Iterable[RecordInput]]

BATCH_CONTENT_TYPE = "application/vnd.fencelog.batch"
BATCH_V2_CONTENT_TYPE = "application/vnd.fencelog.batch; version=2"
_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFFFFFF
_U64_MAX = (1 << 64) - 1


def check_token(token: int) -> str:
    """The token as the decimal text a header carries. Range checks (0,
    above 2^64-1) are the server's: it answers them with BadRequest."""
    if not isinstance(token, int) or isinstance(token, bool):
        raise TypeError(f"a fencing token is an int, got {type(token).__name__}")
    return str(token)


def check_seq(name: str, seq: Optional[int]) -> Optional[str]:
    if seq is None:
        return None
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise TypeError(f"{name} is an int, got {type(seq).__name__}")
    return str(seq)


def _as_bytes(v: Any, what: str) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"a {what} is str or bytes, got {type(v).__name__}")


def record_parts(records: Records) -> List[Tuple[bytes, Tuple[Tuple[bytes, bytes], ...]]]:
    """Records as (body, headers) bytes: text is UTF-8, bytes-like objects
    are copied as is, a :class:`RecordIn` brings its headers. A single str,
    bytes or RecordIn is one record, not a sequence of characters."""
    if isinstance(records, (str, bytes, bytearray, memoryview, RecordIn)):
        records = [records]
    out: List[Tuple[bytes, Tuple[Tuple[bytes, bytes], ...]]] = []
    for r in records:
        if isinstance(r, RecordIn):
            headers = tuple(
                (_as_bytes(n, "header name"), _as_bytes(v, "header value")) for n, v in r.headers
            )
            out.append((_as_bytes(r.body, "record"), headers))
        else:
            out.append((_as_bytes(r, "record"), ()))
    return out


def encode_batch(records: List[bytes]) -> bytes:
    """The binary batch body: each record as a u32 little-endian length
    followed by its bytes."""
    parts = []
    for r in records:
        if len(r) > _U32_MAX:
            raise ValueError("a record over 4 GiB cannot be framed")
        parts.append(struct.pack("<I", len(r)))
        parts.append(r)
    return b"".join(parts)


def encode_batch_v2(records: List[Tuple[bytes, Tuple[Tuple[bytes, bytes], ...]]]) -> bytes:
    """The binary batch body version 2, records with headers: per record a
    u16 header count, per header u16 name length, name, u32 value length,
    value, then u32 body length, body (little-endian). The server checks
    the header limits."""
    parts = []
    for body, headers in records:
        if len(headers) > _U16_MAX:
            raise ValueError("over 65535 headers on a record cannot be framed")
        parts.append(struct.pack("<H", len(headers)))
        for name, value in headers:
            if len(name) > _U16_MAX or len(value) > _U32_MAX:
                raise ValueError("a header name over 64 KiB or value over 4 GiB cannot be framed")
            parts.append(struct.pack("<H", len(name)))
            parts.append(name)
            parts.append(struct.pack("<I", len(value)))
            parts.append(value)
        if len(body) > _U32_MAX:
            raise ValueError("a record over 4 GiB cannot be framed")
        parts.append(struct.pack("<I", len(body)))
        parts.append(body)
    return b"".join(parts)


def stream_path(stream: str, tail: str = "") -> str:
    """``/v1/streams/{stream}{tail}`` with the name escaped. Valid names are
    URL-safe already; escaping anything else makes an invalid name reach the
    server's validation intact (and get its BadRequest) instead of changing
    the path. "." and ".." are escaped so no URL library treats them as
    path segments to resolve."""
    if not isinstance(stream, str):
        raise TypeError(f"a stream name is a str, got {type(stream).__name__}")
    if stream == "":
        raise ValueError("a stream name cannot be empty")
    name = quote(stream, safe=":")
    if name in (".", ".."):
        name = name.replace(".", "%2E")
    return f"/v1/streams/{name}{tail}"


def decode_json(status: int, raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise ProtocolError(f"answer {status} is not JSON: {raw[:200]!r}", status=status, raw=raw) from None


def _field(obj: Dict[str, Any], key: str, kind: type, raw: bytes) -> Any:
    v = obj.get(key)
    if not isinstance(v, kind) or isinstance(v, bool):
        raise ProtocolError(f"field {key!r} missing or not {kind.__name__} in {raw[:200]!r}", raw=raw)
    return v


def parse_ack(obj: Any, raw: bytes) -> AppendAck:
    if not isinstance(obj, dict):
        raise ProtocolError(f"append answer is not an object: {raw[:200]!r}", raw=raw)
    return AppendAck(
        stream=_field(obj, "stream", str, raw),
        first_seq=_field(obj, "first_seq", int, raw),
        last_seq=_field(obj, "last_seq", int, raw),
        next_seq=_field(obj, "next_seq", int, raw),
        fencing_token=_field(obj, "fencing_token", int, raw),
        timestamp_ms=_field(obj, "timestamp_ms", int, raw),
        duplicate=_flag(obj, "duplicate", raw),
    )


def _flag(obj: Dict[str, Any], key: str, raw: bytes) -> bool:
    """An optional boolean field, false when absent."""
    v = obj.get(key, False)
    if not isinstance(v, bool):
        raise ProtocolError(f"field {key!r} is not a boolean in {raw[:200]!r}", raw=raw)
    return v


def _object(obj: Any, what: str, raw: bytes) -> Dict[str, Any]:
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} is not an object: {raw[:200]!r}", raw=raw)
    return obj


def _list(obj: Dict[str, Any], key: str, what: str, raw: bytes) -> List[Any]:
    v = obj.get(key)
    if not isinstance(v, list):
        raise ProtocolError(f"{what} has no {key!r} list: {raw[:200]!r}", raw=raw)
    return v


def parse_producer(obj: Any, raw: bytes) -> ProducerInfo:
    obj = _object(obj, "the producer lookup", raw)
    return ProducerInfo(
        producer_id=_field(obj, "producer_id", str, raw),
        producer_seq=_field(obj, "producer_seq", int, raw),
        first_seq=_field(obj, "first_seq", int, raw),
        last_seq=_field(obj, "last_seq", int, raw),
        fencing_token=_field(obj, "fencing_token", int, raw),
        timestamp_ms=_field(obj, "timestamp_ms", int, raw),
    )


def parse_fences(obj: Any, raw: bytes) -> FenceList:
    obj = _object(obj, "the fence history", raw)
    fences = []
    for f in _list(obj, "fences", "the fence history", raw):
        f = _object(f, "a fence", raw)
        fences.append(
            FenceEntry(
                fencing_token=_field(f, "fencing_token", int, raw),
                first_seq=_field(f, "first_seq", int, raw),
                timestamp_ms=_field(f, "timestamp_ms", int, raw),
                by=_field(f, "by", str, raw),
            )
        )
    return FenceList(stream=_field(obj, "stream", str, raw), fences=tuple(fences))


def parse_cursor(obj: Any, raw: bytes) -> CursorInfo:
    obj = _object(obj, "a cursor", raw)
    return CursorInfo(
        stream=_field(obj, "stream", str, raw),
        name=_field(obj, "name", str, raw),
        fencing_token=_field(obj, "fencing_token", int, raw),
        seq=_field(obj, "seq", int, raw),
        timestamp_ms=_field(obj, "timestamp_ms", int, raw),
    )


def parse_cursor_list(obj: Any, raw: bytes) -> Tuple[CursorInfo, ...]:
    obj = _object(obj, "the cursor list", raw)
    return tuple(parse_cursor(c, raw) for c in _list(obj, "cursors", "the cursor list", raw))


def _json_record(r: Any) -> Dict[str, str]:
    """A record of a JSON body: ``body`` when its bytes are UTF-8 (as the
    server's rule is), else ``body_base64``."""
    data = _as_bytes(r, "record")
    try:
        return {"body": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(data).decode("ascii")}


def batch_body(ops: Iterable[Union[BatchAppend, BatchFence]], not_after_ms: Optional[int]) -> bytes:
    """The body of ``POST /v1/batch``."""
    out: List[Dict[str, Any]] = []
    for op in ops:
        item: Dict[str, Any] = {"stream": op.stream, "fencing_token": int(check_token(op.fencing_token))}
        if isinstance(op, BatchAppend):
            records = [op.records] if isinstance(op.records, (str, bytes)) else op.records
            item["records"] = [_json_record(r) for r in records]
            if check_seq("match_seq_num", op.match_seq_num) is not None:
                item["match_seq_num"] = op.match_seq_num
        elif isinstance(op, BatchFence):
            item["fence"] = True
        else:
            raise TypeError(f"a batch op is BatchAppend or BatchFence, got {type(op).__name__}")
        out.append(item)
    body: Dict[str, Any] = {"ops": out}
    if check_seq("not_after_ms", not_after_ms) is not None:
        body["not_after_ms"] = not_after_ms
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def parse_batch_outcome(status: int, obj: Any, raw: bytes) -> Union[AppendAck, StreamState, FencelogError]:
    """One op's outcome in a batch answer: an append's ack (it has
    ``last_seq``), a fence's stream state, or an error body."""
    obj = _object(obj, "a batch op's outcome", raw)
    if "error" in obj:
        return error_from_body(status, json.dumps(obj).encode("utf-8"))
    if "last_seq" in obj:
        return parse_ack(obj, raw)
    return parse_state(obj, raw)


def parse_batch(obj: Any, raw: bytes) -> List[Union[AppendAck, StreamState]]:
    obj = _object(obj, "the batch answer", raw)
    out: List[Union[AppendAck, StreamState]] = []
    for op in _list(obj, "ops", "the batch answer", raw):
        outcome = parse_batch_outcome(200, op, raw)
        if isinstance(outcome, FencelogError):
            raise ProtocolError(f"a 200 batch answer holds an error: {raw[:200]!r}", raw=raw)
        out.append(outcome)
    return out


def parse_state(obj: Any, raw: bytes) -> StreamState:
    if not isinstance(obj, dict):
        raise ProtocolError(f"stream state is not an object: {raw[:200]!r}", raw=raw)
    return StreamState(
        stream=_field(obj, "stream", str, raw),
        first_seq=_field(obj, "first_seq", int, raw),
        next_seq=_field(obj, "next_seq", int, raw),
        highest_token=_field(obj, "highest_token", int, raw),
        last_timestamp_ms=_field(obj, "last_timestamp_ms", int, raw),
        sealed=_flag(obj, "sealed", raw),
    )


def parse_stream_page(obj: Any, raw: bytes) -> StreamPage:
    if not isinstance(obj, dict) or not isinstance(obj.get("streams"), list):
        raise ProtocolError(f"stream list is not {{'streams': [...]}}: {raw[:200]!r}", raw=raw)
    after = obj.get("next_start_after")
    if after is not None and not isinstance(after, str):
        raise ProtocolError(f"next_start_after is not a string: {raw[:200]!r}", raw=raw)
    return StreamPage(tuple(parse_state(s, raw) for s in obj["streams"]), after)


def _b64(text: Any, what: str, raw: bytes) -> bytes:
    if not isinstance(text, str):
        raise ProtocolError(f"{what} is not a string", raw=raw)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError(f"{what} is not valid base64", raw=raw) from None


def _headers(obj: Dict[str, Any], raw: bytes) -> Tuple[Tuple[bytes, bytes], ...]:
    """Record headers as reads and tails return them. The pair form
    ``[name, value]`` holds text; binary names or values come base64 in
    ``headers_base64`` pairs, or as ``{"name"|"name_base64",
    "value"|"value_base64"}`` objects. All forms are accepted until the
    server's format is settled; none is required."""
    out: List[Tuple[bytes, bytes]] = []
    for key, decode in (("headers", False), ("headers_base64", True)):
        items = obj.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise ProtocolError(f"record {key} is not a list", raw=raw)
        for h in items:
            if isinstance(h, list) and len(h) == 2:
                if decode:
                    out.append((_b64(h[0], "header name", raw), _b64(h[1], "header value", raw)))
                elif isinstance(h[0], str) and isinstance(h[1], str):
                    out.append((h[0].encode("utf-8"), h[1].encode("utf-8")))
                else:
                    raise ProtocolError("a header pair is not two strings", raw=raw)
            elif isinstance(h, dict):
                pair = []
                for part in ("name", "value"):
                    if isinstance(h.get(part), str):
                        pair.append(h[part].encode("utf-8"))
                    elif f"{part}_base64" in h:
                        pair.append(_b64(h[f"{part}_base64"], f"header {part}", raw))
                    else:
                        raise ProtocolError(f"a header has no {part}", raw=raw)
                out.append((pair[0], pair[1]))
            else:
                raise ProtocolError("a header is neither a pair nor an object", raw=raw)
    return tuple(out)


def parse_record(obj: Any, raw: bytes) -> Record:
    if not isinstance(obj, dict):
        raise ProtocolError("a record is not an object", raw=raw)
    seq = _field(obj, "seq", int, raw)
    if "body" in obj and "body_base64" not in obj:
        text = obj["body"]
        if not isinstance(text, str):
            raise ProtocolError(f"record {seq} body is not a string", raw=raw)
        body = text.encode("utf-8")
    elif "body_base64" in obj and "body" not in obj:
        body = _b64(obj["body_base64"], f"record {seq} body_base64", raw)
    else:
        raise ProtocolError(f"record {seq} has not exactly one of body, body_base64", raw=raw)
    return Record(
        seq=seq,
        fencing_token=_field(obj, "fencing_token", int, raw),
        timestamp_ms=_field(obj, "timestamp_ms", int, raw),
        body=body,
        headers=_headers(obj, raw),
    )


def parse_page(start_seq: int, obj: Any, raw: bytes) -> ReadPage:
    if not isinstance(obj, dict) or not isinstance(obj.get("records"), list):
        raise ProtocolError(f"read answer is not {{'records': [...]}}: {raw[:200]!r}", raw=raw)
    records = tuple(parse_record(r, raw) for r in obj["records"])
    expected = start_seq
    for r in records:
        # Within a page seqs only go up; a server that answers otherwise
        # would make every cursor below wrong.
        if r.seq < expected:
            raise ProtocolError(f"read from {start_seq} returned seq {r.seq} out of order", raw=raw)
        expected = r.seq + 1
    next_seq = _field(obj, "next_seq", int, raw)
    if "next_start_seq" in obj:
        cont = _field(obj, "next_start_seq", int, raw)
        if cont < expected:
            raise ProtocolError(
                f"next_start_seq {cont} would re-read records (last returned {expected - 1})", raw=raw
            )
    else:
        # Never next_seq: that is the tail, and paging from it skips
        # everything between this page's end and the tail.
        cont = expected
    return ReadPage(records=records, next_seq=next_seq, next_start_seq=cont)


def page_is_last(page: ReadPage) -> bool:
    """Whether a page iterator has reached the tail as of this page."""
    return not page.records or page.next_start_seq >= page.next_seq


# --- Server-sent events -----------------------------------------------------


_EOL = re.compile(rb"\r\n|\r|\n")


class SseEvent:
    __slots__ = ("event", "data", "id")

    def __init__(self, event: str, data: str, id: Optional[str]) -> None:
        self.event = event
        self.data = data
        self.id = id

    def __repr__(self) -> str:
        return f"SseEvent({self.event!r}, {self.data!r}, id={self.id!r})"


class SseParser:
    """Incremental ``text/event-stream`` parser: bytes in, complete events
    out. Lines end in LF, CRLF or CR (even split across chunks); lines are
    decoded only once whole, so a UTF-8 sequence split across chunks is
    fine."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._skip_lf = False
        self._event = ""
        self._data: List[str] = []
        self._has_data = False
        self._id: Optional[str] = None

    def feed(self, chunk: bytes) -> List[SseEvent]:
        out: List[SseEvent] = []
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = False
        self._buf += chunk
        buf = self._buf
        start = 0
        for m in _EOL.finditer(buf):
            ev = self._line(bytes(buf[start : m.start()]).decode("utf-8", "replace"))
            if ev is not None:
                out.append(ev)
            start = m.end()
            # A CR that ends the buffer may be the first half of a CRLF.
            self._skip_lf = m.group() == b"\r" and start == len(buf)
        del buf[:start]
        return out

    def _line(self, line: str) -> Optional[SseEvent]:
        if line == "":
            if not self._has_data:
                self._event = ""
                return None
            ev = SseEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._has_data = "", [], False
            return ev
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


# --- Tail state -------------------------------------------------------------

TailItem = Union[Record, CaughtUp]


class TailState:
    """The cursor of a live tail: which seq comes next, what to ask for on
    (re)connect, and what each event means. Shared by the sync and async
    tails, which only move bytes and sleep."""

    def __init__(self, stream: str, start_seq: int, events: bool, cursor: Optional[str] = None) -> None:
        self.stream = stream
        #: The next seq to deliver; where a reconnect resumes. None for a
        #: tail that starts at a named cursor until the server has said
        #: where that is (its first record, or its first caught_up).
        self.position: Optional[int] = None if cursor is not None else start_seq
        self.cursor = cursor
        self.events = events
        self.delivered_any = False
        self.parser = SseParser()

    def request_headers(self) -> Dict[str, str]:
        # Last-Event-ID is how SSE resumes; start_seq in the query says the
        # same for servers or proxies that drop the header.
        if self.position is None:
            return {"Accept": "text/event-stream"}
        return {"Accept": "text/event-stream", "Last-Event-ID": str(self.position)}

    def request_params(self) -> Dict[str, str]:
        # The cursor is read again on each connection until a position is
        # known; from then on the tail resumes where it is, wherever the
        # cursor has moved since.
        if self.position is None:
            return {"cursor": str(self.cursor)}
        return {"start_seq": str(self.position)}

    def new_connection(self) -> None:
        self.parser = SseParser()

    def feed(self, chunk: bytes) -> List[TailItem]:
        out: List[TailItem] = []
        for ev in self.parser.feed(chunk):
            if ev.event == "records":
                out.extend(self._records(ev))
            elif ev.event == "caught_up":
                seq = self._caught_up_seq(ev)
                if self.position is None and seq is not None:
                    self.position = seq
                if self.events:
                    out.append(CaughtUp(seq if seq is not None else self.position or 0))
            elif ev.event == "error":
                raise error_from_body(200, ev.data.encode("utf-8"))
            # ping and events added later: liveness only.
        return out

    def _records(self, ev: SseEvent) -> List[Record]:
        raw = ev.data.encode("utf-8")
        items = decode_json(200, raw)
        if not isinstance(items, list):
            raise ProtocolError("a records event is not a list", raw=raw)
        out = []
        for item in items:
            rec = parse_record(item, raw)
            if self.position is None:
                self.position = rec.seq
            if rec.seq < self.position:
                # A resumed connection may repeat what was delivered.
                continue
            if rec.seq != self.position and self.delivered_any:
                raise ProtocolError(
                    f"tail of {self.stream} skipped from seq {self.position} to {rec.seq}", raw=raw
                )
            self.position = rec.seq + 1
            self.delivered_any = True
            out.append(rec)
        return out

    def _caught_up_seq(self, ev: SseEvent) -> Optional[int]:
        try:
            obj = json.loads(ev.data)
            if isinstance(obj, dict) and isinstance(obj.get("next_seq"), int):
                return int(obj["next_seq"])
        except ValueError:
            pass
        return self.position

    @staticmethod
    def retryable(err: FencelogError) -> bool:
        """Answers worth reconnecting after: 503 and 507 say the server is
        alive but refusing for now (shutting down, or waiting for an
        operator), so a later connection may succeed. Everything else (no
        such stream, past the tail, corrupt data) reconnecting cannot fix."""
        return isinstance(err, (Unavailable, InsufficientStorage))

