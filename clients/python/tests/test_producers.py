"""The Python client against the real server: idempotent
producers (a lost answer retried with the same producer_seq comes back as
a duplicate, one copy on the stream), deadlines, "did my write land?", the
fence history, fenced cursors and multi-stream batches — and every new
error type from a real answer, with its exact body and fields."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import httpx
import pytest

import fencelog
from servers import AnswerDroppingProxy, FencelogServer


@pytest.fixture
def proxy(server: FencelogServer) -> Iterator[AnswerDroppingProxy]:
    p = AnswerDroppingProxy(server.port)
    yield p
    p.close()


def bodies(client: fencelog.Client, stream: str) -> list:
    return [r.body for r in client.iter_records(stream)]


def test_a_lost_answer_is_retried_with_the_same_seq_and_answered_as_a_duplicate(
    client: fencelog.Client, proxy: AnswerDroppingProxy, stream: str
) -> None:
    client.fence(stream, 41)
    with fencelog.Client(proxy.url) as via_proxy:
        # Its first append is the proxy's first connection: the answer is lost.
        p = fencelog.Producer(via_proxy, stream, 41, "worker-a")
        ack = p.append("A: order 1")
        assert proxy.dropped.is_set()
        first = client.producer(stream, "worker-a")
        assert ack == fencelog.AppendAck(
            stream=stream, first_seq=0, last_seq=0, next_seq=1, fencing_token=41,
            timestamp_ms=first.timestamp_ms, duplicate=True,
        )
        assert p.next_producer_seq == 1
        nxt = p.append("A: order 2")
        assert (nxt.first_seq, nxt.last_seq, nxt.duplicate) == (1, 1, False)
    assert bodies(client, stream) == [b"A: order 1", b"A: order 2"]
    info = client.producer(stream, "worker-a")
    assert info == fencelog.ProducerInfo(
        producer_id="worker-a", producer_seq=1, first_seq=1, last_seq=1,
        fencing_token=41, timestamp_ms=nxt.timestamp_ms,
    )
    assert client.producer(stream, "nobody") is None
    # A producer started later continues after its last applied seq.
    q = fencelog.Producer.start(client, stream, "worker-a", 41)
    assert q.next_producer_seq == 2
    # Fenced out: the typed stale token, never retried.
    client.fence(stream, 42)
    with pytest.raises(fencelog.StaleFencingToken) as stale:
        q.append("late")
    assert (stale.value.highest_token, stale.value.next_seq) == (42, 2)
    assert q.next_producer_seq == 2
    # The paused owner's retry of its last applied append still answers
    # its original ack, and writes nothing.
    again = client.append(stream, 41, "A: order 2", producer_id="worker-a", producer_seq=1)
    assert again == fencelog.AppendAck(stream, 1, 1, 2, 41, nxt.timestamp_ms, duplicate=True)
    assert bodies(client, stream) == [b"A: order 1", b"A: order 2"]


def test_without_a_producer_id_a_lost_answer_is_never_retried(
    client: fencelog.Client, proxy: AnswerDroppingProxy, stream: str
) -> None:
    with fencelog.Client(proxy.url) as via_proxy:
        p = fencelog.Producer(via_proxy, stream, 7)
        with pytest.raises(fencelog.OutcomeUnknown):
            p.append("once")
        assert proxy.dropped.is_set()
    # It landed, once; nothing sent it again.
    assert bodies(client, stream) == [b"once"]
    assert client.producer(stream, "once") is None
    with pytest.raises(ValueError):
        fencelog.Producer(client, stream, 7, next_producer_seq=3)


def test_a_plain_ack_has_no_duplicate_and_a_stream_without_the_producer_starts_at_zero(
    client: fencelog.Client, stream: str
) -> None:
    p = fencelog.Producer.start(client, stream, "fresh", 3)  # no such stream yet
    assert p.next_producer_seq == 0
    ack = client.append(stream, 3, ["a", "b"])
    assert ack.duplicate is False
    assert p.append(["c", "d"]) == fencelog.AppendAck(
        stream, 2, 3, 4, 3, client.producer(stream, "fresh").timestamp_ms, duplicate=False
    )
    assert fencelog.Producer.start(client, stream, "fresh", 3).next_producer_seq == 1


def test_producer_seq_stale_and_gap(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 5, "x", producer_id="p", producer_seq=4)
    client.append(stream, 5, "y", producer_id="p", producer_seq=5)
    with pytest.raises(fencelog.ProducerSeqStale) as stale:
        client.append(stream, 5, "old", producer_id="p", producer_seq=3)
    e = stale.value
    assert e.body == {
        "error": "producer_seq_stale",
        "message": "producer_seq is below the producer's last applied producer_seq 5",
        "stream": stream,
        "last_producer_seq": 5,
    }
    assert (e.status, e.code, e.stream, e.last_producer_seq) == (409, "producer_seq_stale", stream, 5)
    with pytest.raises(fencelog.ProducerSeqGap) as gap:
        client.append(stream, 5, "skip", producer_id="p", producer_seq=7)
    g = gap.value
    assert g.body == {
        "error": "producer_seq_gap",
        "message": "producer_seq skips ahead: the stream expects producer_seq 6 from this producer",
        "stream": stream,
        "expected_producer_seq": 6,
    }
    assert (g.status, g.stream, g.expected_producer_seq) == (409, stream, 6)
    # A Producer that miscounts is refused the same way, and never retried.
    with pytest.raises(fencelog.ProducerSeqGap):
        fencelog.Producer(client, stream, 5, "p", next_producer_seq=9).append("z")
    assert bodies(client, stream) == [b"x", b"y"]
    with pytest.raises(ValueError):
        client.append(stream, 5, "half", producer_id="p")


def test_deadline_exceeded_on_append_and_fence(client: fencelog.Client, stream: str) -> None:
    before_ms = int(time.time() * 1000)
    with pytest.raises(fencelog.DeadlineExceeded) as info:
        client.append(stream, 1, "late", not_after_ms=1)
    e = info.value
    assert e.writer_ms >= before_ms
    assert e.body == {
        "error": "deadline_exceeded",
        "message": f"the writer's time {e.writer_ms} ms is past the request's not_after_ms; nothing changed",
        "stream": stream,
        "writer_ms": e.writer_ms,
    }
    assert (e.status, e.code, e.stream) == (409, "deadline_exceeded", stream)
    with pytest.raises(fencelog.DeadlineExceeded) as fenced:
        client.fence(stream, 2, not_after_ms=1)
    assert fenced.value.writer_ms >= e.writer_ms
    p = fencelog.Producer(client, stream, 1, "w", not_after_ms=1)
    with pytest.raises(fencelog.DeadlineExceeded):
        p.append("late too")
    assert p.next_producer_seq == 0
    with pytest.raises(fencelog.NotFound):
        client.state(stream)  # nothing changed: not even created
    # A deadline in the future is met; the record's timestamp is the proof.
    far = int(time.time() * 1000) + 600_000
    p.not_after_ms = far
    ack = p.append("in time")
    assert ack.timestamp_ms <= far
    assert client.fence(stream, 2, not_after_ms=far).highest_token == 2


def test_producer_not_found_from_the_server(client: fencelog.Client, server: FencelogServer, stream: str) -> None:
    client.append(stream, 1, "a")
    assert client.producer(stream, "ghost") is None
    # The answer behind that None, typed.
    raw = httpx.get(f"{server.url}/v1/streams/{stream}/producers/ghost")
    e = fencelog.errors.error_from_body(raw.status_code, raw.content)
    assert isinstance(e, fencelog.ProducerNotFound)
    assert e.body == {
        "error": "producer_not_found",
        "message": f'stream {stream} does not remember producer "ghost"',
        "stream": stream,
        "producer_id": "ghost",
    }
    assert (e.status, e.stream, e.producer_id) == (404, stream, "ghost")
    with pytest.raises(fencelog.NotFound):
        client.producer(stream + "-none", "ghost")


def test_producer_fenced_after_eviction(spawn, stream: str) -> None:
    server = spawn()
    with fencelog.Client(server.url) as c:
        c.append(stream, 5, "p0", producer_id="p", producer_seq=0)
        # 1024 other producers (the server's producers_per_stream_max) evict p.
        def one(i: int) -> None:
            c.append(stream, 5, f"q{i}", producer_id=f"q{i}", producer_seq=0)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(1024)))
        assert c.producer(stream, "p") is None
        with pytest.raises(fencelog.ProducerFenced) as info:
            c.append(stream, 5, "p0", producer_id="p", producer_seq=0)
        e = info.value
        assert e.body == {
            "error": "producer_fenced",
            "message": "unknown producer with a fencing token below the stream's producer token floor 6: "
            "it may retry a write of an evicted producer; use a token of at least 6",
            "stream": stream,
            "producer_token_floor": 6,
        }
        assert (e.status, e.stream, e.producer_token_floor) == (409, stream, 6)
        assert c.state(stream).next_seq == 1025


def test_fence_history(client: fencelog.Client, stream: str) -> None:
    a = client.append(stream, 1, ["a", "b"])
    client.fence(stream, 3)
    c = client.append(stream, 4, "c")
    h = client.fences(stream)
    assert h.stream == stream
    assert [(f.fencing_token, f.first_seq, f.by) for f in h.fences] == [(4, 2, "append"), (3, 2, "fence"), (1, 0, "append")]
    assert h.fences[0].timestamp_ms == c.timestamp_ms and h.fences[2].timestamp_ms == a.timestamp_ms
    assert [f.fencing_token for f in client.fences(stream, limit=1).fences] == [4]


def test_fenced_cursors(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 1, ["r0", "r1", "r2"])
    cur = client.commit_cursor(stream, "billing", 5, 1)
    assert cur == fencelog.CursorInfo(stream, "billing", 5, 1, cur.timestamp_ms)
    assert client.cursor(stream, "billing") == cur
    with pytest.raises(fencelog.StaleFencingToken) as stale:
        client.commit_cursor(stream, "billing", 4, 2)
    assert (stale.value.presented_token, stale.value.highest_token) == (4, 5)
    assert stale.value.body["cursor"] == "billing"
    # A higher token may rewind.
    client.commit_cursor(stream, "billing", 6, 2)
    client.commit_cursor(stream, "audit", 1, 0)
    assert [(c.name, c.seq, c.fencing_token) for c in client.cursors(stream)] == [("audit", 0, 1), ("billing", 2, 6)]
    with pytest.raises(fencelog.OutOfRange) as past:
        client.commit_cursor(stream, "billing", 6, 9)
    assert (past.value.seq, past.value.next_seq, past.value.start_seq) == (9, 3, None)
    assert [r.seq for r in client.read(stream, cursor="billing").records] == [2]
    assert [r.body for r in client.iter_records(stream, cursor="audit", count=1)] == [b"r0", b"r1", b"r2"]
    with pytest.raises(fencelog.CursorNotFound) as missing:
        client.cursor(stream, "none")
    e = missing.value
    assert e.body == {
        "error": "cursor_not_found",
        "message": f'stream {stream} has no cursor "none"',
        "stream": stream,
        "cursor": "none",
    }
    assert (e.status, e.stream, e.cursor) == (404, stream, "none")
    with pytest.raises(fencelog.CursorNotFound):
        client.read(stream, cursor="none")
    with client.tail(stream, cursor="billing") as tail:
        assert tail.position is None
        first = next(tail)
        assert (first.seq, first.body, tail.position) == (2, b"r2", 3)
        client.append(stream, 1, "r3")
        assert next(tail).seq == 3


def test_multi_stream_batch(client: fencelog.Client, stream: str) -> None:
    x, y = stream + ".x", stream + ".y"
    acks = client.batch([fencelog.BatchFence(x, 7), fencelog.BatchAppend(y, 7, ("y0", b"\xff"))])
    assert isinstance(acks[0], fencelog.StreamState) and (acks[0].stream, acks[0].highest_token) == (x, 7)
    assert acks[1] == fencelog.AppendAck(y, 0, 1, 2, 7, acks[1].timestamp_ms)
    assert bodies(client, y) == [b"y0", b"\xff"]
    with pytest.raises(fencelog.BatchRefused) as info:
        client.batch([fencelog.BatchAppend(y, 7, ("y2",)), fencelog.BatchFence(x, 6)])
    e = info.value
    assert (e.status, e.code) == (409, "stale_fencing_token")
    assert e.message == "1 of the batch's 2 operations were refused; none was applied"
    assert isinstance(e.first, fencelog.StaleFencingToken)
    assert (e.first.stream, e.first.presented_token, e.first.highest_token, e.first.next_seq) == (x, 6, 7, 0)
    assert len(e.ops) == 2 and e.ops[1]["error"] == "stale_fencing_token"
    would, refused = e.outcomes
    assert isinstance(would, fencelog.AppendAck) and (would.stream, would.first_seq) == (y, 2)
    assert isinstance(refused, fencelog.StaleFencingToken) and refused.highest_token == 7
    assert bodies(client, y) == [b"y0", b"\xff"]
    with pytest.raises(fencelog.BatchRefused) as mismatch:
        client.batch([fencelog.BatchAppend(y, 7, ("y2",), match_seq_num=5)])
    m = mismatch.value
    assert (m.status, type(m.first), m.first.next_seq) == (412, fencelog.SeqMismatch, 2)
    with pytest.raises(fencelog.BatchRefused) as late:
        client.batch([fencelog.BatchAppend(y, 7, ("y2",))], not_after_ms=1)
    assert isinstance(late.value.first, fencelog.DeadlineExceeded)
    assert bodies(client, y) == [b"y0", b"\xff"]


def test_deadlines_on_trim_and_seal_and_a_sealed_stream(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 3, ["a", "b", "c"])
    with pytest.raises(fencelog.DeadlineExceeded) as trim_late:
        client.trim(stream, 3, 2, not_after_ms=1)
    assert trim_late.value.stream == stream
    with pytest.raises(fencelog.DeadlineExceeded):
        client.seal(stream, 3, not_after_ms=1)
    st = client.state(stream)
    assert (st.first_seq, st.sealed) == (0, False)  # nothing changed
    far = int(time.time() * 1000) + 600_000
    assert client.trim(stream, 3, 2, not_after_ms=far).first_seq == 2
    sealed = client.seal(stream, 3, not_after_ms=far)
    assert (sealed.sealed, sealed.next_seq, sealed.highest_token) == (True, 3, 3)
    with pytest.raises(fencelog.StreamSealed) as info:
        client.append(stream, 4, "d")
    e = info.value
    assert e.body == {
        "error": "stream_sealed",
        "message": f"stream {stream} is sealed (next_seq 3, highest token 3): no more appends, fences or trims",
        "stream": stream,
        "first_seq": 2,
        "next_seq": 3,
        "highest_token": 3,
        "sealed": True,
    }
    assert (e.status, e.first_seq, e.next_seq, e.highest_token) == (409, 2, 3, 3)
    # A producer on a sealed stream is refused the same way, not retried.
    with pytest.raises(fencelog.StreamSealed):
        fencelog.Producer(client, stream, 4, "late").append("d")
