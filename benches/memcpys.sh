#!/usr/bin/env bash
# Where a case calls `memcpy` once per call, and how many bytes: the moves of
# requests and futures the compiler did not elide. Each row is a call site
# reached on every call, with the source line it comes from (inlined frames
# innermost first) and the size copied when it is a constant. A `memcpy` call
# costs far more wall time than its instructions suggest, so these are the
# first thing to look at when a layer's per-call cost moves:
# `benches/memcpys.sh [CHECKOUT [CASES...]]`.
# Needs valgrind, binutils (objdump, addr2line) and python3.
set -euo pipefail
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
shift || true
cases=${*:-breaker stack failover1}
cd "$tree"
cargo build --release -q -p benches --example percall
# Valgrind names objects by their real path.
bin=$(realpath "${CARGO_TARGET_DIR:-target}/release/examples/percall")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objdump -d --no-show-raw-insn "$bin" >"$work/asm"
calls=20000
for case in $cases; do
  echo "== $case"
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/out" \
    "$bin" "$case" "$calls" >/dev/null 2>&1
  python3 - "$work/asm" "$work/out" "$bin" "$calls" <<'PY'
import re, subprocess, sys

asm_file, out_file, binary, calls = sys.argv[1:5]
calls = int(calls)
lines = open(asm_file).read().split("\n")
index = {}
for i, line in enumerate(lines):
    m = re.match(r"\s+([0-9a-f]+):", line)
    if m:
        index[int(m.group(1), 16)] = i
# Callgrind's positions are compressed: absolute (0x..), relative (+n, -n)
# or repeated (*). A `calls=` line is followed by the call's cost at its
# call site, which moves no position.
objects, names = {}, {}
obj, callee, pos, pending = None, None, 0, None
sites = {}
for line in open(out_file):
    if not line.strip():
        continue
    if line[0].isalpha():
        m = re.match(r"(c?ob|c?fn)=\((\d+)\)(?: (.*))?", line)
        if m:
            kind, ident, name = m.groups()
            table = objects if kind.endswith("ob") else names
            if name:
                table[ident] = name.strip()
            if kind == "ob":
                obj = objects.get(ident)
            elif kind == "cfn":
                callee = names.get(ident)
        if line.startswith("calls="):
            pending = int(line.split()[0][len("calls="):])
        continue
    field = line.split()[0]
    if pending is not None:
        site = pos
        if field.startswith("0x"):
            site = int(field, 16)
        elif field[0] in "+-":
            site = pos + int(field)
        if obj == binary and callee and "memcpy" in callee and pending >= calls:
            sites[site] = sites.get(site, 0) + pending
        pending = None
        continue
    if field.startswith("0x"):
        pos = int(field, 16)
    elif field[0] in "+-":
        pos += int(field)
if not sites:
    print("  no memcpy call on every call")
for site, count in sorted(sites.items(), key=lambda kv: -kv[1]):
    i = index.get(site)
    size = ""
    if i is not None:
        for prev in lines[max(0, i - 6):i]:
            m = re.search(r"mov\s+\$0x([0-9a-f]+),%edx", prev)
            if m:
                size = f"{int(m.group(1), 16)} B"
    frames = subprocess.run(
        ["addr2line", "-i", "-e", binary, hex(site)], capture_output=True, text=True
    ).stdout.split()
    where = " <- ".join(re.sub(r".*/(src|examples)/", "", f) for f in frames[:3])
    print(f"  {count // calls}/call {size:>7}  {where}")
PY
done
