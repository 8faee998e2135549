#!/usr/bin/env bash
# Instructions per plain request of levee-gateway and of the harness's bare
# proxy, from callgrind: deterministic, so a change to the gateway compares
# without the machine's noise. Each serves 1,000 requests at 50/s after a
# warm-up (counters zeroed after it); the profile stays in target/ for
# `callgrind_annotate --inclusive=yes`.
#
# Then what a refusal costs the gateway, against a served request: the same
# load to a gateway whose one target is refused for the whole measurement,
# because the warm-up left it
#   levee-open     with its breaker open (nothing listens at the target's port;
#                  a probe a cool-off tries to connect and fails),
#   levee-gated    with its throttle gate closed (the target answered 429 with
#                  `retry-after: 60`; a wait of an hour would park it),
#   levee-parked   parked (the target answered 429 `insufficient_quota`).
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
config() { # config FILE UPSTREAM_PORT
cat >"$1" <<TOML
listen = "127.0.0.1:18503"
[[target]]
name = "upstream-openai"
base_url = "http://127.0.0.1:$2"
api_key_env = "GB_UPSTREAM_KEY"
[[route]]
model = "gpt-4o"
targets = ["upstream-openai"]
[[client]]
name = "gatewaybench"
key_env = "GB_CLIENT_KEY"
TOML
}
config "$out/gateway.toml" 18500
config "$out/open.toml" 18599
config "$out/refusing.toml" 18504
# A provider that refuses every call with a 429 (its retry-after and body from
# argv): one call closes the gate or parks the account, so the rest are Levee's.
refuser() {
  python3 - "$1" "$2" <<'PY' >/dev/null 2>&1 &
import http.server, sys
wait, body = sys.argv[1], sys.argv[2].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(429)
        self.send_header("content-type", "application/json")
        self.send_header("retry-after", wait)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 18504), H).serve_forever()
PY
  refuser_pid=$!
}
refuser_pid=
"$harness/gb-upstream" --listen 127.0.0.1:18500 >/dev/null 2>&1 &
upstream=$!
trap 'kill $upstream $refuser_pid 2>/dev/null || true' EXIT
for system in proxy levee levee-open levee-gated levee-parked; do
  [ -n "$refuser_pid" ] && { kill "$refuser_pid" 2>/dev/null || true; refuser_pid=; }
  case $system in
    levee) cmd=("$root/target/release/levee-gateway" --config "$out/gateway.toml");;
    proxy) cmd=("$harness/gb-proxy" --listen 127.0.0.1:18503 --upstream http://127.0.0.1:18500);;
    levee-open) cmd=("$root/target/release/levee-gateway" --config "$out/open.toml");;
    levee-gated)
      refuser 60 '{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}'
      cmd=("$root/target/release/levee-gateway" --config "$out/refusing.toml");;
    levee-parked)
      refuser 3600 '{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}'
      cmd=("$root/target/release/levee-gateway" --config "$out/refusing.toml");;
  esac
  rm -f "$out/$system.callgrind"*
  valgrind --tool=callgrind --callgrind-out-file="$out/$system.callgrind" "${cmd[@]}" >/dev/null 2>"$out/$system.log" &
  vg=$!
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/18503) 2>/dev/null && break; sleep 0.1; done
  "$harness/gb-load" --url http://127.0.0.1:18503 --rate 20 --duration 2 --warmup 0 >/dev/null 2>&1 || true
  callgrind_control -z $vg >/dev/null 2>&1
  # Refusals are errors to the load generator: they are counted all the same.
  "$harness/gb-load" --url http://127.0.0.1:18503 --rate 50 --duration "$(( n / 50 ))" --warmup 0 --label $system >"$out/$system.load.json" 2>/dev/null || true
  callgrind_control -d $vg >/dev/null 2>&1
  kill -TERM $vg; wait $vg 2>/dev/null || true
  total=$(callgrind_annotate "$out/$system.callgrind.1" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ',')
  echo "$system $(( total / n )) instructions per request ($(grep -o '"status":{[^}]*}' "$out/$system.load.json" || true))"
done
