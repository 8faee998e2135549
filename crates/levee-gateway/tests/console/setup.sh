#!/usr/bin/env bash
# Makes what the console's browser test needs besides Debian's Chromium
# (which .ci/run installs with redis-server): playwright-core and axe-core
# from npm, pinned by package-lock.json, in target/console-browser. CI runs
# it before `cargo test`; run it once locally to take part in that test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
dir=$root/target/console-browser
if [ ! -x /usr/bin/chromium ]; then
    echo "the console's browser test needs Debian's Chromium: apt-get install -y chromium (.ci/run installs it)" >&2
fi
if [ -d "$dir/node_modules" ] && cmp -s "$here/package-lock.json" "$dir/package-lock.json"; then
    echo "console browser modules up to date: $dir"
    exit 0
fi
mkdir -p "$dir"
cp "$here/package.json" "$here/package-lock.json" "$dir/"
# No browser download: the test drives Debian's Chromium.
(cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
echo "console browser modules: $dir"
