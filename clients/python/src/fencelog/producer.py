"""Idempotent producers: :class:`Producer` (sync) and :class:`AsyncProducer`.

A producer with an id numbers its appends itself (``producer_seq``) and,
when an append's outcome is unknown — the connection failed, or the server
answered that storage failed and the request may or may not be durable —
sends it again with the *same* seq. The server applies a producer seq at
most once and answers a retry of the last applied one with its original
ack (``duplicate=True``), so for these appends "outcome unknown" becomes
an ack or a refusal that says nothing was applied. Without an id a
producer sends plain appends and never retries them, as
:meth:`Client.append` does.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Optional

from . import _common, _wire
from .errors import FencelogError, NotFound
from .types import AppendAck

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client


class _Numbering:
    """What both producers share: the client, stream, token, id, the next
    seq and the deadline."""

    def __init__(
        self,
        client: Any,
        stream: str,
        fencing_token: int,
        producer_id: Optional[str] = None,
        *,
        next_producer_seq: int = 0,
        not_after_ms: Optional[int] = None,
    ) -> None:
        _wire.check_token(fencing_token)
        if producer_id is None and next_producer_seq != 0:
            raise ValueError("next_producer_seq needs a producer_id")
        self.client = client
        self.stream = stream
        self.fencing_token = fencing_token
        self.producer_id = producer_id
        self._next_seq = next_producer_seq
        #: Appends from now on carry this deadline (Unix ms): the server
        #: accepts them only if its timestamp for them is at most this. A
        #: worker sets its lease's expiry minus its clock-skew margin.
        self.not_after_ms = not_after_ms

    @property
    def next_producer_seq(self) -> int:
        """The seq the next append will carry (0 and unused without an id)."""
        return self._next_seq

    def _attempts(self) -> int:
        return 1 + (_common.PRODUCER_RETRIES if self.producer_id is not None else 0)

    def _args(self) -> dict:
        seq = self._next_seq if self.producer_id is not None else None
        return {"producer_id": self.producer_id, "producer_seq": seq, "not_after_ms": self.not_after_ms}

    def _applied(self, ack: AppendAck) -> AppendAck:
        if self.producer_id is not None:
            self._next_seq += 1
        return ack


def _seq_after(last: Optional[object]) -> int:
    return 0 if last is None else getattr(last, "producer_seq") + 1


class Producer(_Numbering):
    """An idempotent producer on one stream with one fencing token (see the
    module's comment). ``append`` returns the ack, or raises an error that
    says the append was not applied (:class:`StaleFencingToken`,
    :class:`DeadlineExceeded`, ...) — or, after
    ``PRODUCER_RETRIES`` (5) retries, the last unknown outcome.

    >>> p = fencelog.Producer.start(log, "orders", "worker-a", 41)  # doctest: +SKIP
    >>> p.append("order #1").duplicate                              # doctest: +SKIP
    False
    """

    client: "Client"

    @classmethod
    def start(
        cls,
        client: "Client",
        stream: str,
        producer_id: str,
        fencing_token: int,
        *,
        not_after_ms: Optional[int] = None,
    ) -> "Producer":
        """A producer that continues where ``producer_id`` left off on
        ``stream`` (its last applied seq + 1, asked of the server), or
        starts at 0 (also for a stream that does not exist yet)."""
        try:
            last = client.producer(stream, producer_id)
        except NotFound:
            last = None
        return cls(
            client, stream, fencing_token, producer_id, next_producer_seq=_seq_after(last), not_after_ms=not_after_ms
        )

    def append(self, records: _wire.Records) -> AppendAck:
        """Appends ``records`` with the next producer seq, retrying unknown
        outcomes with the same seq (only with a producer id)."""
        attempts = self._attempts()
        for attempt in range(1, attempts + 1):
            try:
                ack = self.client.append(self.stream, self.fencing_token, records, **self._args())
            except FencelogError as e:
                if attempt == attempts or not _common.producer_should_retry(e):
                    raise
                time.sleep(_common.PRODUCER_BACKOFF_S * attempt)
                continue
            return self._applied(ack)
        raise AssertionError("unreachable")


class AsyncProducer(_Numbering):
    """:class:`Producer` for :class:`AsyncClient`; ``await p.append(...)``."""

    client: "AsyncClient"

    @classmethod
    async def start(
        cls,
        client: "AsyncClient",
        stream: str,
        producer_id: str,
        fencing_token: int,
        *,
        not_after_ms: Optional[int] = None,
    ) -> "AsyncProducer":
        """See :meth:`Producer.start`."""
        try:
            last = await client.producer(stream, producer_id)
        except NotFound:
            last = None
        return cls(
            client, stream, fencing_token, producer_id, next_producer_seq=_seq_after(last), not_after_ms=not_after_ms
        )

    async def append(self, records: _wire.Records) -> AppendAck:
        """See :meth:`Producer.append`."""
        attempts = self._attempts()
        for attempt in range(1, attempts + 1):
            try:
                ack = await self.client.append(self.stream, self.fencing_token, records, **self._args())
            except FencelogError as e:
                if attempt == attempts or not _common.producer_should_retry(e):
                    raise
                await asyncio.sleep(_common.PRODUCER_BACKOFF_S * attempt)
                continue
            return self._applied(ack)
        raise AssertionError("unreachable")
