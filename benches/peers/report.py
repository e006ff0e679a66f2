#!/usr/bin/env python3
"""Turns results.jsonl (one `fencelog bench --json` line per run, plus the
system name) into results.md (one table, ratios against the targets)
and throughput.svg (appends/s against clients), standard library only."""

import json
import sys
from pathlib import Path

SYSTEMS = ["fencelog", "postgres", "redis", "nats"]
COLORS = {"fencelog": "#1f77b4", "postgres": "#2ca02c", "redis": "#d62728", "nats": "#9467bd"}


def load(path):
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def is_binary(r):
    return r.get("encoding") == "binary"


def find_all(rows, system, workload, clients, batch=1, binary=False, tails=1):
    return [
        r for r in rows
        if (r["system"], r["workload"], r["clients"], r["batch"]) == (system, workload, clients, batch)
        and is_binary(r) == binary and r.get("tails_per_stream", 1) == tails
    ]


def find(rows, system, workload, clients, batch=1, binary=False, tails=1):
    found = find_all(rows, system, workload, clients, batch, binary, tails)
    return found[0] if found else None


def fmt_rate(x):
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def fmt_us(us):
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us} µs"


ROWS = [
    ("append, 1 client", "append", 1, 1, "appends"),
    ("append, 4 clients", "append", 4, 1, "appends"),
    ("append, 16 clients", "append", 16, 1, "appends"),
    ("append, 64 clients", "append", 64, 1, "appends"),
    ("batches of 16, 16 clients (records/s)", "append", 16, 16, "records"),
    ("batches of 16, 64 clients (records/s)", "append", 64, 16, "records"),
    ("stale rejections, 16 clients", "reject", 16, 1, "rejections"),
    ("stale rejections, 64 clients", "reject", 64, 1, "rejections"),
]


def cell(r, metric):
    if r is None:
        return "–"
    rate = r[f"{metric}_per_s"]
    lat = r["latency"]
    cpu = r.get("server_cpu_s")
    per = ""
    if cpu is not None and r["requests"]:
        per = f", {cpu / r['requests'] * 1e6:.0f} µs server CPU/req"
    return f"{fmt_rate(rate)}/s (p50 {fmt_us(lat['p50_us'])}, p99 {fmt_us(lat['p99_us'])}{per})"


def ratio(a, b, metric):
    if a is None or b is None or not b[f"{metric}_per_s"]:
        return None
    return a[f"{metric}_per_s"] / b[f"{metric}_per_s"]


def verdict(value, target):
    if value is None:
        return "not measured"
    return f"{value:.2f}× (target ≥ {target}×) {'met' if value >= target else 'MISSED'}"


def table(rows):
    out = ["| workload | fencelog | PostgreSQL 15 | Redis 7 | NATS JetStream |", "|---|---|---|---|---|"]
    for label, w, c, b, metric in ROWS:
        cells = [cell(find(rows, s, w, c, b), metric) for s in SYSTEMS]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    for label, c in [("batches of 16, 16 clients, binary body (records/s)", 16), ("batches of 16, 64 clients, binary body (records/s)", 64)]:
        r = find(rows, "fencelog", "append", c, 16, binary=True)
        if r:
            out.append(f"| {label} | {cell(r, 'records')} | – | – | – |")
    for label, w, c in [("GET /healthz, 64 clients", "healthz", 64), ("stale rejections, 64 clients, right after /healthz", "reject", 64), ("mixed (32 append + 32 stale), 64 clients", "mixed", 64), ("stale rejections, 32 clients", "reject", 32)]:
        found = find_all(rows, "fencelog", w, c)
        if w == "reject" and c == 64:
            # The first is in the table above, next to the peers.
            found = found[1:]
        r = found[-1] if found else None
        if r:
            extra = ""
            if w == "mixed":
                extra = f"; {fmt_rate(r['appends_per_s'])} appends/s + {fmt_rate(r['rejections_per_s'])} rejections/s"
            out.append(f"| {label} | {cell(r, 'requests')}{extra} | – | – | – |")
    for s in SYSTEMS:
        for r in [r for r in rows if r["system"] == s and r["workload"] == "session"]:
            label = f"pipelined single-record appends, ONE connection, window {r.get('window')}"
            cells = [cell(r, "appends") if x == s else "–" for x in SYSTEMS]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    t = find(rows, "fencelog", "tail", 1)
    if t and t.get("visibility"):
        v = t["visibility"]
        out.append(
            f"| append → SSE consumer, 1 producer | p50 {fmt_us(v['p50_us'])}, p99 {fmt_us(v['p99_us'])}, "
            f"p99.9 {fmt_us(v['p999_us'])} ({v['count']} records) | – | – | – |"
        )
    fan = find(rows, "fencelog", "tail", 1, tails=1000)
    if fan and fan.get("visibility"):
        v = fan["visibility"]
        out.append(
            f"| append → delivered to all 1,000 SSE tails of one stream | p50 {fmt_us(v['p50_us'])}, "
            f"p99 {fmt_us(v['p99_us'])}, max {fmt_us(v['max_us'])} ({v['count']} records) | – | – | – |"
        )
    return "\n".join(out)


def targets(rows):
    f = lambda w, c, b=1: find(rows, "fencelog", w, c, b)
    pg = lambda w, c, b=1: find(rows, "postgres", w, c, b)
    rd = lambda w, c, b=1: find(rows, "redis", w, c, b)
    lines = [
        "| target | measured |",
        "|---|---|",
        f"| appends/s at 64 clients ≥ 5× PostgreSQL | {verdict(ratio(f('append', 64), pg('append', 64), 'appends'), 5)} |",
        f"| appends/s at 64 clients ≥ 1× Redis | {verdict(ratio(f('append', 64), rd('append', 64), 'appends'), 1)} |",
    ]
    one = f("append", 1)
    for name, peer in [("PostgreSQL", pg("append", 1)), ("Redis", rd("append", 1))]:
        if one and peer:
            ok = one["latency"]["p50_us"] <= peer["latency"]["p50_us"] and one["latency"]["p99_us"] <= peer["latency"]["p99_us"]
            lines.append(
                f"| 1 client p50/p99 no worse than {name} | fencelog {fmt_us(one['latency']['p50_us'])} / {fmt_us(one['latency']['p99_us'])}"
                f" vs {fmt_us(peer['latency']['p50_us'])} / {fmt_us(peer['latency']['p99_us'])}: {'met' if ok else 'MISSED'} |"
            )
    fb = lambda c: find(rows, "fencelog", "append", c, 16, binary=True)
    for c, peers, tgt in [(16, [("PostgreSQL", pg), ("Redis", rd)], 3), (64, [("Redis", rd)], 2)]:
        for name, peer in peers:
            lines.append(
                f"| batch-16 records/s at {c} clients ≥ {tgt}× {name} | "
                f"{verdict(ratio(f('append', c, 16), peer('append', c, 16), 'records'), tgt)} |"
            )
            if fb(c):
                lines.append(
                    f"| batch-16 records/s at {c} clients ≥ {tgt}× {name}, binary body | "
                    f"{verdict(ratio(fb(c), peer('append', c, 16), 'records'), tgt)} |"
                )
    fs, rs = f("session", 1), rd("session", 1)
    if fs:
        ok = fs["appends_per_s"] >= 150_000
        lines.append(f"| pipelined session ≥ 150k durable appends/s on one connection | {fmt_rate(fs['appends_per_s'])}/s: {'met' if ok else 'MISSED'} |")
    lines.append(f"| pipelined session ≥ 2× Redis pipelined (same window) | {verdict(ratio(fs, rs, 'appends'), 2)} |")
    lines.append(f"| rejections/s at 64 clients ≥ 5× PostgreSQL | {verdict(ratio(f('reject', 64), pg('reject', 64), 'rejections'), 5)} |")
    # The rejection run right after /healthz, when there is one.
    rejs = find_all(rows, "fencelog", "reject", 64)
    rej, hz = (rejs[-1] if rejs else None), f("healthz", 64)
    if rej and hz:
        lines.append(f"| rejections/s ≥ 80% of /healthz/s at 64 clients | {verdict(rej['rejections_per_s'] / hz['requests_per_s'], 0.8)} |")
    mixed, idle = f("mixed", 64), f("reject", 32)
    if mixed and idle:
        lines.append(
            f"| rejections keep ≥ 50% of their idle rate while appends run (mixed 32+32 vs reject 32) | "
            f"{verdict(mixed['rejections_per_s'] / idle['rejections_per_s'], 0.5)} |"
        )
    t = f("tail", 1)
    if t and t.get("visibility"):
        p99 = t["visibility"]["p99_us"]
        lines.append(f"| append → SSE visible p99 ≤ 2 ms, 1 producer | {fmt_us(p99)}: {'met' if p99 <= 2000 else 'MISSED'} |")
    lines += target_rows(rows)
    return "\n".join(lines)


def cpu_per_request_us(r):
    cpu = r.get("server_cpu_s") if r else None
    if cpu is None or not r["requests"]:
        return None
    return cpu / r["requests"] * 1e6


def target_rows(rows):
    """The further targets against Redis (and PostgreSQL, and redis-rs for
    the client), all from this run."""
    f = lambda w, c, b=1: find(rows, "fencelog", w, c, b)
    pg = lambda w, c, b=1: find(rows, "postgres", w, c, b)
    rd = lambda w, c, b=1: find(rows, "redis", w, c, b)
    lines = []
    for c in (16, 64):
        lines.append(
            f"| stale rejections/s at {c} clients ≥ 1.0× Redis | "
            f"{verdict(ratio(f('reject', c), rd('reject', c), 'rejections'), 1.0)} |"
        )
        ours, theirs = cpu_per_request_us(f("reject", c)), cpu_per_request_us(rd("reject", c))
        if ours is not None and theirs is not None:
            lines.append(
                f"| server CPU per rejection at {c} clients ≤ Redis's | "
                f"{ours:.1f} µs vs {theirs:.1f} µs: {'met' if ours <= theirs else 'MISSED'} |"
            )
    lines.append(f"| appends/s at 64 clients ≥ 1.3× Redis | {verdict(ratio(f('append', 64), rd('append', 64), 'appends'), 1.3)} |")
    lines.append(f"| appends/s at 64 clients ≥ 6× PostgreSQL | {verdict(ratio(f('append', 64), pg('append', 64), 'appends'), 6)} |")
    one, rone = f("append", 1), rd("append", 1)
    if one and rone:
        ok = one["latency"]["p50_us"] <= rone["latency"]["p50_us"]
        lines.append(
            f"| 1 client p50 ≤ Redis's | {fmt_us(one['latency']['p50_us'])} vs "
            f"{fmt_us(rone['latency']['p50_us'])}: {'met' if ok else 'MISSED'} |"
        )
    fan = find(rows, "fencelog", "tail", 1, tails=1000)
    if fan and fan.get("visibility"):
        p99 = fan["visibility"]["p99_us"]
        lines.append(f"| append → delivered to all 1,000 tails p99 ≤ 50 ms | {fmt_us(p99)}: {'met' if p99 <= 50_000 else 'MISSED'} |")
    best16 = max((r for r in [f("append", 64, 16), find(rows, "fencelog", "append", 64, 16, binary=True)] if r),
                 key=lambda r: r["records_per_s"], default=None)
    lines.append(f"| batch-16 records/s at 64 clients ≥ 1.5× Redis (best body) | {verdict(ratio(best16, rd('append', 64, 16), 'records'), 1.5)} |")
    for w in ("reject", "append"):
        ours, theirs = find(rows, "fencelog-client", w, 16), rd(w, 16)
        a, b = (ours or {}).get("client_cpu_us_per_request"), (theirs or {}).get("client_cpu_us_per_request")
        if a and b:
            lines.append(
                f"| client CPU per request ({w}, 16 clients) ≤ 1.3× redis-rs's | "
                f"{a:.1f} µs vs {b:.1f} µs = {a / b:.2f}×: {'met' if a <= 1.3 * b else 'MISSED'} |"
            )
    return lines


def fsync_table(rows):
    if not rows:
        return ""
    out = ["| system | appends | fsync + fdatasync calls | per acknowledged append |", "|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['system']} ({r['clients']} clients) | {r['appends']} | {r['fsyncs']} | {r['fsyncs_per_append']:.3f} |")
    return "\n".join(out)


def chart(rows, path):
    clients = [1, 4, 16, 64]
    series = {}
    for s in SYSTEMS:
        pts = [(c, find(rows, s, "append", c)) for c in clients]
        series[s] = [(c, r["appends_per_s"]) for c, r in pts if r]
    ymax = max([v for pts in series.values() for _, v in pts] + [1])
    step = 10 ** (len(str(int(ymax))) - 1)
    ymax = (int(ymax / step) + 1) * step
    w, h, left, right, top, bottom = 640, 400, 70, 140, 40, 50
    pw, ph = w - left - right, h - top - bottom
    x = lambda c: left + pw * clients.index(c) / (len(clients) - 1)
    y = lambda v: top + ph * (1 - v / ymax)
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="14">Durable single-record appends/s vs clients (100-byte records, fsync on)</text>',
    ]
    for i in range(6):
        v = ymax * i / 5
        svg.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{fmt_rate(v)}</text>')
    for c in clients:
        svg.append(f'<text x="{x(c):.1f}" y="{top + ph + 18}" text-anchor="middle">{c}</text>')
    svg.append(f'<text x="{left + pw / 2}" y="{h - 10}" text-anchor="middle">clients (one connection each, waiting for each answer)</text>')
    svg.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>')
    svg.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>')
    for i, s in enumerate(SYSTEMS):
        pts = series[s]
        if not pts:
            continue
        d = " ".join(f"{x(c):.1f},{y(v):.1f}" for c, v in pts)
        svg.append(f'<polyline points="{d}" fill="none" stroke="{COLORS[s]}" stroke-width="2"/>')
        for c, v in pts:
            svg.append(f'<circle cx="{x(c):.1f}" cy="{y(v):.1f}" r="3" fill="{COLORS[s]}"/>')
        ly = top + 10 + i * 20
        svg.append(f'<line x1="{left + pw + 15}" y1="{ly}" x2="{left + pw + 35}" y2="{ly}" stroke="{COLORS[s]}" stroke-width="2"/>')
        svg.append(f'<text x="{left + pw + 40}" y="{ly + 4}">{s}</text>')
    svg.append("</svg>")
    Path(path).write_text("\n".join(svg) + "\n")


def main():
    here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    rows = load(here / "results.jsonl")
    fsyncs = load(here / "fsyncs.jsonl")
    bad = [r for r in rows if not r["verification"]["passed"]]
    md = [
        "<!-- generated by benches/peers/report.py from results.jsonl; do not edit -->",
        "### Throughput and latency",
        "",
        table(rows),
        "",
        "### Against the targets (ratios within this run)",
        "",
        targets(rows),
        "",
        "### fsyncs per acknowledged append",
        "",
        fsync_table(fsyncs),
        "",
        f"Every run verified: {'yes' if not bad else 'NO: ' + ', '.join(r['system'] + ' ' + r['workload'] for r in bad)}.",
        "",
    ]
    (here / "results.md").write_text("\n".join(md))
    chart(rows, here / "throughput.svg")


if __name__ == "__main__":
    main()
