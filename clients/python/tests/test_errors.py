"""Every typed error, raised by the real server, with its exact body and
fields; and the transport errors, with what each promises about the write."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

import fencelog
from servers import FencelogServer, free_port

U64_MAX = (1 << 64) - 1
TOKEN_RANGE = "an integer in 1..=18446744073709551615"


def test_stale_fencing_token_on_append(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 41, "A: invoice 1001 drafted")
    client.append(stream, 42, "B: invoice 1001 sent")
    with pytest.raises(fencelog.StaleFencingToken) as info:
        client.append(stream, 41, "A: invoice 1001 cancelled")
    e = info.value
    assert e.body == {
        "error": "stale_fencing_token",
        "message": "fencing token 41 is below the stream's highest accepted token 42 (next_seq 2)",
        "stream": stream,
        "presented_token": 41,
        "highest_token": 42,
        "next_seq": 2,
    }
    assert (e.status, e.code, e.stream, e.presented_token, e.highest_token, e.next_seq) == (
        409, "stale_fencing_token", stream, 41, 42, 2,
    )
    assert [r.body for r in client.iter_records(stream)] == [b"A: invoice 1001 drafted", b"B: invoice 1001 sent"]


def test_stale_fencing_token_on_fence(client: fencelog.Client, stream: str) -> None:
    client.fence(stream, 43)
    with pytest.raises(fencelog.StaleFencingToken) as info:
        client.fence(stream, 42)
    assert info.value.body == {
        "error": "stale_fencing_token",
        "message": "fencing token 42 is below the stream's highest accepted token 43 (next_seq 0)",
        "stream": stream,
        "presented_token": 42,
        "highest_token": 43,
        "next_seq": 0,
    }


def test_seq_mismatch(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 1, ["a", "b"])
    with pytest.raises(fencelog.SeqMismatch) as info:
        client.append(stream, 1, "c", match_seq_num=7)
    e = info.value
    assert e.body == {
        "error": "seq_mismatch",
        "message": "match_seq_num 7 does not equal the stream's next_seq 2",
        "stream": stream,
        "match_seq_num": 7,
        "next_seq": 2,
    }
    assert (e.status, e.stream, e.match_seq_num, e.next_seq) == (412, stream, 7, 2)
    assert client.append(stream, 1, "c", match_seq_num=2).first_seq == 2


@pytest.mark.parametrize("call", ["state", "read", "tail"])
def test_not_found(client: fencelog.Client, call: str) -> None:
    with pytest.raises(fencelog.NotFound) as info:
        if call == "state":
            client.state("no-such-stream")
        elif call == "read":
            client.read("no-such-stream")
        else:
            next(iter(client.tail("no-such-stream")))
    e = info.value
    assert e.body == {"error": "stream_not_found", "message": "stream not found", "stream": "no-such-stream"}
    assert (e.status, e.stream) == (404, "no-such-stream")


def test_out_of_range(client: fencelog.Client, stream: str) -> None:
    client.append(stream, 1, ["a", "b"])
    for attempt in (lambda: client.read(stream, 9), lambda: next(iter(client.tail(stream, 9)))):
        with pytest.raises(fencelog.OutOfRange) as info:
            attempt()
        e = info.value
        assert e.body == {
            "error": "out_of_range",
            "message": "start_seq 9 is past the stream's next_seq 2",
            "stream": stream,
            "start_seq": 9,
            "first_seq": 0,
            "next_seq": 2,
        }
        assert (e.status, e.stream, e.start_seq, e.next_seq) == (416, stream, 9, 2)
    # Reading exactly at the tail is not out of range: it is empty.
    assert client.read(stream, 2).records == ()


def test_too_large(spawn) -> None:
    s = spawn(args=["--batch-records-max", "3", "--batch-bytes-max", "100", "--body-bytes-max", "1000"])
    with fencelog.Client(s.url) as c:
        cases = [
            (["a"] * 4, {"limit": 3, "actual": 4, "message": "records in the batch is 4, the limit is 3"}),
            ("x" * 101, {"limit": 100, "actual": 101, "message": "bytes in the batch is 101, the limit is 100"}),
            # Over the HTTP body limit: refused before the body is read, so
            # there is no "actual" count, only the limit.
            ("y" * 1001, {"limit": 1000, "message": "request body is 1005 bytes or more, the limit is 1000"}),
        ]
        for records, fields in cases:
            with pytest.raises(fencelog.TooLarge) as info:
                c.append("big", 1, records)
            e = info.value
            assert e.body == {"error": "too_large", **fields, "stream": "big"}
            assert (e.status, e.limit, e.actual) == (413, fields["limit"], fields.get("actual"))
        with pytest.raises(fencelog.NotFound):
            c.state("big")  # nothing was written, not even the stream


def test_bad_request(client: fencelog.Client, stream: str) -> None:
    # Every refusal of a request naming a valid stream names it.
    named = {"stream": stream}
    cases = [
        (lambda: client.append(stream, 0, "a"), f'header Fencing-Token must be {TOKEN_RANGE}, got "0"', named),
        (lambda: client.append(stream, U64_MAX + 1, "a"),
         f'header Fencing-Token must be {TOKEN_RANGE}, got "18446744073709551616"', named),
        (lambda: client.fence(stream, 0), f"fencing_token must be {TOKEN_RANGE}, got 0", named),
        (lambda: client.append(stream, 1, []),
         "the application/vnd.fencelog.batch body is empty: it needs at least one record "
         "(a u32 little-endian length, then that many bytes)", named),
        (lambda: client.state("a/b"),
         "invalid stream name: '/' is not allowed in a stream name "
         "(at byte 1; allowed are A-Z a-z 0-9 . _ : -)", {}),
        (lambda: client.state(".."), "invalid stream name: stream name must not be '.' or '..'", {}),
        (lambda: client.read(stream, count=0), "query parameter count must be at least 1", named),
    ]
    for call, message, fields in cases:
        with pytest.raises(fencelog.BadRequest) as info:
            call()
        assert info.value.body == {"error": "bad_request", "message": message, **fields}
        assert info.value.status == 400


def test_wrong_url_is_not_a_missing_stream(server, stream: str) -> None:
    # A 404 for a route that does not exist means the base URL is wrong; it
    # must not pass for "no such stream" (code stream_not_found).
    with fencelog.Client(server.url + "/not-fencelog") as c:
        with pytest.raises(fencelog.ApiError) as info:
            c.state(stream)
    e = info.value
    assert type(e) is fencelog.ApiError
    assert (e.status, e.code, e.body) == (404, "not_found", {"error": "not_found", "message": "no such route"})


def _fill(c: fencelog.Client, stream: str, error: type) -> int:
    """Appends 100 KB records until the server's storage fails with
    ``error``; returns how many were acknowledged first."""
    body = b"x" * 100_000
    for acked in range(500):
        try:
            c.append(stream, 1, body)
        except error:
            return acked
    raise AssertionError(f"storage never failed after {500 * len(body)} bytes")


def _limit_file_size() -> None:
    # Runs in the server's process before exec: writes past 6 MB fail with
    # EFBIG (an I/O error that is not "disk full"). SIGXFSZ would kill the
    # process instead; ignored, it stays ignored across exec.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (6_000_000, 6_000_000))


REFUSED = "storage refused the write before any of it was written; nothing changed: "


def test_unavailable_when_storage_refuses_before_writing(spawn) -> None:
    s = spawn(preexec_fn=_limit_file_size)
    failure = "preallocate of 00000000000000000000.seg failed: File too large (os error 27)"
    with fencelog.Client(s.url) as c:
        acked = _fill(c, "s", fencelog.Unavailable)
        # The space ahead could not be zero-filled, so none of the refused
        # group was written: its outcome is known (nothing changed), and
        # the engine is not poisoned.
        with pytest.raises(fencelog.Unavailable) as again:
            c.append("s", 1, b"x" * 100_000)
        e = again.value
        assert e.body == {"error": "unavailable", "message": REFUSED + failure, "stream": "s"}
        assert (e.status, e.outcome_unknown) == (503, False)
        # Reads keep working, and show exactly what was acknowledged.
        assert c.state("s").next_seq == acked
        assert sum(1 for _ in c.iter_records("s")) == acked
        # A write that fits in the space already zero-filled still lands.
        ack = c.append("s", 1, "after")
        assert (ack.first_seq, ack.next_seq) == (acked, acked + 1)
        assert [r.body for r in c.iter_records("s", start_seq=acked)] == [b"after"]


class _OneAnswer:
    """A local HTTP server answering every request with one fixed JSON
    error. The real server gives ``outcome_unknown: true`` only when a
    group failed after some of it was written (a failed write or fsync),
    which cannot be provoked from outside its process; the Rust suites
    inject that fault in-process and pin this exact body. Here it checks
    what the client makes of it."""

    def __init__(self, status: int, body: bytes) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply = (
            f"HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode() + body
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length: *(\d+)", head)
                need = int(m.group(1)) if m else 0
                while len(rest) < need:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
                conn.sendall(self.reply)

    def close(self) -> None:
        # close() alone does not wake a thread blocked in accept() on
        # Linux; shutdown() makes that accept() fail at once.
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join()


@pytest.mark.parametrize(
    "status,code,cls",
    [(503, "unavailable", fencelog.Unavailable), (507, "insufficient_storage", fencelog.InsufficientStorage)],
)
def test_storage_failed_while_writing_is_outcome_unknown(status: int, code: str, cls: type) -> None:
    body = {
        "error": code,
        "message": "storage failed while writing this request; outcome unknown: fdatasync of "
        "00000000000000000000.seg failed: Input/output error (os error 5)",
        "outcome_unknown": True,
    }
    stub = _OneAnswer(status, json.dumps(body).encode())
    try:
        with fencelog.Client(stub.url) as c:
            with pytest.raises(cls) as info:
                c.append("s", 1, "x")
        assert info.value.body == body
        assert (info.value.status, info.value.outcome_unknown) == (status, True)
    finally:
        stub.close()


def test_insufficient_storage(tmp_path: Path) -> None:
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(
            "this test needs to mount a 2 MiB tmpfs (as root, like CI) to fill the server's disk: "
            f"mount said: {mounted.stderr.strip()}"
        )
    try:
        # Small segments, so a segment's zero-fill fits the small disk a
        # few times over and the disk fills with records, not preallocation.
        small = FencelogServer(mnt / "data", args=["--segment-bytes", "262144"]).start()
        try:
            with fencelog.Client(small.url) as c:
                # A small first record fits; it makes the stream exist.
                c.append("s", 1, "first")
                acked = 1 + _fill(c, "s", fencelog.InsufficientStorage)
                with pytest.raises(fencelog.InsufficientStorage) as then:
                    c.append("s", 1, b"x" * 100_000)
                body = dict(then.value.body)
                # Which segment ran out depends on how the space was used.
                assert re.fullmatch(
                    re.escape(REFUSED) + r"preallocate of \d{20}\.seg failed: No space left on device \(os error 28\)",
                    body.pop("message"),
                )
                assert body == {"error": "insufficient_storage", "stream": "s"}
                assert (then.value.status, then.value.outcome_unknown) == (507, False)
                assert c.state("s").next_seq == acked
                # The operator frees space: writes resume without a restart.
                subprocess.run(["mount", "-o", "remount,size=8m", str(mnt)], check=True)
                ack = c.append("s", 1, b"x" * 100_000)
                assert ack.first_seq == acked
        finally:
            small.kill9()
    finally:
        # The killed server's mapped segments may still be let go of by the
        # kernel for a moment ("target is busy"): detach then, as the Rust
        # full-disk test does.
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_corrupt(spawn) -> None:
    s = spawn()
    with fencelog.Client(s.url) as c:
        c.append("c", 1, "HELLO-CORRUPT-ME")
        seg = s.data_dir / "00000000000000000000.seg"
        data = seg.read_bytes()
        at = data.index(b"HELLO-CORRUPT-ME")
        with open(seg, "r+b") as f:  # damage at rest, behind the server's back
            f.seek(at)
            f.write(b"J")
        pattern = (
            r"corrupt log: 00000000000000000000\.seg at offset \d+: "
            r"checksum mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}"
        )
        with pytest.raises(fencelog.Corrupt) as info:
            c.read("c")
        assert info.value.status == 500
        # The file and offset of the damaged frame, and the stream read.
        assert sorted(info.value.body) == ["error", "file", "message", "offset", "stream"]
        assert (info.value.body["file"], info.value.body["stream"]) == ("00000000000000000000.seg", "c")
        assert info.value.code == "corrupt" and re.fullmatch(pattern, info.value.message)
        # The tail gets the same error as an SSE `error` event, and ends.
        with pytest.raises(fencelog.Corrupt) as in_tail:
            next(iter(c.tail("c")))
        assert re.fullmatch(pattern, in_tail.value.message)


def test_connection_failed_means_nothing_was_sent() -> None:
    port = free_port()  # bound and released: nothing listens there
    with fencelog.Client(f"http://127.0.0.1:{port}") as c:
        with pytest.raises(fencelog.ConnectionFailed):
            c.append("s", 1, "a")
        with pytest.raises(fencelog.ConnectionFailed):
            c.fence("s", 1)
        with pytest.raises(fencelog.ConnectionFailed):
            c.state("s")


class _Swallower:
    """A TCP server that reads whole HTTP requests and hangs up without an
    answer: the moment between "the server received the append" and "the
    client got the ack" that makes an outcome unknown."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: List[bytes] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length: *(\d+)", head)
                while m and len(body) < int(m.group(1)):
                    body += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + body)

    def close(self) -> None:
        self.sock.close()


def test_outcome_unknown_when_the_answer_is_lost() -> None:
    srv = _Swallower()
    try:
        with fencelog.Client(srv.url) as c:
            with pytest.raises(fencelog.OutcomeUnknown):
                c.append("s", 7, [b"one", b"\xff"])
            # Exactly one attempt: an append is never retried.
            assert len(srv.requests) == 1
            head, _, body = srv.requests[0].partition(b"\r\n\r\n")
            assert b"\r\nfencing-token: 7" in head.lower()
            assert b"\r\ncontent-type: application/vnd.fencelog.batch" in head.lower()
            assert body == b"\x03\x00\x00\x00one\x01\x00\x00\x00\xff"
            # A fence is idempotent, so it is retried, and still unknown.
            with pytest.raises(fencelog.OutcomeUnknown):
                c.fence("s", 7)
            assert len(srv.requests) == 4
            # A read has no outcome to be unsure of: a plain TransportError.
            with pytest.raises(fencelog.TransportError) as read:
                c.state("s")
            assert not isinstance(read.value, (fencelog.OutcomeUnknown, fencelog.ConnectionFailed))
    finally:
        srv.close()


def _unread_bytes_at(port: int) -> int:
    """Bytes the kernel holds for a listening process on ``port`` that it
    has not read (rx_queue in /proc/net/tcp)."""
    total = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if int(local.split(":")[1], 16) == port and state == "01":  # ESTABLISHED
                total += int(queues.split(":")[1], 16)
    return total


def test_outcome_unknown_when_the_server_dies_mid_request(spawn, stream: str) -> None:
    s = spawn()
    with fencelog.Client(s.url) as c:
        c.append(stream, 1, "before")  # leaves a pooled keep-alive connection
        os.kill(s.pid, signal.SIGSTOP)  # the server stops reading, mid-flight
        outcome: Dict[str, Optional[BaseException]] = {}

        def send() -> None:
            try:
                c.append(stream, 1, "in flight")
                outcome["error"] = None
            except BaseException as e:  # noqa: BLE001 - inspected below
                outcome["error"] = e

        t = threading.Thread(target=send)
        t.start()
        # No signal says "the request is in the server's socket"; the
        # kernel's receive queue does, so poll it, bounded.
        deadline = time.monotonic() + 10
        while _unread_bytes_at(s.port) == 0:
            assert time.monotonic() < deadline, "the append never reached the server's socket"
            time.sleep(0.01)
        s.kill9()
        t.join(30)
        assert isinstance(outcome["error"], fencelog.OutcomeUnknown), outcome
        s.start()
        # Unknown really was unknown: this time the server never read it.
        # match_seq_num makes the retry safe either way.
        assert c.state(stream).next_seq == 1
        assert c.append(stream, 1, "in flight", match_seq_num=1).first_seq == 1
        assert [r.body for r in c.iter_records(stream)] == [b"before", b"in flight"]
