#!/usr/bin/env python3
"""Sends N appends of one 100-byte record through ONE pipelined append
session (GET /v1/streams/session/session, a WebSocket; the layouts are
fencelog_api::session's), all sent before the first answer is read, then
the end message, and checks every answer: accepted, numbered in order, at
seq n. Used by server_ab.sh (mode `session`), which runs the server under
callgrind.

    session_appends.py PORT N
"""
import base64
import os
import socket
import struct
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])
sock = socket.create_connection(("127.0.0.1", port))
key = base64.b64encode(os.urandom(16)).decode()
sock.sendall(
    (
        "GET /v1/streams/session/session HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: fencelog.append.v1\r\n\r\n"
    ).encode()
)
buf = b""
while b"\r\n\r\n" not in buf:
    buf += sock.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
assert head.startswith(b"HTTP/1.1 101"), head


def frame(payload):
    # A client frame must be masked; a zero mask leaves the payload as is.
    assert len(payload) < 126
    return bytes([0x82, 0x80 | len(payload)]) + b"\0\0\0\0" + payload


append = frame(struct.pack("<BBQQ", 1, 0, 1, 0) + b"x" * 100)
sock.sendall(append * n + frame(b"\x02"))


def read_exact(k):
    global buf
    while len(buf) < k:
        chunk = sock.recv(65536)
        assert chunk, "closed early"
        buf += chunk
    out, buf = buf[:k], buf[k:]
    return out


for i in range(n):
    b0, b1 = read_exact(2)
    assert b0 == 0x82 and b1 == 49, (i, b0, b1)
    kind, num, first = struct.unpack("<BQQ", read_exact(49)[:17])
    # Every append is checked: a refused one would make the count a lie.
    assert (kind, num, first) == (1, i, i), (kind, num, first)
b0, _ = read_exact(2)
assert b0 & 0x0F == 0x8, "a close after the last answer"
