#!/usr/bin/env bash
# Plain-append A/B between two revisions of fencelog-engine, in one run:
#   benches/ab/plain_append_ab.sh BASE_REV [NEW_REV]   (NEW_REV: the work tree)
# Builds benches/ab/plain_append.rs against each (release), then reports
#  - instructions per awaited plain append (valgrind --tool=callgrind, one
#    appender on tmpfs, 2000 vs 4000 appends, the difference / 2000): steady
#    on a loaded machine;
#  - records/s and CPU µs per append at 64 appenders on the data disk,
#    ROUNDS alternating pairs (median of each): noisy, for the record.
# Needs valgrind (apt-get install valgrind). Everything it makes is under
# $AB_DIR (default target/ab), removed at the next run.
set -euo pipefail
base=${1:?usage: plain_append_ab.sh BASE_REV [NEW_REV]}
new=${2:-}
root=$(git rev-parse --show-toplevel)
ab=${AB_DIR:-$root/target/ab}
rounds=${ROUNDS:-6}
disk=${FENCELOG_BENCH_DIR:-$ab/data}
rm -rf "$ab" && mkdir -p "$ab" "$disk"
trap 'for w in src-base src-new; do git -C "$root" worktree remove --force "$ab/$w" >/dev/null 2>&1 || true; done' EXIT
git -C "$root" worktree add --detach -q "$ab/src-base" "$base"
engine_of() { # which checkout of the engine a side builds against
  if [ "$1" = base ]; then echo "$ab/src-base"; elif [ -n "$new" ]; then
    git -C "$root" worktree add --detach -q "$ab/src-new" "$new" && echo "$ab/src-new"
  else echo "$root"; fi
}
for side in base new; do
  src=$(engine_of $side)
  mkdir -p "$ab/$side/src"
  cp "$root/benches/ab/plain_append.rs" "$ab/$side/src/main.rs"
  cp "$src/Cargo.lock" "$ab/$side/"
  cat > "$ab/$side/Cargo.toml" <<TOML
[package]
name = "ab-$side"
version = "0.0.0"
edition = "2021"
[workspace]
[dependencies]
fencelog-engine = { path = "$src/crates/fencelog-engine" }
tokio = { version = "1", features = ["rt-multi-thread"] }
bytes = "1"
tempfile = "3"
TOML
  (cd "$ab/$side" && CARGO_TARGET_DIR="$ab/target-$side" cargo build -q --release)
done
shm=$(mktemp -d /dev/shm/fencelog-ab.XXXXXX)
for side in base new; do
  bin="$ab/target-$side/release/ab-$side"
  ir() { valgrind --tool=callgrind --callgrind-out-file="$ab/cg-$side-$1.out" "$bin" count "$shm" "$1" 2>&1 \
         | sed -n 's/.*Collected : //p'; }
  small=$(ir 2000); large=$(ir 4000)
  echo "$side: $(( (large - small) / 2000 )) instructions per plain append (callgrind)"
done
rm -rf "$shm"
for _ in $(seq "$rounds"); do
  for side in base new; do
    echo "$side $("$ab/target-$side/release/ab-$side" tput "$disk" 64 64000)"
  done
done > "$ab/tput.txt"
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for side in base new; do
  rate=$(awk -v s=$side '$1==s {print $2}' "$ab/tput.txt" | median)
  cpu=$(awk -v s=$side '$1==s {print $4}' "$ab/tput.txt" | median)
  echo "$side: median $rate rec/s, $cpu CPU us per append (64 appenders, $rounds rounds)"
done
