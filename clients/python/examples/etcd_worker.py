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
    fenced out: token=T highest=H next_seq=N     (then exits 3)
    finished token=T appended=N                  (input ended; lock released)

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

#: Exit code when fenced out, the same as the fencelog CLI's.
EXIT_FENCED = 3
ACQUIRE_POLL_S = 0.1


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def connect(url: str) -> etcd3gw.Etcd3Client:
    u = urlparse(url)
    return etcd3gw.Etcd3Client(host=u.hostname or "127.0.0.1", port=u.port or 2379, protocol=u.scheme or "http", timeout=10)


def acquire(etcd: etcd3gw.Etcd3Client, key: str, owner: str, ttl: int) -> Tuple[Lease, int]:
    """Takes the lock: creates ``key`` bound to a fresh lease, waiting while
    someone else's key exists. Returns the lease and the fencing token."""
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
            return lease, int(kv["create_revision"])
        # The lease we will hold the lock with must not expire while we wait.
        lease.refresh()
        time.sleep(ACQUIRE_POLL_S)


def keep_alive(lease: Lease, every_s: float, lost: threading.Event) -> None:
    """Renews the lease until etcd says it is gone. When the process is
    paused this thread is paused too, and the lease expires: exactly the
    failure fencing exists for."""
    while not lost.is_set():
        time.sleep(every_s)
        try:
            if lease.refresh() <= 0:
                break
        except etcd3gw.exceptions.Etcd3Exception:
            break
    lost.set()
    print(f"lease {lease.id} lost", file=sys.stderr, flush=True)


def say(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    etcd = connect(args.etcd)
    lease, token = acquire(etcd, args.lock_key, args.name, args.ttl)
    lost = threading.Event()
    threading.Thread(target=keep_alive, args=(lease, max(args.ttl / 3, 0.1), lost), daemon=True).start()

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
        appended = 0
        for line in sys.stdin:
            try:
                ack = log.append(args.stream, token, line.rstrip("\n"))
            except fencelog.StaleFencingToken as e:
                return fenced_out(e)
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
    try:
        return run(p.parse_args(argv))
    except fencelog.FencelogError as e:
        print(f"fencelog: {e!r}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
