#!/usr/bin/env bash
# LiteLLM's proxy with its Router's documented defaults, for
# `levee-drill run --live --through litellm` (see crates/levee-drill/src/through.rs).
#   litellm.sh check                 one line: what runs (or why not: exit 3)
#   litellm.sh serve SPEC PORT DIR   run it on 127.0.0.1:PORT as SPEC says
# It is not installed by the project (it is large): install it with the shared
# harness's ../shared/gatewaybench/install-litellm.sh (a virtualenv under
# ~/.cache/gatewaybench/litellm; GB_LITELLM_VENV for another).
# The scenario's targets are the deployments of one model group, `order` their
# position (LiteLLM's documented way to make one primary and backups), with the
# Router's defaults: num_retries 2, cooldown_time 5 s, allowed_fails unset. A
# spec with a redis_url shares cooldowns through Redis, as LiteLLM does for a fleet.
set -euo pipefail
venv=${GB_LITELLM_VENV:-$HOME/.cache/gatewaybench/litellm}
case "${1:-}" in
check)
    [ -x "$venv/bin/litellm" ] || { echo "LiteLLM's proxy is not installed at $venv: run ../shared/gatewaybench/install-litellm.sh" >&2; exit 3; }
    version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))')
    echo "LiteLLM proxy $version (PyPI), 1 worker, the Router's defaults, deployments ordered"
    ;;
serve)
    spec=$2 port=$3 dir=$4
    "$venv/bin/python" - "$spec" >"$dir/config.yaml" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
q = json.dumps  # a JSON string is a YAML string
print("model_list:")
for i, t in enumerate(spec["targets"]):
    print(f"  - model_name: {q(spec['model'])}")
    print("    litellm_params:")
    print(f"      model: {q('openai/' + spec['model'])}")
    print(f"      api_base: {q(t['base_url'])}")
    print(f"      api_key: os.environ/{t['api_key_env']}")
    print(f"      order: {i + 1}")
    print("    model_info:")
    print(f"      id: {q(t['name'])}")
print("general_settings:")
print(f"  master_key: os.environ/{spec['client_key_env']}")
print("litellm_settings:")
print("  json_logs: true")
print("  telemetry: false")
if spec.get("redis_url"):
    from urllib.parse import urlparse
    u = urlparse(spec["redis_url"])
    print("router_settings:")
    print(f"  redis_host: {q(u.hostname)}")
    print(f"  redis_port: {u.port}")
PY
    export LITELLM_LOG=ERROR LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_TELEMETRY=False
    exec "$venv/bin/litellm" --config "$dir/config.yaml" --host 127.0.0.1 --port "$port" --num_workers 1
    ;;
*) echo "usage: litellm.sh check | serve SPEC PORT DIR" >&2; exit 2 ;;
esac
