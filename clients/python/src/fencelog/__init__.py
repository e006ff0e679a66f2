"""Python client for fencelog, a fenced append-only log.

Every append carries a fencing token; the server refuses any token below
the highest it has accepted on the stream, and this client turns that
refusal into :class:`StaleFencingToken` — "a newer owner took over: stop".

>>> import fencelog                                        # doctest: +SKIP
>>> with fencelog.Client("http://127.0.0.1:7070") as log:
...     log.append("invoices", 41, "A: invoice 1001 drafted")
...     for record in log.iter_records("invoices"):
...         print(record.seq, record.fencing_token, record.body)
"""

from .aio import AsyncClient, AsyncTail
from .client import Client, Tail
from .errors import (
    ApiError,
    BadRequest,
    BatchRefused,
    ConnectionFailed,
    Corrupt,
    CursorNotFound,
    DeadlineExceeded,
    FencelogError,
    Forbidden,
    InsufficientStorage,
    NotFound,
    OutcomeUnknown,
    OutOfRange,
    ProducerFenced,
    ProducerNotFound,
    ProducerSeqGap,
    ProducerSeqStale,
    ProtocolError,
    SeqMismatch,
    StaleFencingToken,
    StreamSealed,
    TooLarge,
    TransportError,
    Unauthenticated,
    Unavailable,
)
from .producer import AsyncProducer, Producer
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

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AppendAck",
    "AsyncClient",
    "AsyncProducer",
    "AsyncTail",
    "BadRequest",
    "BatchAppend",
    "BatchFence",
    "BatchRefused",
    "CaughtUp",
    "Client",
    "ConnectionFailed",
    "Corrupt",
    "CursorInfo",
    "CursorNotFound",
    "DeadlineExceeded",
    "FenceEntry",
    "FenceList",
    "FencelogError",
    "Forbidden",
    "InsufficientStorage",
    "NotFound",
    "OutcomeUnknown",
    "OutOfRange",
    "Producer",
    "ProducerFenced",
    "ProducerInfo",
    "ProducerNotFound",
    "ProducerSeqGap",
    "ProducerSeqStale",
    "ProtocolError",
    "ReadPage",
    "Record",
    "RecordIn",
    "SeqMismatch",
    "StaleFencingToken",
    "StreamPage",
    "StreamSealed",
    "StreamState",
    "Tail",
    "TooLarge",
    "TransportError",
    "Unauthenticated",
    "Unavailable",
]
