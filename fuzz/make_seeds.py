#!/usr/bin/env python3
"""Writes the seed corpus for the frame_decoder target from the byte layout
documented in ARCHITECTURE.md, independently of the Rust encoder: if the
two ever disagree, the corpus replay test fails."""
import os, struct, zlib

OUT = os.path.join(os.path.dirname(__file__), "corpus", "frame_decoder")

def frame(kind, last, group, first_seq, token, ts, name, bodies):
    name = name.encode()
    recs = b"".join(struct.pack("<I", len(b)) + b for b in bodies)
    length = 56 + len(name) + len(recs)
    rest = struct.pack("<IBBHQQQQII", length, kind, 1 if last else 0, len(name),
                       group, first_seq, token, ts, len(bodies), 0) + name + recs
    return struct.pack("<II", 0x46524D31, zlib.crc32(rest)) + rest

def frame_with_headers(last, group, first_seq, token, ts, name, records):
    """Kind 1 with flag HEADERS (4): per record u16 header_count, per header
    u16 name_len, name, u32 value_len, value; then u32 body_len, body."""
    name = name.encode()
    recs = b""
    for headers, body in records:
        recs += struct.pack("<H", len(headers))
        for n, v in headers:
            recs += struct.pack("<H", len(n)) + n + struct.pack("<I", len(v)) + v
        recs += struct.pack("<I", len(body)) + body
    length = 56 + len(name) + len(recs)
    flags = 4 | (1 if last else 0)
    rest = struct.pack("<IBBHQQQQII", length, 1, flags, len(name),
                       group, first_seq, token, ts, len(records), 0) + name + recs
    return struct.pack("<II", 0x46524D31, zlib.crc32(rest)) + rest

def header(index, first_group):
    b = b"FENCELOG" + struct.pack("<IIQQI", 1, 0, index, first_group, 0)
    return b + struct.pack("<I", zlib.crc32(b))

seeds = {
    "records_one": frame(1, True, 1, 0, 41, 1_700_000_000_000, "orders", [b"hello"]),
    "records_many": frame(1, False, 9, 17, 42, 1, "a.b:c_d-e", [b"", b"\xff\x00", b"x" * 300]),
    "fence": frame(2, True, 3, 5, 2**62, 2, "s", []),
    "segment_header": header(7, 99),
    "records_headers": frame_with_headers(True, 4, 3, 43, 5, "traced", [
        ([(b"trace-id", b"abc"), (b"trace-id", b""), (b"bin\xff", b"\x00\xfe")], b"one"),
        ([], b"two"),
    ]),
}
seeds["two_frames"] = seeds["records_one"] + seeds["fence"]
seeds["truncated"] = seeds["records_many"][:70]
flipped = bytearray(seeds["records_one"]); flipped[30] ^= 4
seeds["bit_flip"] = bytes(flipped)
seeds["zeros"] = bytes(64)

def write(target, items):
    out = os.path.join(os.path.dirname(__file__), "corpus", target)
    os.makedirs(out, exist_ok=True)
    for name, data in items.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(items)} seeds to {out}")

write("frame_decoder", seeds)

# recovery: the first byte picks the layout (see fuzz_targets::recovery).
g1 = frame(1, False, 1, 0, 41, 10, "orders", [b"a", b"b"]) + frame(2, True, 1, 0, 7, 10, "locks", [])
g2 = frame(1, True, 2, 2, 42, 11, "orders", [b"c"])
g3 = frame_with_headers(True, 3, 3, 42, 12, "orders", [([(b"k", b"v")], b"h")])
torn = frame(1, True, 3, 3, 42, 12, "orders", [b"d" * 40])[:50]
write("recovery", {
    "whole_segment": b"\x00" + header(0, 1) + g1 + g2,
    "frames_after_header": b"\x01" + g1 + g2,
    "torn_tail": b"\x01" + g1 + g2 + torn,
    "zero_tail": b"\x01" + g1 + bytes(100),
    "two_segments": b"\x02" + g1 + header(1, 2) + g2,
    "mid_log_flip": b"\x01" + g1[:20] + bytes([g1[20] ^ 1]) + g1[21:] + g2,
    "empty": b"\x00",
    "with_headers": b"\x01" + g1 + g2 + g3,
})

write("http_append_body", {
    "ok": b'{"fencing_token": 42, "records": [{"body": "hi"}, {"body_base64": "/wA="}], "match_seq_num": 3}',
    "zero_token": b'{"fencing_token": 0, "records": [{"body": "x"}]}',
    "big_token": b'{"fencing_token": 18446744073709551616, "records": [{"body": "x"}]}',
    "float_token": b'{"fencing_token": 4.0, "records": [{"body": "x"}]}',
    "empty_records": b'{"fencing_token": 1, "records": []}',
    "bad_base64": b'{"fencing_token": 1, "records": [{"body_base64": "***"}]}',
    "name": b"orders.eu-west:2_a",
    "bad_name": b"../etc/passwd",
})

# http_front_head: the first byte picks the cap (64 bytes a unit); the rest
# is what a connection has sent so far.
APPEND = (b"POST /v1/streams/s/records HTTP/1.1\r\nHost: t\r\nFencing-Token: 3\r\n"
          b"Content-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\nhello")
write("http_front_head", {
    "append": b"\x7f" + APPEND,
    "pipelined": b"\x7f" + APPEND + APPEND,
    "cut_in_body": b"\x7f" + APPEND[:-2],
    "over_cap": b"\x01" + APPEND,
    "get_no_length": b"\x7f" + b"GET /v1/streams/s/records?start_seq=0 HTTP/1.1\r\nHost: t\r\n\r\n",
    "two_lengths": b"\x7f" + APPEND.replace(b"Content-Length: 5", b"Content-Length: 5\r\nContent-Length: 5"),
    "chunked": b"\x7f" + APPEND.replace(b"Content-Length: 5", b"Transfer-Encoding: chunked"),
    "close": b"\x7f" + APPEND.replace(b"Host: t", b"Host: t\r\nConnection: close"),
    "bad_uri": b"\x7f" + b'GET /a?x="1" HTTP/1.1\r\nHost: t\r\n\r\n',
    "bare_lf": b"\x7f" + b"GET /healthz HTTP/1.1\nHost: t\n\n",
})

# ops_model: 3 bytes an operation (op, x, y); see fuzz_targets::ops_model.
write("ops_model", {
    "append_fence_crash": bytes([0, 1, 2, 16, 3, 1, 2, 5, 0, 0, 0, 1, 3, 0, 2, 0, 2, 4]),
    "stale_after_fence": bytes([2, 7, 0, 0, 1, 0, 0, 7, 3, 3, 1, 1]),
    "random_crashes": bytes([0, 1, 9, 3, 2, 2, 1, 1, 0, 19, 200, 5, 0, 3, 3]),
    # y >= 128: the append's records carry headers.
    "headers_crash": bytes([0, 1, 130, 1, 1, 129, 3, 0, 1, 16, 2, 200, 3, 1, 2]),
})
