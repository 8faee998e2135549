#!/usr/bin/env bash
# Instructions per stream frame of every case, from cachegrind: the
# difference between a stream of 20,000 chunks and one of 10,000, over
# 10,000. Deterministic, so two trees compare without the machine's noise:
# `benches/perframe.sh [CHECKOUT] [CASES...]`.
set -euo pipefail
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
shift || true
cases=${*:-bare watched stall held}
cd "$tree"
cargo build --release -q -p benches --example perframe
bin=target/release/examples/perframe
ir() {
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
    sed -n 's/.*I *refs: *//p' | tr -d ','
}
for case in $cases; do
  a=$(ir "$case" 10000)
  b=$(ir "$case" 20000)
  echo "$case $(( (b - a) / 10000 ))"
done
