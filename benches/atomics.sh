#!/usr/bin/env bash
# Atomic read-modify-writes per call of every case (`lock`-prefixed
# instructions and `xchg` with memory, each a write to a shared cache line
# at about 20 cycles even when uncontended): callgrind counts what each
# instruction of the binary executed, objdump says which are atomic; the
# difference between 20,000 and 10,000 calls, over 10,000. Only the
# benchmark's own code is counted (Levee's, the peers', std's inlined into
# it), not libc's. Deterministic, like `percall.sh`:
# `benches/atomics.sh [CHECKOUT [CASES...]]`.
# Needs valgrind, binutils (objdump) and python3.
set -euo pipefail
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
shift || true
cases=${*:-bare failsafe breaker rolling refusing bulkhead retry stack failover1 failover2}
cd "$tree"
cargo build --release -q -p benches --example percall
# Valgrind names objects by their real path.
bin=$(realpath "${CARGO_TARGET_DIR:-target}/release/examples/percall")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objdump -d --no-show-raw-insn "$bin" >"$work/asm"
rmw() {
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/out" \
    "$bin" "$1" "$2" >/dev/null 2>&1
  python3 - "$work/asm" "$work/out" "$bin" <<'PY'
import re, sys

asm_file, out_file, binary = sys.argv[1:4]
atomic = set()
for line in open(asm_file):
    m = re.match(r"\s+([0-9a-f]+):\s+(lock |xchg\s+\S+,\S*\()", line)
    if m:
        atomic.add(int(m.group(1), 16))
# Callgrind's positions are compressed: absolute (0x..), relative (+n, -n)
# or repeated (*). The line after `calls=` is a call's inclusive cost.
objects, obj, pos, after_call, total, seen = {}, None, 0, False, 0, False
for line in open(out_file):
    if not line.strip():
        continue
    if line[0].isalpha():
        m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?", line)
        if m:
            kind, ident, name = m.groups()
            if name:
                objects[ident] = name.strip()
            if kind == "ob":
                obj = objects.get(ident)
        after_call = after_call or line.startswith("calls=")
        continue
    if after_call:
        # A call's cost, at its call site: it moves no position.
        after_call = False
        continue
    field = line.split()[0]
    if field.startswith("0x"):
        pos = int(field, 16)
    elif field[0] in "+-":
        pos += int(field)
    if obj == binary:
        seen = True
        if pos in atomic:
            total += int(line.split()[-1])
if not seen:
    sys.exit(f"atomics.sh: callgrind reported nothing for {binary}")
print(total)
PY
}
for case in $cases; do
  a=$(rmw "$case" 10000)
  b=$(rmw "$case" 20000)
  echo "$case $(python3 -c "print(round(($b - $a) / 10000, 2))")"
done
