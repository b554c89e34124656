#!/usr/bin/env bash
# The growth guard (issue 47): rank 0's judgment must stay linear in the links, so that a check
# that goes quadratic per node fails CI on the machine where it is written, whatever that
# machine's speed. `preflight simulate` runs the real schedule and judgment over a modelled
# cluster at 1024 and 2048 nodes with faults (--slow 1 --slow-cut 32 --bad-links 4); the time
# it computed (best of GROWTH_RUNS, default 3) at 2048 must stay within GROWTH_MAX_TIME (default
# 3, as issue 47 asks) times that at 1024, and its peak memory within GROWTH_MAX_MEM (default 2.5)
# times. Doubling n is 4x the ordered pairs, so the per-pair work must be a few bytes and
# nanoseconds (a byte per pair in a dense table) for the per-node n log n work to dominate at
# these sizes; a judgment that scans every link per node is n³, x8, and fails.
#
#   bench/scale-growth.sh [BINARY]     # default: $PREFLIGHT_BIN, else target/release/preflight
#                                      # (built with `cargo build --release` when missing)
#
# It takes about 10 s with a release binary (the three runs at 2048 are most of it). Results go
# to stdout; exit 1 when a bound is broken, 2 when the binary cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-${PREFLIGHT_BIN:-target/release/preflight}}
if [ ! -x "$bin" ]; then
  echo "scale-growth: building $bin (cargo build --release)" >&2
  cargo build --release -q
fi
runs=${GROWTH_RUNS:-3}
faults=(--slow 1 --slow-cut 32 --bad-links 4)
max_time_ratio=${GROWTH_MAX_TIME:-3.0}
max_mem_ratio=${GROWTH_MAX_MEM:-2.5}

# "SECONDS MIB" for n nodes: the least computed time and the least peak memory of $runs runs.
measure() {
  local n=$1 best_t="" best_m="" line t m
  for ((i = 0; i < runs; i++)); do
    line=$("$bin" simulate --nodes "$n" --quick "${faults[@]}" 2>&1 | head -n 1) ||
      { echo "scale-growth: $bin simulate --nodes $n failed: $line" >&2; exit 2; }
    t=$(sed -n 's/.*computed in \([0-9.]*\) s.*/\1/p' <<<"$line")
    m=$(sed -n 's/.*peak memory \([0-9]*\) MiB.*/\1/p' <<<"$line")
    [ -n "$t" ] && [ -n "$m" ] ||
      { echo "scale-growth: no 'computed in' or 'peak memory' in: $line" >&2; exit 2; }
    best_t=$(python3 -c "print(min(float('$t'), float('${best_t:-inf}')))")
    best_m=$(python3 -c "print(min(int('$m'), int('${best_m:-$m}')))")
  done
  echo "$best_t $best_m"
}

r1=$(measure 1024)
r2=$(measure 2048)
read -r t1 m1 <<<"$r1"
read -r t2 m2 <<<"$r2"
python3 - "$t1" "$m1" "$t2" "$m2" "$max_time_ratio" "$max_mem_ratio" <<'PY'
import sys
t1, m1, t2, m2, tmax, mmax = map(float, sys.argv[1:])
tr = t2 / max(t1, 0.01)
mr = m2 / max(m1, 1.0)
print(f"scale-growth: 1024 nodes {t1:.2f} s {m1:.0f} MiB; 2048 nodes {t2:.2f} s {m2:.0f} MiB; "
      f"time x{tr:.2f} (at most x{tmax}), memory x{mr:.2f} (at most x{mmax})")
bad = []
if tr > tmax:
    bad.append(f"computed time grew x{tr:.2f} from 1024 to 2048 nodes (at most x{tmax}): "
               "some judgment does work per node that grows with n; profile with "
               "`perf record -g target/release/preflight simulate --nodes 2048 --quick`")
if mr > mmax:
    bad.append(f"peak memory grew x{mr:.2f} from 1024 to 2048 nodes (at most x{mmax}): "
               "something holds a record per link (see preflight_checks::model::Links, checks/src/core/link_table.rs)")
for b in bad:
    print("scale-growth: FAIL: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
