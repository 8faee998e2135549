#!/usr/bin/env bash
# levee-gateway against the gateways people run, in one run of the shared
# harness (../shared/gatewaybench: its README says what it measures and how
# the peers are installed; a peer that is not installed is skipped):
#
#   benches/gateway.sh            every system, every step (~15 min)
#   benches/gateway.sh --quick    two short steps
#   GB_SYSTEMS="direct proxy levee" GB_RATES="100 1000" benches/gateway.sh
#
# The harness writes into its own folder, so it runs from a copy under
# target/gatewaybench; the tables land in target/gatewaybench/target/gatewaybench/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${GATEWAYBENCH:-$root/../shared/gatewaybench}
[ -x "$src/run.sh" ] || { echo "gateway.sh: no harness at $src (GATEWAYBENCH=... for another)" >&2; exit 2; }
work=$root/target/gatewaybench
mkdir -p "$work"
# Keep the harness's own build between runs; refresh its sources.
rsync -a --exclude target "$src/" "$work/" 2>/dev/null || cp -r "$src/." "$work/"
cd "$root"
LEVEE_DIR=$root "$work/run.sh" "$@"
echo "results: $work/target/gatewaybench/results.md"
