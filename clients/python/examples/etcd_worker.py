#!/usr/bin/env python3
"""A fenced worker: it takes a lock in etcd, uses the lock's creation
revision as its fencing token, and writes one fencelog record per line of
standard input.

    pip install './clients/python[examples]'
    python etcd_worker.py --etcd http://127.0.0.1:2379 --server http://127.0.0.1:7070 \\
        --stream invoices --lock-key locks/invoices --name worker-a

It prints one line per step, for people and for the test that drives it:

    acquired token=T
    appended seq=S token=T
    fenced out: token=T highest=H next_seq=N     (then what landed last:)
    last landed: producer_seq=P seq=F..=L token=T2   (or: last landed: none; exits 3)
    lease expired: token=T writer_ms=W           (then exits 3)
    finished token=T appended=N                  (input ended; lock released)

Exactly once, and deadlines: the worker appends through an
idempotent producer whose id is its name, so an append whose answer is
lost is sent again with the same producer_seq and the server answers it as
a duplicate instead of writing it twice. Every append carries
``not_after_ms``: the lease's expiry as this worker last renewed it (the
time just before the successful renewal was sent, plus the TTL — etcd
starts the TTL later, when it handles it) minus ``--deadline-margin-ms``
for clock skew. A write that reaches fencelog after the lease may have
ended is refused (``lease expired``) even before a successor has fenced.
Fenced out, the worker asks "did my write land?" (the producer lookup) and
prints the answer before it stops.

Why the token is the key's create revision: etcd keeps one revision counter
for the whole keyspace, advanced by every write through Raft and persisted,
so it never repeats or goes back. A new owner can only create the lock key
after the old key is gone (its lease expired, or it was released — itself a
write), and creating it is another write, so every acquisition's create
revision is greater than all earlier ones. Gaps are harmless: fencelog only
compares order. Lease IDs are unique but not ordered, so they are not tokens.

Why the worker never asks "do I still hold the lease?" before a write: the
answer can go stale between the check and the write reaching the store — a
GC pause, a frozen VM, a slow network. fencelog checks the token atomically
with the write, so the worker presents its token and treats
``StaleFencingToken`` as "a newer owner took over: stop".

The lock goes through etcd3gw, a maintained client of etcd's v3 JSON
gateway (no gRPC stack needed).
"""

from __future__ import annotations

import argparse
import base64
import sys
import threading
import time
from typing import Optional, Tuple
from urllib.parse import urlparse

import etcd3gw
from etcd3gw.lease import Lease

import fencelog

#: Exit code when fenced out (or past the lease), the same as the fencelog CLI's.
EXIT_FENCED = 3
ACQUIRE_POLL_S = 0.1
DEADLINE_MARGIN_MS = 500


def now_ms() -> int:
    return int(time.time() * 1000)


class Expiry:
    """The lease's expiry as last renewed, in Unix ms; only moves forward."""

    def __init__(self, ms: int) -> None:
        self._ms = ms
        self._lock = threading.Lock()

    def renewed(self, ms: int) -> None:
        with self._lock:
            self._ms = max(self._ms, ms)

    @property
    def ms(self) -> int:
        with self._lock:
            return self._ms


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def connect(url: str) -> etcd3gw.Etcd3Client:
    u = urlparse(url)
    return etcd3gw.Etcd3Client(host=u.hostname or "127.0.0.1", port=u.port or 2379, protocol=u.scheme or "http", timeout=10)


def acquire(etcd: etcd3gw.Etcd3Client, key: str, owner: str, ttl: int) -> Tuple[Lease, int, int]:
    """Takes the lock: creates ``key`` bound to a fresh lease, waiting while
    someone else's key exists. Returns the lease, the fencing token, and
    when (Unix ms) the lease's last grant or renewal was sent."""
    renewed = now_ms()
    lease = etcd.lease(ttl)
    k = b64(key)
    while True:
        # Create-if-absent, and read the key back in the same transaction:
        # its create_revision is ours, with no window in which another
        # owner's key could be read instead.
        result = etcd.transaction({
            "compare": [{"key": k, "result": "EQUAL", "target": "CREATE", "create_revision": 0}],
            "success": [
                {"request_put": {"key": k, "value": b64(owner), "lease": lease.id}},
                {"request_range": {"key": k}},
            ],
            "failure": [{"request_range": {"key": k}}],
        })
        if result.get("succeeded"):
            kv = result["responses"][1]["response_range"]["kvs"][0]
            return lease, int(kv["create_revision"]), renewed
        # The lease we will hold the lock with must not expire while we wait.
        sent = now_ms()
        if lease.refresh() > 0:
            renewed = sent
        time.sleep(ACQUIRE_POLL_S)


def keep_alive(lease: Lease, ttl_ms: int, expiry: Expiry, lost: threading.Event) -> None:
    """Renews the lease until etcd says it is gone, moving ``expiry`` on
    after each renewal. When the process is paused this thread is paused
    too, and the lease expires: exactly the failure fencing exists for."""
    every_s = max(ttl_ms / 3000, 0.1)
    while not lost.is_set():
        time.sleep(every_s)
        sent = now_ms()
        try:
            if lease.refresh() <= 0:
                break
        except etcd3gw.exceptions.Etcd3Exception:
            break
        expiry.renewed(sent + ttl_ms)
    lost.set()
    print(f"lease {lease.id} lost", file=sys.stderr, flush=True)


def say(line: str) -> None:
    print(line, flush=True)


def last_landed(log: fencelog.Client, stream: str, name: str) -> str:
    """"Did my write land?": the producer lookup, as the worker reports it."""
    p = log.producer(stream, name)
    if p is None:
        return "last landed: none"
    return f"last landed: producer_seq={p.producer_seq} seq={p.first_seq}..={p.last_seq} token={p.fencing_token}"


def run(args: argparse.Namespace) -> int:
    etcd = connect(args.etcd)
    ttl_ms = args.ttl * 1000
    lease, token, renewed = acquire(etcd, args.lock_key, args.name, args.ttl)
    expiry = Expiry(renewed + ttl_ms)
    lost = threading.Event()
    threading.Thread(target=keep_alive, args=(lease, ttl_ms, expiry, lost), daemon=True).start()

    with fencelog.Client(args.server) as log:
        def fenced_out(e: fencelog.StaleFencingToken) -> int:
            say(f"fenced out: token={token} highest={e.highest_token} next_seq={e.next_seq}")
            # No release: the lease is already gone, and the key may be the
            # new owner's.
            return EXIT_FENCED

        try:
            # Fence first, so older owners are shut out even before this one
            # writes anything.
            log.fence(args.stream, token)
        except fencelog.StaleFencingToken as e:
            return fenced_out(e)
        say(f"acquired token={token}")
        # Named after the worker: a restarted worker continues its count.
        producer = fencelog.Producer.start(log, args.stream, args.name, token)
        appended = 0
        for line in sys.stdin:
            producer.not_after_ms = expiry.ms - args.deadline_margin_ms
            try:
                ack = producer.append(line.rstrip("\n"))
            except fencelog.StaleFencingToken as e:
                code = fenced_out(e)
                say(last_landed(log, args.stream, args.name))
                return code
            except fencelog.DeadlineExceeded as e:
                # fencelog's clock is past the lease as this worker last saw
                # it: the lease may be over, whether or not anyone took over.
                say(f"lease expired: token={token} writer_ms={e.writer_ms}")
                return EXIT_FENCED
            appended += 1
            say(f"appended seq={ack.first_seq} token={token}")
        say(f"finished token={token} appended={appended}")
    lost.set()
    # Revoking the lease deletes the key, so the next owner need not wait
    # out the TTL.
    lease.revoke()
    return 0


def main(argv: Optional[list] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--etcd", default="http://127.0.0.1:2379", help="etcd client URL")
    p.add_argument("--server", default="http://127.0.0.1:7070", help="fencelog URL")
    p.add_argument("--stream", required=True, help="the fencelog stream this worker owns")
    p.add_argument("--lock-key", required=True, help="the etcd key that is the lock")
    p.add_argument("--name", required=True, help="this worker's name, stored as the lock's value")
    p.add_argument("--ttl", type=int, default=5, help="lease TTL in seconds")
    p.add_argument(
        "--deadline-margin-ms",
        type=int,
        default=DEADLINE_MARGIN_MS,
        help="appends carry not_after_ms = the lease's expiry as last renewed minus this (clock skew)",
    )
    try:
        return run(p.parse_args(argv))
    except fencelog.FencelogError as e:
        print(f"fencelog: {e!r}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
