#!/usr/bin/env bash
# The built-in drill scenarios through real gateways, in real time, beside the
# drill's own stacks on the same work:
#
#   benches/through.sh                      every built-in scenario (~20 min)
#   benches/through.sh hard-outage brownout some of them
#   THROUGH="levee-gateway" SHORTEN=2 benches/through.sh
#
# A real gateway keeps real time (LiteLLM's 5-s cooldowns do not scale), so
# each scenario is shortened SHORTEN times (default 4: its fault windows closer
# together, its load, limits and latencies as they are) and every gateway runs
# it at scale 1. The same shortened scenario also runs in the drill's virtual
# time, so the in-process `levee` stack and `gateway-router` (the drill's
# stand-in for LiteLLM's Router) sit beside the gateways that run for real.
# A gateway that is not installed is skipped with its reason (LiteLLM:
# ../shared/gatewaybench/install-litellm.sh).
#
# Writes target/through/ (OUT=... for another) SCENARIO.{virtual,through}.{txt,json} and prints one
# table: a row per stack per scenario.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
through=${THROUGH:-levee-gateway,litellm}
shorten=${SHORTEN:-4}
out=${OUT:-$root/target/through}
mkdir -p "$out"
# One package a build: built together, their features unify, and the adapter's
# own `cargo build -p levee-gateway` would build the gateway again.
cargo build --release --quiet -p levee-drill
cargo build --release --quiet -p levee-gateway
drill=${CARGO_TARGET_DIR:-$root/target}/release/levee-drill
if [ $# -gt 0 ]; then
    scenarios=("$@")
else
    scenarios=()
    for f in crates/levee-drill/scenarios/*.toml; do scenarios+=("$(basename "$f" .toml)"); done
fi
for s in "${scenarios[@]}"; do
    file=crates/levee-drill/scenarios/$s.toml
    [ -f "$file" ] || { echo "through.sh: no scenario $file" >&2; exit 2; }
    echo "== $s" >&2
    "$drill" run "$file" --shorten "$shorten" --json "$out/$s.virtual.json" >"$out/$s.virtual.txt"
    "$drill" run "$file" --shorten "$shorten" --live --through "$through" \
        --json "$out/$s.through.json" >"$out/$s.through.txt" 2>"$out/$s.through.err" \
        || { echo "through.sh: $s failed through $through (see $out/$s.through.err)" >&2; continue; }
done
python3 - "$out" "$shorten" "${scenarios[@]}" <<'PY'
import json, os, sys
out, shorten, names = sys.argv[1], sys.argv[2], sys.argv[3:]
keep = ("levee", "gateway-router")
print(f"| scenario (shortened {shorten}x) | stack | served | upstream calls | wasted | p99 ms | recovery s |")
print("|---|---|---:|---:|---:|---:|---:|")
def rows(path, only=None):
    if not os.path.exists(path):
        return []
    data = json.load(open(path))
    reports = data if isinstance(data, list) else [data]
    for report in reports:
        for r in report["results"]:
            if only is None or r["stack"] in only:
                yield r
for name in names:
    for path, only, how in ((f"{out}/{name}.through.json", None, "through HTTP"),
                            (f"{out}/{name}.virtual.json", keep, "virtual time")):
        for r in rows(path, only):
            served = 100.0 * r["succeeded"] / max(r["requests"], 1)
            rec = "-" if r.get("recovery_ms") is None else f"{r['recovery_ms'] / 1000:.1f}"
            print(f"| {name} | {r['stack']}, {how} | {served:.2f}% | {r['upstream_calls']} "
                  f"| {r['upstream_rejected_calls']} | {r['latency_ms']['p99']} | {rec} |")
PY
