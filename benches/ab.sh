#!/usr/bin/env bash
# A change against its base in one run of the shared peer harness: every
# Levee case twice, `levee_*` from this checkout and `base_*` from BASE (a
# git revision), measured in interleaved rounds single-task and under 64-task
# contention, so that the shared machine's noise and its vCPU-placement
# regimes fall on both alike. Sequential runs of the harness, one per tree,
# can differ by more than the change on this machine.
#
#   benches/ab.sh BASE [CASE,...]     e.g. benches/ab.sh HEAD~3 levee_stack,levee_breaker
#
# Cases default to every case of the harness, the peers' too, plus `peers_stack`
# (the quick-start stack's three roles built from tower and failsafe); ROUNDS, N (single) and
# PEERBENCH_ROUNDS, PEERBENCH_CALLS_PER_TASK (contended) pass through.
# PEERBENCH=<dir> for a harness elsewhere than ../shared/peerbench. Builds
# in a temporary folder it removes when done (about 4 minutes on 2 cores);
# CARGO_TARGET_DIR=<dir> keeps the build for the next run.
set -euo pipefail
base=${1:?usage: benches/ab.sh BASE [CASE,...]}
root=$(cd "$(dirname "$0")/.." && pwd)
harness=${PEERBENCH:-$root/../shared/peerbench}
[ -f "$harness/src/lib.rs" ] || { echo "ab.sh: no peer harness at $harness" >&2; exit 2; }
work=$(mktemp -d /tmp/levee-ab.XXXXXX)
cleanup() {
  git -C "$root" worktree remove --force "$work/base" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The base tree, its packages renamed so that both link into one binary.
git -C "$root" worktree add --quiet --detach "$work/base" "$base"
sed -i 's/^name = "tower-levee"$/name = "tower-levee-base"/' "$work/base/crates/tower-levee/Cargo.toml"
sed -i 's/^name = "levee-core"$/name = "levee-core-base"/' "$work/base/crates/levee-core/Cargo.toml"
sed -i -E 's/^(levee-core|tower-levee) = \{ path = "crates\/(levee-core|tower-levee)", (.*) \}$/\1 = { path = "crates\/\2", \3, package = "\1-base" }/' \
  "$work/base/Cargo.toml"
grep -q 'package = "tower-levee-base"' "$work/base/Cargo.toml" ||
  { echo "ab.sh: could not rename the base's workspace dependencies" >&2; exit 2; }

cp -r "$harness" "$work/pb"
cd "$work/pb"
mkdir -p target && ln -sfn "$root" target/levee
sed -i "s|^tower-levee = { path = \"target/levee/crates/tower-levee\" }$|&\ntower-levee-base = { path = \"$work/base/crates/tower-levee\" }|" Cargo.toml
cp "$root/benches/ab/single.rs" src/bin/ab_single.rs
python3 - "$work/pb" <<'EOF'
import re, sys
pb = sys.argv[1]
lib = open(f"{pb}/src/lib.rs").read()
# Every `v.case("levee_...` block, again from the base crate as `base_...`.
blocks = re.findall(r'\n    v\.case\(\n        "levee_.*?\n    \);\n', lib, re.S)
if not blocks:
    sys.exit("ab.sh: no levee_ cases found in the harness")
base = "".join(blocks).replace('"levee_', '"base_').replace("tower_levee::", "tower_levee_base::")
anchor = "\n    // ---- ADD NEW CASES HERE"
if anchor not in lib:
    sys.exit("ab.sh: the harness's case list has no 'ADD NEW CASES HERE' line")
# The quick-start stack built from peers, the same three roles in the same
# order: what the same composition costs without Levee.
peers = """
    v.case(
        "peers_stack",
        "tower Retry (TpsBudget deposit, request cloned per call) -> load_shed + concurrency_limit(64) -> failsafe 5 consecutive",
        || {
            ServiceBuilder::new()
                .layer(tower::retry::RetryLayer::new(BudgetPolicy::default()))
                .load_shed()
                .concurrency_limit(64)
                .service(FailsafeSvc {
                    cb: failsafe::Config::new()
                        .failure_policy(failsafe::failure_policy::consecutive_failures(
                            5,
                            failsafe::backoff::equal_jittered(Duration::from_secs(30), Duration::from_secs(900)),
                        ))
                        .build(),
                    inner: inner(),
                })
        },
    );
"""
lib = lib.replace(anchor, "\n    {\n        use tower_levee_base::{BreakerLayer, BulkheadLayer, RetryBudgetLayer};\n"
                  + base + "    }\n" + peers + anchor, 1)
open(f"{pb}/src/lib.rs", "w").write(lib)
# The contended run measures only the cases asked for.
c = open(f"{pb}/src/bin/contended.rs").read()
sig = "fn case<S: BenchSvc>(&mut self, name: &'static str, _w: &'static str, make: impl Fn() -> S) {\n"
if sig not in c:
    sys.exit("ab.sh: contended.rs's Visitor::case is not where it was")
c = c.replace(sig, sig + """        if let Ok(only) = std::env::var("PEERBENCH_CASES") {
            if name != "baseline" && name != "ref_shared_atomic" && !only.split(',').any(|o| o == name) {
                return;
            }
        }
""", 1)
open(f"{pb}/src/bin/contended.rs", "w").write(c)
EOF

every_case=$(python3 -c '
import re, sys
lib = open("src/lib.rs").read()
names = re.findall(r"^\s*v\.case\(\s*\"([a-z0-9_]+)\"", lib, re.M)
print(",".join(n for n in names if n != "baseline" and not n.startswith("base_")))')
asked=${2:-$every_case}
both=$(echo "$asked" | tr ',' '\n' | sed -n 's/^levee_\(.*\)/levee_\1\nbase_\1/p; /^levee_/!p' | paste -sd,)
export PEERBENCH_CASES=$both
cargo build --release --quiet --bin ab_single --bin contended
echo "base: $base ($(git -C "$root" rev-parse --short "$base")), this checkout: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' + uncommitted changes')"
echo
bin=${CARGO_TARGET_DIR:-target}/release
"$bin/ab_single"
echo
"$bin/contended" 2>/dev/null >/dev/null
cat target/peerbench/contended.md
