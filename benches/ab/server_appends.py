#!/usr/bin/env python3
"""Sends N awaited appends of one 100-byte record over one keep-alive
connection: plain ones, or each carrying an idempotent producer's id and seq;
raw bodies with headers (Fencing-Token, Producer-Id, Producer-Seq), or
JSON bodies with the fields. Used by server_ab.sh, which runs the server
under callgrind.

    server_appends.py PORT N plain|producer|plain-json|producer-json
"""
import http.client
import json
import sys

port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port)
body = b"x" * 100
for i in range(n):
    if mode.endswith("-json"):
        doc = {"fencing_token": 1, "records": [{"body": body.decode()}]}
        if mode.startswith("producer"):
            doc.update(producer_id="worker-a", producer_seq=i)
        headers = {"content-type": "application/json"}
        payload = json.dumps(doc).encode()
    else:
        headers = {"content-type": "application/octet-stream", "Fencing-Token": "1"}
        if mode == "producer":
            headers["Producer-Id"] = "worker-a"
            headers["Producer-Seq"] = str(i)
        payload = body
    conn.request("POST", f"/v1/streams/{mode}/records", body=payload, headers=headers)
    resp = conn.getresponse()
    answer = resp.read()
    # Every append is checked: a refused one would make the count a lie.
    assert resp.status == 200, (resp.status, answer)
