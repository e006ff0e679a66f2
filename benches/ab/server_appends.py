#!/usr/bin/env python3
"""Sends N awaited raw appends of one 100-byte record over one keep-alive
connection: plain ones, or each carrying Producer-Id/Producer-Seq (issue
11). Used by server_ab.sh, which runs the server under callgrind.

    server_appends.py PORT N plain|producer
"""
import http.client
import sys

port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port)
body = b"x" * 100
for i in range(n):
    headers = {"content-type": "application/octet-stream", "Fencing-Token": "1"}
    if mode == "producer":
        headers["Producer-Id"] = "worker-a"
        headers["Producer-Seq"] = str(i)
    conn.request("POST", f"/v1/streams/{mode}/records", body=body, headers=headers)
    resp = conn.getresponse()
    answer = resp.read()
    # Every append is checked: a refused one would make the count a lie.
    assert resp.status == 200, (resp.status, answer)
