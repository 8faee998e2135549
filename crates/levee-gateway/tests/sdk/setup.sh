#!/usr/bin/env bash
# Makes the virtualenv the SDK tests run in (target/sdk-venv), with the
# official OpenAI and Anthropic Python SDKs from PyPI. CI runs it before
# `cargo test`; run it once locally to take part in those tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../../.." && pwd)
venv=$root/target/sdk-venv
want=$(cat "$(dirname "$0")/requirements.txt")
if [ -x "$venv/bin/python" ] && [ -f "$venv/requirements.txt" ] && [ "$(cat "$venv/requirements.txt")" = "$want" ]; then
    echo "sdk venv up to date: $venv"
    exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$(dirname "$0")/requirements.txt"
printf '%s' "$want" >"$venv/requirements.txt"
"$venv/bin/python" -c 'import openai, anthropic; print("sdk venv:", "openai", openai.__version__, "anthropic", anthropic.__version__)'
