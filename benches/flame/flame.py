#!/usr/bin/env python3
"""`perf script` output on stdin -> a flame graph SVG on stdout.

Standard library only, so a fresh machine needs nothing beyond perf.
Each sample's stack is folded root-first; frames are boxes whose width is
their share of samples, children stacked above their caller. Hovering a box
shows its function, sample count and share (an SVG <title>).

    perf script -i perf.data | benches/flame/flame.py --title "..." > out.svg
"""

import argparse
import html
import re
import sys
from collections import defaultdict

WIDTH_PX = 1200
FRAME_PX = 16
# Boxes narrower than this are not drawn: thousands of slivers make the
# file large and show nothing.
MIN_WIDTH_PX = 0.3


def fold(lines):
    """Counts of root-first stacks (tuples of function names)."""
    stacks = defaultdict(int)
    frames = []
    comm = None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if frames:
                stacks[tuple([comm] + frames[::-1])] += 1
            frames, comm = [], None
            continue
        if not line.startswith((" ", "\t")):
            # The sample's header line: "comm pid/tid time: period event:".
            comm = line.split()[0] if line.split() else "?"
            continue
        parts = line.strip().split(None, 1)
        name = parts[1] if len(parts) > 1 else parts[0]
        name = re.sub(r"\s+\(\S*\)$", "", name)  # the DSO in parentheses
        name = re.sub(r"\+0x[0-9a-f]+$", "", name)
        frames.append(name)
    if frames:
        stacks[tuple([comm] + frames[::-1])] += 1
    return stacks


def tree(stacks):
    root = {"n": 0, "kids": {}}
    for stack, count in stacks.items():
        root["n"] += count
        node = root
        for f in stack:
            node = node["kids"].setdefault(f, {"n": 0, "kids": {}})
            node["n"] += count
    return root


def color(name):
    h = sum(ord(c) for c in name) % 60
    return f"rgb({205 + h // 2},{80 + h * 2},{40})"


def depth(node):
    return 1 + max((depth(k) for k in node["kids"].values()), default=0)


def render(root, title):
    total = max(root["n"], 1)
    levels = depth(root)
    height = (levels + 2) * FRAME_PX + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{height}" '
        f'font-family="monospace" font-size="11">',
        f'<rect width="{WIDTH_PX}" height="{height}" fill="#fdfdf6"/>',
        f'<text x="{WIDTH_PX / 2}" y="18" text-anchor="middle" font-size="14">'
        f"{html.escape(title)} ({total} samples)</text>",
    ]

    def draw(node, name, x, level):
        w = node["n"] / total * WIDTH_PX
        if w < MIN_WIDTH_PX:
            return
        y = height - (level + 1) * FRAME_PX - 10
        label = html.escape(name)
        share = 100.0 * node["n"] / total
        out.append(
            f'<g><title>{label} ({node["n"]} samples, {share:.2f}%)</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_PX - 1}" '
            f'fill="{color(name)}" rx="2"/>'
        )
        chars = int(w / 7)
        if chars >= 3:
            text = name if len(name) <= chars else name[: chars - 2] + ".."
            out.append(f'<text x="{x + 2:.2f}" y="{y + 11}">{html.escape(text)}</text>')
        out.append("</g>")
        cx = x
        for kid_name, kid in sorted(node["kids"].items()):
            draw(kid, kid_name, cx, level + 1)
            cx += kid["n"] / total * WIDTH_PX

    cx = 0.0
    for name, kid in sorted(root["kids"].items()):
        draw(kid, name, cx, 0)
        cx += kid["n"] / total * WIDTH_PX
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--title", default="flame graph")
    ap.add_argument("--top", type=int, default=0,
                    help="also print, to stderr, the N frames with the most samples of their own (self time) "
                         "and the share of a few syscall paths (inclusive)")
    args = ap.parse_args()
    stacks = fold(sys.stdin)
    if not stacks:
        sys.exit("no samples on stdin (was `perf script` given a perf.data?)")
    sys.stdout.write(render(tree(stacks), args.title))
    if args.top:
        print_top(stacks, args.top)


# Inclusive shares worth knowing for a request/response server.
PATHS = ["__GI___writev", "__GI___libc_write", "__libc_recv", "epoll_wait", "futex_wait",
         "__GI___libc_malloc", "__GI___libc_free", "hyper::proto::h1::role::parse_headers", "serde_json"]


def print_top(stacks, n):
    total = sum(stacks.values())
    own = defaultdict(int)
    for stack, count in stacks.items():
        own[stack[-1]] += count
    print(f"self time, {total} samples:", file=sys.stderr)
    for f, c in sorted(own.items(), key=lambda kv: -kv[1])[:n]:
        print(f"{100.0 * c / total:6.2f}%  {f[:110]}", file=sys.stderr)
    print("inclusive:", file=sys.stderr)
    for p in PATHS:
        c = sum(count for stack, count in stacks.items() if any(f.startswith(p) for f in stack))
        print(f"{100.0 * c / total:6.2f}%  {p}*", file=sys.stderr)


if __name__ == "__main__":
    main()
