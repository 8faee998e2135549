#!/usr/bin/env bash
# What a case does at the instruction level on every call, from callgrind
# (`--dump-instr=yes`) and the binary's disassembly. Deterministic, like
# `percall.sh`: `benches/callsites.sh REPORT [CHECKOUT [CASES...]]`.
#
# - `atomics`: atomic read-modify-writes per call (`lock`-prefixed
#   instructions and `xchg` with memory, each a write to a shared cache line
#   at about 20 cycles even when uncontended): the difference between
#   20,000 and 10,000 calls, over 10,000. Only the benchmark's own code is
#   counted (Levee's, the peers', std's inlined into it), not libc's.
# - `memcpys`: the `memcpy` call sites reached on every call, with the bytes
#   copied and the source line (inlined callers after it). A `memcpy` call
#   costs far more wall time than its instructions suggest: the moves of
#   requests and futures the compiler did not elide are the first thing to
#   look at when a layer's per-call cost moves.
#
# Needs valgrind, binutils (objdump, addr2line) and python3.
set -euo pipefail
report=${1:?usage: benches/callsites.sh atomics|memcpys [CHECKOUT [CASES...]]}
shift
here=$(cd "$(dirname "$0")" && pwd)
tree=${1:-$(cd "$here/.." && pwd)}
shift || true
case $report in
  atomics) cases=${*:-bare failsafe breaker rolling refusing throttled gated_elsewhere bulkhead retry stack failover1 failover2 failover_gated} ;;
  memcpys) cases=${*:-breaker stack failover1} ;;
  *) echo "callsites.sh: unknown report $report" >&2; exit 2 ;;
esac
cd "$tree"
cargo build --release -q -p benches --example percall
# Valgrind names objects by their real path.
bin=$(realpath "${CARGO_TARGET_DIR:-target}/release/examples/percall")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objdump -d --no-show-raw-insn "$bin" >"$work/asm"
run() {
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/out" \
    "$bin" "$1" "$2" >/dev/null 2>&1
}
for case in $cases; do
  if [ "$report" = atomics ]; then
    run "$case" 10000
    a=$(python3 "$here/callsites.py" atomics "$work/asm" "$work/out" "$bin")
    run "$case" 20000
    b=$(python3 "$here/callsites.py" atomics "$work/asm" "$work/out" "$bin")
    echo "$case $(python3 -c "print(round(($b - $a) / 10000, 2))")"
  else
    echo "== $case"
    run "$case" 20000
    python3 "$here/callsites.py" memcpys "$work/asm" "$work/out" "$bin" 20000
  fi
done
