"""The stale-worker story end to end, with real parts: worker A holds an
etcd lease and writes; A is frozen (SIGSTOP) past its lease; worker B takes
the lock with a higher token and writes; A wakes up and its late write is
refused with StaleFencingToken, and the producer lookup tells it what of
its own landed. And deadlines: A frozen past its lease with no
successor yet is refused by its own not_after_ms (deadline_exceeded). The
workers are examples/etcd_worker.py run as processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

import etcd3gw
import pytest

import fencelog
from servers import CLIENT_DIR, EtcdServer, _Lines

WORKER = CLIENT_DIR / "examples" / "etcd_worker.py"
STREAM = "invoices"
LOCK_KEY = "fencelog/locks/invoices"
TTL_S = 2
#: etcd expires leases on its own schedule; allow slack on a busy machine.
LINE_DEADLINE_S = 30.0


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    e = EtcdServer(tmp_path).start()
    yield e
    e.stop()


class Worker:
    def __init__(self, name: str, etcd_url: str, server_url: str, log_dir: Path, *extra: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "--etcd", etcd_url, "--server", server_url,
             "--stream", STREAM, "--lock-key", LOCK_KEY, "--name", name, "--ttl", str(TTL_S), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log_dir / f"{name}.err", "wb"),
        )
        self.out = _Lines(self.proc.stdout, log_dir / f"{name}.out")

    def line(self) -> str:
        """The worker's next progress line; its own output is the signal."""
        try:
            line: Optional[str] = self.out.wait_for(lambda _: True, time.monotonic() + LINE_DEADLINE_S)
        except TimeoutError:
            raise AssertionError(f"worker {self.name} printed nothing within {LINE_DEADLINE_S} s") from None
        assert line is not None, f"worker {self.name} exited with {self.proc.wait()}"
        return line

    def send(self, record: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(record.encode() + b"\n")
        self.proc.stdin.flush()

    def finish(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=LINE_DEADLINE_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)  # also ends a stopped process
            self.proc.wait()


def token_of(line: str) -> int:
    assert line.startswith("acquired token="), line
    return int(line.split("=", 1)[1])


def test_a_paused_worker_is_fenced_out(spawn, etcd: EtcdServer, tmp_path: Path) -> None:
    server = spawn()
    a = Worker("worker-a", etcd.url, server.url, tmp_path)
    b: Optional[Worker] = None
    try:
        token_a = token_of(a.line())
        a.send("A: invoice 1001 drafted")
        assert a.line() == f"appended seq=0 token={token_a}"

        # A freezes — a GC pause, a stopped VM — and its keep-alives stop.
        os.kill(a.proc.pid, signal.SIGSTOP)
        # B waits for the lock; its acquisition is the sign that etcd
        # expired A's lease.
        b = Worker("worker-b", etcd.url, server.url, tmp_path)
        token_b = token_of(b.line())
        assert token_b > token_a
        b.send("B: invoice 1001 sent")
        assert b.line() == f"appended seq=1 token={token_b}"

        # A wakes up and carries on exactly where it stopped, with
        # authority it no longer has.
        a.send("A: invoice 1001 cancelled")
        os.kill(a.proc.pid, signal.SIGCONT)
        assert a.line() == f"fenced out: token={token_a} highest={token_b} next_seq=2"
        # "Did my write land?": the producer lookup names A's first record,
        # nothing later.
        assert a.line() == f"last landed: producer_seq=0 seq=0..=0 token={token_a}"
        assert a.proc.wait(timeout=LINE_DEADLINE_S) == 3

        # The stream holds only what the rightful owners wrote.
        with fencelog.Client(server.url) as log:
            assert [(r.seq, r.fencing_token, r.body) for r in log.iter_records(STREAM)] == [
                (0, token_a, b"A: invoice 1001 drafted"),
                (1, token_b, b"B: invoice 1001 sent"),
            ]
            assert log.state(STREAM).highest_token == token_b
            # What A got, seen through the client directly.
            with pytest.raises(fencelog.StaleFencingToken) as stale:
                log.append(STREAM, token_a, "A: once more")
            e = stale.value
            assert (e.presented_token, e.highest_token, e.next_seq) == (token_a, token_b, 2)

        # A's late wake-up changed nothing in etcd: the lock is B's.
        lock = etcd3gw.Etcd3Client(host="127.0.0.1", port=etcd.client_port)
        [(value, meta)] = lock.get(LOCK_KEY, metadata=True)
        assert (value, int(meta["create_revision"])) == (b"worker-b", token_b)

        # B finishes normally and releases the lock.
        b.send("B: invoice 1002 drafted")
        assert b.line() == f"appended seq=2 token={token_b}"
        assert b.finish() == 0
        assert b.line() == f"finished token={token_b} appended=2"
        assert lock.get(LOCK_KEY) == []
    finally:
        a.kill()
        if b is not None:
            b.kill()


def wait_gone(etcd: EtcdServer, key: str) -> None:
    """Until etcd has deleted ``key`` (its lease expired): a watch from the
    revision after the key's last change, so a deletion that happened
    before the watch started is reported too."""
    lock = etcd3gw.Etcd3Client(host="127.0.0.1", port=etcd.client_port)
    found = lock.get(key, metadata=True)
    if not found:
        return
    after = int(found[0][1]["mod_revision"]) + 1
    event = lock.watch_once(key, timeout=LINE_DEADLINE_S, start_revision=after, filters=["NOPUT"])
    assert event.get("type") == "DELETE", event
    assert lock.get(key) == []


def test_an_owner_past_its_lease_is_refused_by_its_deadline_before_any_successor(
    spawn, etcd: EtcdServer, tmp_path: Path
) -> None:
    server = spawn()
    margin = ("--deadline-margin-ms", "100")
    a = Worker("worker-a", etcd.url, server.url, tmp_path, *margin)
    b: Optional[Worker] = None
    try:
        token_a = token_of(a.line())
        a.send("A: invoice 1001 drafted")
        assert a.line() == f"appended seq=0 token={token_a}"
        # A freezes and its lease runs out; nobody takes over yet.
        os.kill(a.proc.pid, signal.SIGSTOP)
        wait_gone(etcd, LOCK_KEY)
        a.send("A: invoice 1001 cancelled")
        os.kill(a.proc.pid, signal.SIGCONT)
        # fencelog's clock is past A's lease: refused by A's own deadline,
        # though A's token is still the highest.
        line = a.line()
        assert line.startswith(f"lease expired: token={token_a} writer_ms="), line
        assert a.proc.wait(timeout=LINE_DEADLINE_S) == 3
        with fencelog.Client(server.url) as log:
            state = log.state(STREAM)
            assert (state.next_seq, state.highest_token) == (1, token_a)
            landed = log.producer(STREAM, "worker-a")
            assert landed is not None and (landed.producer_seq, landed.first_seq) == (0, 0)
            writer_ms = int(line.rsplit("=", 1)[1])
            assert writer_ms > landed.timestamp_ms
        # The successor continues where A's last record ended.
        b = Worker("worker-b", etcd.url, server.url, tmp_path, *margin)
        token_b = token_of(b.line())
        b.send("B: invoice 1001 sent")
        assert b.line() == f"appended seq=1 token={token_b}"
        assert b.finish() == 0
        assert b.line() == f"finished token={token_b} appended=1"
        with fencelog.Client(server.url) as log:
            assert [(r.seq, r.fencing_token, r.body) for r in log.iter_records(STREAM)] == [
                (0, token_a, b"A: invoice 1001 drafted"),
                (1, token_b, b"B: invoice 1001 sent"),
            ]
    finally:
        a.kill()
        if b is not None:
            b.kill()
