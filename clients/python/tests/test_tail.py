"""Live tails over SSE: catching up, following, and resuming across server
restarts — crashes (kill -9) and graceful stops — without gaps or repeats."""

from __future__ import annotations

import time
from typing import List, Tuple, Union

import pytest

import fencelog

Item = Union[fencelog.Record, fencelog.CaughtUp]


def until_caught_up(tail: fencelog.Tail, next_seq: int) -> List[Tuple[int, bytes]]:
    """(seq, body) of every record the tail yields until it reports being
    caught up at ``next_seq``. The server says so when a connection has
    read its backlog, so this is for the start of a connection; records
    that arrive live afterwards come without one (see ``take``)."""
    got = []
    for item in tail:
        if isinstance(item, fencelog.CaughtUp):
            assert item.next_seq == tail.position, item
            if item.next_seq == next_seq:
                return got
            continue
        got.append((item.seq, item.body))
    raise AssertionError("tail ended")


def take(tail: fencelog.Tail, n: int) -> List[Tuple[int, bytes]]:
    """(seq, body) of the next ``n`` records, whatever CaughtUp events come
    between them."""
    got = []
    for item in tail:
        if isinstance(item, fencelog.CaughtUp):
            assert item.next_seq == tail.position, item
            continue
        got.append((item.seq, item.body))
        if len(got) == n:
            return got
    raise AssertionError("tail ended")


def bodies(prefix: str, n: int) -> List[bytes]:
    return [f"{prefix} {i}".encode() for i in range(n)]


def test_tail_delivers_backlog_then_live_records(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 1, bodies("old", 3))
    with client.tail_events(stream, idle_timeout=10, retry_for=10) as tail:
        assert until_caught_up(tail, 3) == list(enumerate(bodies("old", 3)))
        # Appended only once the tail said it was caught up: these can only
        # arrive live.
        client.append(stream, 2, [b"live \xff", b"live 2"])
        assert take(tail, 2) == [(3, b"live \xff"), (4, b"live 2")]
        assert tail.position == 5 and tail.reconnects == 0


def test_tail_from_the_middle(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 1, bodies("r", 6))
    with client.tail(stream, 4, idle_timeout=10, retry_for=10) as tail:
        assert [(next(tail).seq), next(tail).seq] == [4, 5]


def test_tail_resumes_across_kill_9(spawn) -> None:
    s = spawn()
    producer = fencelog.Client(s.url)
    consumer = fencelog.Client(s.url)
    producer.append("t", 1, bodies("before crash", 5))
    producer.append("t", 1, [b"\x00\xff binary"])
    tail = consumer.tail_events("t", idle_timeout=10, retry_for=30)
    expected = list(enumerate(bodies("before crash", 5) + [b"\x00\xff binary"]))
    assert until_caught_up(tail, 6) == expected

    s.kill9()
    s.start()  # same port, same data directory
    producer.append("t", 2, bodies("after restart", 4))
    # The tail notices its connection died, reconnects with Last-Event-ID
    # 6, and gets exactly the records after the last one it delivered.
    got = take(tail, 4)
    assert got == list(zip(range(6, 10), bodies("after restart", 4)))
    assert tail.reconnects >= 1

    # A second crash, this time with records the tail has not seen yet
    # already in the log when it reconnects, and more after.
    producer.append("t", 3, bodies("unseen", 2))
    s.kill9()
    s.start()
    producer.append("t", 3, bodies("later", 2))
    got = take(tail, 4)
    assert got == list(zip(range(10, 14), bodies("unseen", 2) + bodies("later", 2)))
    records = list(producer.iter_records("t"))
    assert [r.seq for r in records] == list(range(14))
    tail.close()
    producer.close()
    consumer.close()


def test_tail_resumes_across_a_graceful_restart(spawn) -> None:
    s = spawn()
    with fencelog.Client(s.url) as c:
        c.append("g", 1, bodies("a", 2))
        with c.tail_events("g", idle_timeout=10, retry_for=30) as tail:
            assert until_caught_up(tail, 2) == list(enumerate(bodies("a", 2)))
            # SIGTERM ends live tails cleanly (the stream just ends); the
            # client cannot tell that from a crash and need not.
            assert s.stop() == 0
            s.start()
            c.append("g", 1, bodies("b", 2))
            assert take(tail, 2) == [(2, b"b 0"), (3, b"b 1")]
            assert tail.reconnects >= 1


def test_tail_gives_up_after_retry_for(spawn) -> None:
    s = spawn()
    with fencelog.Client(s.url) as c:
        c.append("x", 1, "a")
        tail = c.tail("x", idle_timeout=10, retry_for=0.5)
        assert next(tail).body == b"a"
        s.kill9()
        started = time.monotonic()
        with pytest.raises(fencelog.TransportError):
            next(tail)
        assert time.monotonic() - started < 10
        # Closed after giving up: iteration is over.
        assert list(tail) == []
