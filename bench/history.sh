#!/usr/bin/env bash
# `preflight history` at fleet size (issue 44): 1,024 nodes x 1,000 runs each, as the JSON-lines
# exports nodes ship (`preflight history --export`), summarised from one folder. The records are
# generated (seeded) with three planted lemons: an intermittent node, a pair fault, and a GPU
# whose XID comes in bursts; everything else passes or fails once in a while at random.
#
#   bench/history.sh [BINARY] [NODES] [RUNS]   # default: target/release/preflight 1024 1000
#
# farm-bench times the whole process (median of 3, peak memory); the verdict is checked too:
# exactly the three planted lemons.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${PREFLIGHT_BIN:-target/release/preflight}}
nodes=${2:-1024}
runs=${3:-1000}
[ -x "$bin" ] || { echo "history bench: build $bin first (cargo build --release)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" "$nodes" "$runs" <<'PY'
import json, random, sys
d, nodes, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(44)
t0 = 1_790_000_000
for n in range(nodes):
    node = f"gpu{n:04d}"
    with open(f"{d}/{node}.jsonl", "w") as out:
        for i in range(runs):
            f = []
            if n == 17 and i % 3 == 0:
                f.append({"id": "gpu.ecc", "status": "fail", "with": 1})
            if n in (5, 6) and i in (runs - 30, runs - 20, runs - 10):
                f.append({"id": "link.slow", "status": "warn", "with": 2,
                          "partner": "gpu0006" if n == 5 else "gpu0005"})
            if n == 99 and i >= runs - 6:
                f.append({"id": "gpu.xid", "status": "fail", "gpu": 2, "xid": 79, "with": 1,
                          "at": t0 + i * 3600})
            if rng.random() < 0.002 and n not in (5, 6, 17, 99):
                f.append({"id": "sys.shm", "status": "warn", "with": 1})
            out.write(json.dumps({"run": f"c{i}", "time": t0 + i * 3600, "node": node,
                                  "mode": "cluster", "nodes": nodes, "findings": f}) + "\n")
PY
echo "history bench: $nodes nodes x $runs runs ($(du -sh "$dir" | cut -f1) of exports)"
set +e
"$bin" history --reports "$dir" --format json >"$dir/out.json"
rc=$?
set -e
[ "$rc" = 1 ] || { echo "history bench: expected exit 1 (lemons named), got $rc" >&2; exit 1; }
python3 - "$dir/out.json" "$nodes" "$runs" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
got = sorted((l["evidence"]["rule"], l["subject"]) for l in v["lemons"])
want = sorted([("repeat", "gpu.ecc"), ("pair", "gpu0005<->gpu0006"), ("xid-bursts", "GPU 2 XID 79")])
# Every node's record of run cN is one run: runs counts runs, node_runs counts each node's.
assert v["runs"] == int(sys.argv[3]), v["runs"]
assert v["node_runs"] == int(sys.argv[2]) * int(sys.argv[3]), v["node_runs"]
assert got == want, got
print(f"history bench: verdict ok: {got}")
PY
farm-bench -n 3 --warmup 0 --timeout 900 -- "$bin" history --reports "$dir" --format json
