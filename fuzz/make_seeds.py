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

def header(index, first_group):
    b = b"FENCELOG" + struct.pack("<IIQQI", 1, 0, index, first_group, 0)
    return b + struct.pack("<I", zlib.crc32(b))

seeds = {
    "records_one": frame(1, True, 1, 0, 41, 1_700_000_000_000, "orders", [b"hello"]),
    "records_many": frame(1, False, 9, 17, 42, 1, "a.b:c_d-e", [b"", b"\xff\x00", b"x" * 300]),
    "fence": frame(2, True, 3, 5, 2**62, 2, "s", []),
    "segment_header": header(7, 99),
}
seeds["two_frames"] = seeds["records_one"] + seeds["fence"]
seeds["truncated"] = seeds["records_many"][:70]
flipped = bytearray(seeds["records_one"]); flipped[30] ^= 4
seeds["bit_flip"] = bytes(flipped)
seeds["zeros"] = bytes(64)

os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {OUT}")
