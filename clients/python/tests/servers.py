"""Real processes for the tests: the fencelog binary and etcd, each started
on a free loopback port in a temporary directory and stopped by its own PID.

Readiness comes from the processes themselves — fencelog prints
``listening on ADDR`` once it accepts connections, etcd logs ``ready to
serve client requests`` — so nothing here sleeps in the hope that a server
is up.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence

CLIENT_DIR = Path(__file__).resolve().parent.parent
START_DEADLINE_S = 30.0


def fencelog_bin() -> Path:
    """The binary under test: ``$FENCELOG_BIN``, else the workspace's debug
    build, relative to this client's directory."""
    env = os.environ.get("FENCELOG_BIN")
    path = Path(env) if env else CLIENT_DIR / "../../target/debug/fencelog"
    if not env and not path.is_absolute():
        path = CLIENT_DIR / path
    return path.resolve()


def missing_binary_message(path: Path) -> str:
    return (
        f"fencelog binary not found at {path}: these tests run against the real server. "
        "Build it (`cargo build` at the workspace root) or point FENCELOG_BIN at one."
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Lines:
    """Reads a child's output on a thread: every line goes to a log file and
    to a queue the test can wait on, and the pipe never fills up."""

    def __init__(self, pipe, log: Path) -> None:
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self._log = log
        self._thread = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self._thread.start()

    def _run(self, pipe) -> None:
        with open(self._log, "a", encoding="utf-8", errors="replace") as log:
            for raw in iter(pipe.readline, b""):
                line = raw.decode("utf-8", "replace")
                log.write(line)
                log.flush()
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, predicate: Callable[[str], bool], deadline: float) -> Optional[str]:
        """The first line matching, or None if the output ended first."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                raise TimeoutError from None
            if line is None:
                return None
            if predicate(line):
                return line


class FencelogServer:
    """``fencelog serve`` on a data directory. ``start`` binds port 0 the
    first time and the same port on restarts, so clients (and live tails)
    pointed at ``url`` reach the restarted server."""

    def __init__(
        self,
        data_dir: Path,
        *,
        args: Sequence[str] = (),
        preexec_fn: Optional[Callable[[], None]] = None,
    ) -> None:
        self.bin = fencelog_bin()
        if not self.bin.exists():
            raise AssertionError(missing_binary_message(self.bin))
        self.data_dir = data_dir
        self.args = list(args)
        self.preexec_fn = preexec_fn
        self.log = data_dir.parent / f"{data_dir.name}.log"
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> "FencelogServer":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        cmd = [str(self.bin), "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data_dir)]
        with open(self.log, "a") as log:
            log.write(f"--- start {self.starts}: {' '.join(cmd + self.args)}\n")
        with open(self.log, "ab") as stderr:
            self.proc = subprocess.Popen(
                cmd + self.args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                preexec_fn=self.preexec_fn,
            )
        out = _Lines(self.proc.stdout, self.log)
        try:
            line = out.wait_for(lambda l: l.startswith("listening on "), time.monotonic() + START_DEADLINE_S)
        except TimeoutError:
            self.kill9()
            raise AssertionError(f"fencelog did not print 'listening on' within {START_DEADLINE_S} s; log:\n{self.log_text()}")
        if line is None:
            self.proc.wait()
            raise AssertionError(f"fencelog exited with {self.proc.returncode} before listening; log:\n{self.log_text()}")
        port = int(line.rsplit(":", 1)[1])
        assert self.port in (0, port), f"restarted on port {port}, not {self.port}"
        self.port = port
        return self

    def kill9(self) -> None:
        """SIGKILL by PID: no shutdown path runs, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int:
        """SIGTERM by PID and wait: the graceful shutdown path."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()
                raise AssertionError("fencelog did not stop within 30 s of SIGTERM")
        return self.proc.returncode

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"


def etcd_bin() -> Path:
    env = os.environ.get("ETCD_BIN")
    found = env or shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    if not found:
        raise AssertionError(
            "etcd is not installed, so the stale-worker story cannot run against a real lease "
            "service. Install it (Debian: apt-get install -y etcd-server) or set ETCD_BIN."
        )
    return Path(found)


class EtcdServer:
    """A one-member etcd on free loopback ports."""

    def __init__(self, workdir: Path) -> None:
        self.bin = etcd_bin()
        self.workdir = workdir
        self.log = workdir / "etcd.log"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "EtcdServer":
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd: List[str] = [
            str(self.bin),
            "--name", "story",
            "--data-dir", str(self.workdir / "etcd-data"),
            "--listen-client-urls", self.url,
            "--advertise-client-urls", self.url,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"story={peer}",
        ]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        lines = _Lines(self.proc.stderr, self.log)
        try:
            ready = lines.wait_for(lambda l: "ready to serve client requests" in l, time.monotonic() + START_DEADLINE_S)
        except TimeoutError:
            self.stop()
            raise AssertionError(f"etcd not ready within {START_DEADLINE_S} s; log:\n{self.log.read_text()}")
        if ready is None:
            self.proc.wait()
            raise AssertionError(f"etcd exited with {self.proc.returncode}; log:\n{self.log.read_text()}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class AnswerDroppingProxy:
    """A TCP proxy to a fencelog server that, on the first connection after
    :meth:`arm` (armed from the start), forwards the request but closes both
    sides as soon as the server's answer starts arriving: the server did
    answer, so the write was decided, and the client never hears it. Every
    other connection is passed through. ``dropped`` is set once it has
    dropped an answer. Stopped by :meth:`close` (its own sockets only)."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.dropped = threading.Event()
        self._armed = True
        self._lock = threading.Lock()
        self._sockets: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        with self._lock:
            self._armed = True
        self.dropped.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self._upstream)
            with self._lock:
                drop, self._armed = self._armed, False
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            back = self._drop if drop else self._pump
            threading.Thread(target=back, args=(server, client), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _drop(self, server: socket.socket, client: socket.socket) -> None:
        try:
            # The answer's first byte: decided; dropped unread.
            answered = server.recv(1) != b""
        except OSError:
            answered = False
        if answered:
            # Before the client can see the connection close.
            self.dropped.set()
        for s in (client, server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
