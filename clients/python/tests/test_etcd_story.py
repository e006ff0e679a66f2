"""The stale-worker story end to end, with real parts: worker A holds an
etcd lease and writes; A is frozen (SIGSTOP) past its lease; worker B takes
the lock with a higher token and writes; A wakes up and its late write is
refused with StaleFencingToken. The workers are examples/etcd_worker.py run
as processes."""

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
    def __init__(self, name: str, etcd_url: str, server_url: str, log_dir: Path) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "--etcd", etcd_url, "--server", server_url,
             "--stream", STREAM, "--lock-key", LOCK_KEY, "--name", name, "--ttl", str(TTL_S)],
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
