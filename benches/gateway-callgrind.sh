#!/usr/bin/env bash
# Instructions per plain request of levee-gateway and of the harness's bare
# proxy, from callgrind: deterministic, so a change to the gateway compares
# without the machine's noise. Each serves 1,000 requests at 50/s after a
# warm-up (counters zeroed after it); the profile stays in target/ for
# `callgrind_annotate --inclusive=yes`.
#
#   benches/gateway-callgrind.sh [N]      (after benches/gateway.sh has built the harness)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-1000}
harness=$root/target/gatewaybench/target/release
[ -x "$harness/gb-load" ] || { echo "gateway-callgrind.sh: build the harness first: benches/gateway.sh --quick" >&2; exit 2; }
out=$root/target/gateway-callgrind
mkdir -p "$out"
(cd "$root" && cargo build --release -q -p levee-gateway)
export GB_UPSTREAM_KEY=sk-gb-upstream-key GB_CLIENT_KEY=sk-gb-client-key LEVEE_LOG=${LEVEE_LOG:-info}
cat >"$out/gateway.toml" <<TOML
listen = "127.0.0.1:18503"
[[target]]
name = "upstream-openai"
base_url = "http://127.0.0.1:18500"
api_key_env = "GB_UPSTREAM_KEY"
[[route]]
model = "gpt-4o"
targets = ["upstream-openai"]
[[client]]
name = "gatewaybench"
key_env = "GB_CLIENT_KEY"
TOML
"$harness/gb-upstream" --listen 127.0.0.1:18500 >/dev/null 2>&1 &
upstream=$!
trap 'kill $upstream 2>/dev/null || true' EXIT
for system in proxy levee; do
  case $system in
    levee) cmd=("$root/target/release/levee-gateway" --config "$out/gateway.toml");;
    proxy) cmd=("$harness/gb-proxy" --listen 127.0.0.1:18503 --upstream http://127.0.0.1:18500);;
  esac
  rm -f "$out/$system.callgrind"*
  valgrind --tool=callgrind --callgrind-out-file="$out/$system.callgrind" "${cmd[@]}" >/dev/null 2>"$out/$system.log" &
  vg=$!
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/18503) 2>/dev/null && break; sleep 0.1; done
  "$harness/gb-load" --url http://127.0.0.1:18503 --rate 20 --duration 2 --warmup 0 >/dev/null 2>&1 || true
  callgrind_control -z $vg >/dev/null 2>&1
  "$harness/gb-load" --url http://127.0.0.1:18503 --rate 50 --duration "$(( n / 50 ))" --warmup 0 --label $system >/dev/null 2>&1
  callgrind_control -d $vg >/dev/null 2>&1
  kill -TERM $vg; wait $vg 2>/dev/null || true
  total=$(callgrind_annotate "$out/$system.callgrind.1" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ',')
  echo "$system $(( total / n )) instructions per request"
done
