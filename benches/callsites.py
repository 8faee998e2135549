"""What `benches/callsites.sh` reports from one callgrind run of a case.

`atomics ASM OUT BINARY`: instructions executed in BINARY that are atomic
read-modify-writes (`lock`-prefixed, or `xchg` with memory).
`memcpys ASM OUT BINARY CALLS`: the call sites in BINARY that call `memcpy`
at least CALLS times, with the bytes copied (when a constant) and the
source line, inlined callers after it.

ASM is `objdump -d --no-show-raw-insn BINARY`; OUT is callgrind's output
with `--dump-instr=yes`.
"""

import re
import subprocess
import sys


def read_callgrind(out_file, binary):
    """Yields ("cost", position, count) for each instruction of BINARY and
    ("call", site, callee, count) for each of its calls. Fails when
    callgrind reported nothing for BINARY (valgrind names objects by their
    real path)."""
    # Positions are compressed: absolute (0x..), relative (+n, -n) or
    # repeated (*). The line after `calls=` is the call's cost at its call
    # site, which moves no position.
    objects, names = {}, {}
    obj, callee, pos, call_count, seen = None, None, 0, None, False
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
            elif line.startswith("calls="):
                call_count = int(line.split()[0][len("calls="):])
            continue
        field = line.split()[0]
        at = pos
        if field.startswith("0x"):
            at = int(field, 16)
        elif field[0] in "+-":
            at = pos + int(field)
        if call_count is not None:
            if obj == binary:
                yield ("call", at, callee or "", call_count)
            call_count = None
            continue
        pos = at
        if obj == binary:
            seen = True
            yield ("cost", pos, int(line.split()[-1]))
    if not seen:
        sys.exit(f"callsites.py: callgrind reported nothing for {binary}")


def disassembly(asm_file):
    """The lines of the disassembly, and the index of each address's line."""
    lines = open(asm_file).read().split("\n")
    index = {}
    for i, line in enumerate(lines):
        m = re.match(r"\s+([0-9a-f]+):", line)
        if m:
            index[int(m.group(1), 16)] = i
    return lines, index


def atomics(asm_file, out_file, binary):
    lines, index = disassembly(asm_file)
    atomic = {
        addr
        for addr, i in index.items()
        if re.match(r"\s+[0-9a-f]+:\s+(lock |xchg\s+\S+,\S*\()", lines[i])
    }
    total = sum(
        record[2]
        for record in read_callgrind(out_file, binary)
        if record[0] == "cost" and record[1] in atomic
    )
    print(total)


def memcpys(asm_file, out_file, binary, calls):
    lines, index = disassembly(asm_file)
    sites = {}
    for record in read_callgrind(out_file, binary):
        if record[0] == "call" and "memcpy" in record[2] and record[3] >= calls:
            sites[record[1]] = sites.get(record[1], 0) + record[3]
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


if __name__ == "__main__":
    report, asm_file, out_file, binary = sys.argv[1:5]
    if report == "atomics":
        atomics(asm_file, out_file, binary)
    elif report == "memcpys":
        memcpys(asm_file, out_file, binary, int(sys.argv[5]))
    else:
        sys.exit(f"callsites.py: unknown report {report}")
