"""What the API answers, as plain immutable values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple


@dataclass(frozen=True)
class Record:
    """One durable record. ``body`` is always the exact bytes appended;
    ``text`` decodes it as UTF-8 for records that are text."""

    seq: int
    fencing_token: int
    timestamp_ms: int
    body: bytes
    #: (name, value) pairs in the order appended; empty for a record
    #: without headers. Bytes, because header values need not be text.
    headers: Tuple[Tuple[bytes, bytes], ...] = field(default=())

    @property
    def text(self) -> str:
        """The body as text; raises UnicodeDecodeError for binary bodies."""
        return self.body.decode("utf-8")


@dataclass(frozen=True)
class RecordIn:
    """A record to append with headers: ``body`` (str is UTF-8) and
    (name, value) pairs, str or bytes, kept in order (names may repeat).
    At most 64 headers and 8 KiB of names and values per record, names
    1-255 bytes; the server refuses more (TooLarge, BadRequest)."""

    body: "str | bytes"
    headers: Tuple[Tuple["str | bytes", "str | bytes"], ...] = field(default=())


@dataclass(frozen=True)
class AppendAck:
    """A durable, fenced append: records ``first_seq..=last_seq``."""

    stream: str
    first_seq: int
    last_seq: int
    next_seq: int
    fencing_token: int
    timestamp_ms: int
    #: True when this answers an idempotent producer's retry of its last
    #: applied append: this is that append's original ack, and nothing was
    #: written this time.
    duplicate: bool = False


@dataclass(frozen=True)
class StreamState:
    stream: str
    first_seq: int
    next_seq: int
    highest_token: int
    last_timestamp_ms: int
    #: True once the stream is sealed: no append, fence or trim any more.
    sealed: bool = False


@dataclass(frozen=True)
class ReadPage:
    """One page of a read.

    Continue with ``next_start_seq``. ``next_seq`` is the stream's *tail*
    when the page was read — starting the next page there would skip every
    record between this page's end and the tail.
    """

    records: Tuple[Record, ...]
    #: The stream's tail at read time (not where the next page starts).
    next_seq: int
    #: Where the next page starts: the server's ``next_start_seq`` when it
    #: sends one, else the seq after the last record, else this page's start.
    next_start_seq: int


@dataclass(frozen=True)
class CaughtUp:
    """A tail event: every durable record before ``next_seq`` has been
    delivered."""

    next_seq: int


@dataclass(frozen=True)
class StreamPage:
    streams: Tuple[StreamState, ...]
    #: Pass as ``start_after`` for the next page; None on the last page.
    next_start_after: Optional[str]


@dataclass(frozen=True)
class ProducerInfo:
    """"Did my write land?": an idempotent producer's last applied append
    on a stream (records ``first_seq..=last_seq``)."""

    producer_id: str
    producer_seq: int
    first_seq: int
    last_seq: int
    fencing_token: int
    timestamp_ms: int


@dataclass(frozen=True)
class FenceEntry:
    """A token that took effect on a stream: ``first_seq`` is the stream's
    ``next_seq`` then, ``by`` what carried it (``append``, ``fence``,
    ``trim``, ``seal``, ``delete`` or ``config``)."""

    fencing_token: int
    first_seq: int
    timestamp_ms: int
    by: str


@dataclass(frozen=True)
class FenceList:
    """A stream's fence history, newest first."""

    stream: str
    fences: Tuple[FenceEntry, ...]


@dataclass(frozen=True)
class CursorInfo:
    """A named, fenced consumer position: ``seq`` is the next seq to
    consume; ``fencing_token`` the cursor's own highest token."""

    stream: str
    name: str
    fencing_token: int
    seq: int
    timestamp_ms: int


@dataclass(frozen=True)
class BatchAppend:
    """An append op of :meth:`Client.batch`: ``records`` (str or bytes,
    no headers) to ``stream`` with ``fencing_token``, only if the stream's
    ``next_seq`` is ``match_seq_num`` when given."""

    stream: str
    fencing_token: int
    records: Tuple["str | bytes", ...]
    match_seq_num: Optional[int] = None


@dataclass(frozen=True)
class BatchFence:
    """A fence op of :meth:`Client.batch`."""

    stream: str
    fencing_token: int
