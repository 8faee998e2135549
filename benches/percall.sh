#!/usr/bin/env bash
# Instructions per call of every case, from cachegrind: the difference
# between 20,000 and 10,000 calls, over 10,000. Deterministic, so two trees
# compare without the machine's noise: `benches/percall.sh [CHECKOUT]`.
set -euo pipefail
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$tree"
cargo build --release -q -p benches --example percall
bin=target/release/examples/percall
ir() {
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
    sed -n 's/.*I *refs: *//p' | tr -d ','
}
for case in bare failsafe scope_floor breaker rolling refusing throttled gated_elsewhere bulkhead retry stack first_target first_target_without_handle first_target_kept failover1 failover2 failover_gated ${PERCALL_EXTRA:-}; do
  a=$(ir "$case" 10000)
  b=$(ir "$case" 20000)
  echo "$case $(( (b - a) / 10000 ))"
done
