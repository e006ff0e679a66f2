"""Appends, reads, paging and listing against the real server."""

from __future__ import annotations

import os
import threading

import fencelog

U64_MAX = (1 << 64) - 1


def test_text_and_binary_bodies_round_trip(client: fencelog.Client, stream: str) -> None:
    binary = os.urandom(65536)
    bodies = [
        "plain text",
        "unicode: ünïcødé ✓ 🚀",
        "control \x00\x01\n\t\r characters",
        "",
        b"\xff\xfe not utf-8",
        b"",
        binary,
        bytearray(b"a bytearray"),
        memoryview(b"a memoryview"),
    ]
    ack = client.append(stream, 3, bodies)
    assert (ack.stream, ack.first_seq, ack.last_seq, ack.next_seq, ack.fencing_token) == (stream, 0, 8, 9, 3)
    expected = [b.encode() if isinstance(b, str) else bytes(b) for b in bodies]
    page = client.read(stream)
    assert [r.body for r in page.records] == expected
    assert [r.seq for r in page.records] == list(range(9))
    assert {r.fencing_token for r in page.records} == {3}
    assert {r.timestamp_ms for r in page.records} == {ack.timestamp_ms}
    assert page.records[1].text == "unicode: ünïcødé ✓ 🚀"
    assert page.records[0].headers == ()


def test_single_record_forms(client: fencelog.Client, stream: str) -> None:
    # A lone str or bytes is one record, never a sequence of characters.
    assert client.append(stream, 1, "abc").last_seq == 0
    assert client.append(stream, 1, b"def").last_seq == 1
    assert [r.body for r in client.iter_records(stream)] == [b"abc", b"def"]


def test_match_seq_num_appends_only_at_the_expected_position(client: fencelog.Client, stream: str) -> None:
    assert client.append(stream, 1, "first", match_seq_num=0).first_seq == 0
    assert client.append(stream, 1, ["second", "third"], match_seq_num=1).last_seq == 2


def test_pages_continue_after_the_last_record_not_at_the_tail(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 1, [f"r{i}" for i in range(25)])
    page = client.read(stream, 0, count=4)
    assert [r.seq for r in page.records] == [0, 1, 2, 3]
    # next_seq is the tail; the continuation is the seq after the page.
    assert (page.next_seq, page.next_start_seq) == (25, 4)


def test_iter_records_pages_through_every_record_in_order(client: fencelog.Client, stream: str) -> None:
    # Several batches and tokens, so pages straddle batch boundaries.
    expected = []
    for batch in range(5):
        bodies = [f"batch {batch} record {i}".encode() for i in range(batch + 3)]
        client.append(stream, 10 + batch, bodies)
        expected += [(10 + batch, b) for b in bodies]
    assert len(expected) == 25
    got = [(r.seq, r.fencing_token, r.body) for r in client.iter_records(stream, count=4)]
    assert got == [(seq, tok, body) for seq, (tok, body) in enumerate(expected)]  # 7 pages
    # From the middle, and with pages cut by bytes instead of count: each
    # page holds at least its first record whole, however small `bytes` is.
    got = [(r.seq, r.body) for r in client.iter_records(stream, 20, max_bytes=1)]
    assert got == [(seq, expected[seq][1]) for seq in range(20, 25)]
    # At the tail there is nothing, and that is not an error.
    assert list(client.iter_records(stream, 25)) == []


def test_iter_records_includes_appends_made_while_paging(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 1, ["a", "b", "c"])
    seen = []
    for r in client.iter_records(stream, count=2):
        seen.append(r.body)
        if r.body == b"a":
            client.append(stream, 1, ["d", "e"])
    assert seen == [b"a", b"b", b"c", b"d", b"e"]


def test_long_poll_returns_the_record_that_arrives(client: fencelog.Client, server, stream: str) -> None:
    client.append(stream, 1, "existing")
    result = {}

    def poll() -> None:
        with fencelog.Client(server.url) as other:
            result["page"] = other.read(stream, 1, wait_ms=20_000)

    t = threading.Thread(target=poll)
    t.start()
    client.append(stream, 1, "new")
    t.join(30)
    assert [(r.seq, r.body) for r in result["page"].records] == [(1, b"new")]


def test_fence_creates_the_stream_and_shuts_older_tokens_out(client: fencelog.Client, stream: str) -> None:
    st = client.fence(stream, 43)
    assert (st.stream, st.first_seq, st.next_seq, st.highest_token) == (stream, 0, 0, 43)
    assert client.state(stream) == st
    # Equal tokens are accepted: the new owner writes many batches.
    assert client.append(stream, 43, "mine").first_seq == 0
    assert client.fence(stream, 43).highest_token == 43


def test_the_whole_token_range(client: fencelog.Client, stream: str) -> None:
    # 2^64-1 is a valid token; a client that rounded it would fence with a
    # different number than the one it was given.
    assert client.fence(stream, U64_MAX).highest_token == U64_MAX
    ack = client.append(stream, U64_MAX, "max")
    assert ack.fencing_token == U64_MAX
    assert client.read(stream).records[0].fencing_token == U64_MAX


def test_list_streams_pages_in_name_order(client: fencelog.Client, stream: str) -> None:
    names = [f"{stream}:{i:02d}" for i in (7, 3, 11, 0, 5, 9, 1)]
    for i, name in enumerate(names):
        client.append(name, 1, f"record of {name}")
    client.append(f"{stream}-other", 1, "not under the prefix")
    listed = list(client.list_streams(prefix=f"{stream}:", limit=2))  # 4 pages
    assert [s.stream for s in listed] == sorted(names)
    assert all((s.first_seq, s.next_seq, s.highest_token) == (0, 1, 1) for s in listed)
    first = client.list_page(prefix=f"{stream}:", limit=3)
    assert [s.stream for s in first.streams] == sorted(names)[:3]
    assert first.next_start_after == sorted(names)[2]
    last = client.list_page(prefix=f"{stream}:", start_after=sorted(names)[4], limit=3)
    assert ([s.stream for s in last.streams], last.next_start_after) == (sorted(names)[5:], None)


def test_headers_round_trip_in_a_mixed_batch(client: fencelog.Client, stream: str) -> None:
    # Text and binary names and values, a repeated name, an empty value, and
    # records without headers in the same batch.
    records = [
        fencelog.RecordIn("traced", headers=(("trace-id", "abc"), ("trace-id", ""))),
        "plain",
        fencelog.RecordIn(b"\xff", headers=((b"bin\xfe", b"\x00\x01"),)),
    ]
    ack = client.append(stream, 1, records)
    assert (ack.first_seq, ack.last_seq) == (0, 2)
    page = client.read(stream)
    got = [(r.body, r.headers) for r in page.records]
    assert got == [
        (b"traced", ((b"trace-id", b"abc"), (b"trace-id", b""))),
        (b"plain", ()),
        (b"\xff", ((b"bin\xfe", b"\x00\x01"),)),
    ]
    # A tail gives them too.
    with client.tail(stream, 0, idle_timeout=10, retry_for=10) as tail:
        tailed = [next(tail) for _ in range(3)]
    assert [(r.body, r.headers) for r in tailed] == got


def test_over_the_header_limits_is_refused_and_writes_nothing(client: fencelog.Client, stream: str) -> None:
    many = fencelog.RecordIn("b", headers=tuple(("n", "v") for _ in range(65)))
    try:
        client.append(stream, 1, [many])
        raise AssertionError("65 headers were accepted")
    except fencelog.TooLarge as e:
        assert "65 headers, the limit is 64 per record" in str(e)
    try:
        client.append(stream, 1, [fencelog.RecordIn("b", headers=(("", "v"),))])
        raise AssertionError("an empty header name was accepted")
    except fencelog.BadRequest as e:
        assert "header 0 has an empty name" in str(e)
    try:
        client.read(stream)
        raise AssertionError("a refused append created the stream")
    except fencelog.NotFound:
        pass
