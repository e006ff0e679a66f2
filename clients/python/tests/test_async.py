"""The asyncio client against the real server: the same contract as the
sync one, and a tail consumed by a task while the server is killed."""

from __future__ import annotations

import asyncio
from typing import List, Tuple

import pytest

import fencelog
from test_errors import _Swallower

pytestmark = pytest.mark.anyio


async def test_append_read_and_page(server, stream: str) -> None:
    async with fencelog.AsyncClient(server.url) as c:
        ack = await c.append(stream, 5, ["text", b"\xff\x00", ""])
        assert (ack.first_seq, ack.last_seq, ack.next_seq, ack.fencing_token) == (0, 2, 3, 5)
        await c.append(stream, 5, [f"r{i}" for i in range(10)])
        page = await c.read(stream, 0, count=2)
        assert ([r.seq for r in page.records], page.next_seq, page.next_start_seq) == ([0, 1], 13, 2)
        got = [(r.seq, r.body) async for r in c.iter_records(stream, count=3)]  # 5 pages
        assert got == list(enumerate([b"text", b"\xff\x00", b""] + [f"r{i}".encode() for i in range(10)]))
        st = await c.state(stream)
        assert (st.stream, st.next_seq, st.highest_token) == (stream, 13, 5)
        names = [s.stream async for s in c.list_streams(prefix=stream, limit=1)]
        assert names == [stream]


async def test_typed_errors(server, stream: str) -> None:
    async with fencelog.AsyncClient(server.url) as c:
        await c.fence(stream, 42)
        with pytest.raises(fencelog.StaleFencingToken) as stale:
            await c.append(stream, 41, "late")
        assert stale.value.body == {
            "error": "stale_fencing_token",
            "message": "fencing token 41 is below the stream's highest accepted token 42 (next_seq 0)",
            "stream": stream,
            "presented_token": 41,
            "highest_token": 42,
            "next_seq": 0,
        }
        with pytest.raises(fencelog.StaleFencingToken):
            await c.fence(stream, 41)
        with pytest.raises(fencelog.SeqMismatch) as mismatch:
            await c.append(stream, 42, "x", match_seq_num=3)
        assert (mismatch.value.match_seq_num, mismatch.value.next_seq) == (3, 0)
        with pytest.raises(fencelog.OutOfRange) as oor:
            await c.read(stream, 1)
        assert (oor.value.start_seq, oor.value.next_seq) == (1, 0)
        with pytest.raises(fencelog.NotFound) as nf:
            await c.state(stream + "-missing")
        assert nf.value.body == {"error": "stream_not_found", "message": "stream not found", "stream": stream + "-missing"}
        with pytest.raises(fencelog.BadRequest):
            await c.append(stream, 0, "x")
        with pytest.raises(fencelog.NotFound):
            await c.tail(stream + "-missing").__anext__()


async def test_outcome_unknown_and_connection_failed() -> None:
    srv = _Swallower()
    try:
        async with fencelog.AsyncClient(srv.url) as c:
            with pytest.raises(fencelog.OutcomeUnknown):
                await c.append("s", 1, "a")
            assert len(srv.requests) == 1
    finally:
        srv.close()
    from servers import free_port

    async with fencelog.AsyncClient(f"http://127.0.0.1:{free_port()}") as c:
        with pytest.raises(fencelog.ConnectionFailed):
            await c.append("s", 1, "a")


async def test_tail_task_survives_kill_9(spawn) -> None:
    s = spawn()
    items: "asyncio.Queue[object]" = asyncio.Queue()
    async with fencelog.AsyncClient(s.url) as producer, fencelog.AsyncClient(s.url) as consumer:
        await producer.append("t", 1, [b"a0", b"a1", b"a2"])
        tail = consumer.tail_events("t", idle_timeout=10, retry_for=30)

        async def consume() -> None:
            async for item in tail:
                await items.put(item)

        task = asyncio.create_task(consume())

        async def records_until_caught_up(next_seq: int) -> List[Tuple[int, bytes]]:
            got = []
            while True:
                item = await asyncio.wait_for(items.get(), 30)
                if isinstance(item, fencelog.CaughtUp):
                    if item.next_seq == next_seq:
                        return got
                else:
                    got.append((item.seq, item.body))

        assert await records_until_caught_up(3) == [(0, b"a0"), (1, b"a1"), (2, b"a2")]
        # The task is now blocked reading its connection when the server
        # dies under it.
        s.kill9()
        s.start()
        await producer.append("t", 2, [b"b3", b"b4"])
        # The new connection starts behind, so it reports catching up again.
        assert await records_until_caught_up(5) == [(3, b"b3"), (4, b"b4")]
        assert tail.reconnects >= 1
        await producer.append("t", 2, b"c5")
        # Live, a record is followed by caught_up: the tail is back at the end.
        assert await records_until_caught_up(6) == [(5, b"c5")]
        task.cancel()
        await tail.aclose()
        assert items.empty()


async def test_async_producer_retries_a_lost_answer_as_a_duplicate(server, stream: str) -> None:
    from servers import AnswerDroppingProxy

    proxy = AnswerDroppingProxy(server.port)
    try:
        async with fencelog.AsyncClient(server.url) as c:
            await c.fence(stream, 41)
            async with fencelog.AsyncClient(proxy.url) as via_proxy:
                p = await fencelog.AsyncProducer.start(via_proxy, stream, "worker-a", 41)
            # start() was the proxy's first connection: its answer dropped,
            # the lookup (a read) retried. Now an append's answer is lost.
            assert proxy.dropped.is_set() and p.next_producer_seq == 0
            proxy.arm()
            async with fencelog.AsyncClient(proxy.url) as fresh:
                p.client = fresh
                ack = await p.append("A: order 1")
                assert proxy.dropped.is_set()
                assert (ack.first_seq, ack.last_seq, ack.fencing_token, ack.duplicate) == (0, 0, 41, True)
                assert (await p.append("A: order 2")).duplicate is False
            assert [r.body async for r in c.iter_records(stream)] == [b"A: order 1", b"A: order 2"]
            info = await c.producer(stream, "worker-a")
            assert (info.producer_seq, info.first_seq, info.fencing_token) == (1, 1, 41)
            assert await c.producer(stream, "nobody") is None
            assert [f.by for f in (await c.fences(stream)).fences] == ["fence"]
            await c.commit_cursor(stream, "r", 41, 1)
            assert [x.seq for x in await c.cursors(stream)] == [1]
            assert (await c.cursor(stream, "r")).fencing_token == 41
            assert [r.seq async for r in c.iter_records(stream, cursor="r")] == [1]
            acks = await c.batch([fencelog.BatchAppend(stream, 41, ("b",))], not_after_ms=None)
            assert acks[0].first_seq == 2
            with pytest.raises(fencelog.DeadlineExceeded):
                await c.fence(stream, 42, not_after_ms=1)
    finally:
        proxy.close()
