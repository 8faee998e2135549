#!/usr/bin/env bash
# levee-gateway from this checkout, for `levee-drill run --live --through levee-gateway`
# (see crates/levee-drill/src/through.rs for the adapter protocol).
#   levee-gateway.sh check                 build it (release); one line: what runs
#   levee-gateway.sh serve SPEC PORT DIR   run it on 127.0.0.1:PORT as SPEC says
# Every target is one route's fallback, in order; the scenario's [levee] and
# [[rule]] tables are the gateway's (the same schemas); a spec with a
# redis_url shares a [fleet].
set -euo pipefail
# LEVEE_GATEWAY_BIN names a binary already built (the tests pass their debug one).
root=$(cd "$(dirname "$0")/../../.." && pwd)
exe=${LEVEE_GATEWAY_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/levee-gateway}
case "${1:-}" in
check)
    if [ -z "${LEVEE_GATEWAY_BIN:-}" ]; then
        (cd "$root" && cargo build --release --quiet -p levee-gateway) >&2 || { echo "cargo build -p levee-gateway failed" >&2; exit 3; }
    fi
    [ -x "$exe" ] || { echo "no levee-gateway at $exe" >&2; exit 3; }
    echo "levee-gateway at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') ($exe), the scenario's [levee]"
    ;;
serve)
    spec=$2 port=$3 dir=$4
    python3 - "$spec" "$port" >"$dir/gateway.toml" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
port = sys.argv[2]
q = json.dumps  # a JSON string is a TOML basic string
print(f'listen = "127.0.0.1:{port}"\n')
if spec.get("redis_url"):
    print(f'[fleet]\nurl = {q(spec["redis_url"])}\nnamespace = "drill"\nsweep_every = "100ms"\n')
for t in spec["targets"]:
    print(f'[[target]]\nname = {q(t["name"])}\nbase_url = {q(t["base_url"])}\napi_key_env = {q(t["api_key_env"])}\naccount = {q(t["account"])}\n')
names = ", ".join(q(t["name"]) for t in spec["targets"])
print(f'[[route]]\nmodel = {q(spec["model"])}\ntargets = [{names}]\n')
print(f'[[client]]\nname = "drill"\nkey_env = {q(spec["client_key_env"])}\n')
print(spec["levee_toml"])
print(spec.get("rules_toml", ""))
PY
    export LEVEE_LOG=${LEVEE_LOG:-warn}
    exec "$exe" --config "$dir/gateway.toml"
    ;;
*) echo "usage: levee-gateway.sh check | serve SPEC PORT DIR" >&2; exit 2 ;;
esac
