#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer's coverage instrumentation on the
# stable toolchain (the flags `cargo fuzz build --sanitizer none` passes; no
# sanitizer, so no nightly) and runs each target in turn from the seed corpus.
#
#   fuzz/run.sh                      15 s per target, every target
#   fuzz/run.sh 600 classify stream  10 minutes each, two targets
#   FUZZ_RUNS=10000000 fuzz/run.sh   ten million inputs per target instead
#
# New coverage is kept in fuzz/corpus/<target>/ (ignored by git). A crash or
# a hang (an input over FUZZ_TIMEOUT seconds, default 10) stops the run with
# a non-zero exit and leaves the input in fuzz/artifacts/<target>/: copy it
# to fuzz/regressions/<target>/, where `cargo test` in this folder replays
# it, and add a named test where the bug was.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-15}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(classify hints stream config request rules rules_match)

host=$(rustc -vV | sed -n 's/^host: //p')
flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  --cfg fuzzing
  -Cdebug-assertions
  -Coverflow-checks
)
# The seeds, from the repository's samples (a plain debug build: the
# same one `cargo test` here uses).
cargo run --locked --quiet --bin seeds -- target/seeds
# --target keeps the instrumentation off build scripts and proc macros.
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
RUSTFLAGS="${flags[*]}" cargo build --release --locked --target "$host" "${bins[@]}"

for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  limit=(-max_total_time="$seconds")
  if [ -n "${FUZZ_RUNS:-}" ]; then limit=(-runs="$FUZZ_RUNS"); fi
  echo "=== fuzz $t ==="
  "target/$host/release/$t" "corpus/$t" "target/seeds/$t" regressions/"$t" \
    "${limit[@]}" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="artifacts/$t/" -print_final_stats=1 2>&1 |
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY|INFO: Seed)|panicked|deadly signal|ALARM|Test unit written' || true
  # grep's status is not the fuzzer's: check what it left behind.
  if compgen -G "artifacts/$t/*" >/dev/null; then
    echo "fuzz $t: FOUND $(ls "artifacts/$t" | wc -l) failing input(s) in fuzz/artifacts/$t" >&2
    exit 1
  fi
done
