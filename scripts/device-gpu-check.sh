#!/usr/bin/env bash
# The GPU checks on a real GPU node, in one bounded run: what `preflight check` prints there
# (every GPU health check), the JSON, how long the checks take with and without the GPUs, a
# one-node NCCL all-reduce over the node's GPUs, and two ranks sharing the node over NCCL
# (each with its own NCCL_HOSTID, on 127.0.0.1). Every process has its own timeout.
#
#   scripts/device-gpu-check.sh [BINARY]      # results under $OUT (default: a temp dir)
#
# Needs the NVIDIA driver; PyTorch's NCCL is found as `preflight check` finds it.
set -u
bin=${1:-target/release/preflight}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
step() { printf '\n===== %s\n' "$*"; }

step "machine"
nvidia-smi -L 2>&1 | head -8
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode,pstate --format=csv 2>&1 | head -9
"$bin" --version

step "preflight check -v (every check, passes included)"
timeout 90 "$bin" check -v >"$out/check-v.txt" 2>&1
echo "exit $?"
cat "$out/check-v.txt"

step "preflight check --format json"
timeout 90 "$bin" check --format json -o "$out/check.json" >/dev/null 2>"$out/check-json.err"
echo "exit $?"
python3 - "$out/check.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r["findings"]:
    if f["id"].startswith(("gpu.", "pcie.", "nccl.")):
        print(f'{f["status"]:5} {f["id"]:22} {f["subject"] or "":16} {f["summary"][:150]}')
nh = r["nodes"][0]["facts"]["gpu"].get("node_health") or {}
for b in nh.get("bandwidth", []):
    print("bandwidth", b)
print("bandwidth_skipped:", nh.get("bandwidth_skipped"))
EOF

step "timing: facts with the GPUs vs --no-gpu (no bandwidth measurement in facts), 10 runs each"
python3 - "$bin" <<'EOF'
import subprocess, sys, time, statistics
b = sys.argv[1]
def t(args):
    xs = []
    for _ in range(10):
        s = time.perf_counter()
        subprocess.run([b] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        xs.append((time.perf_counter() - s) * 1000)
    return min(xs), statistics.median(xs), max(xs)
for name, args in [("facts --no-gpu", ["facts", "--no-gpu"]), ("facts (GPU checks)", ["facts"]),
                   ("check (GPU checks + copy bandwidth)", ["check"])]:
    lo, med, hi = t(args)
    print(f"{name:40} min {lo:7.1f} ms  median {med:7.1f} ms  max {hi:7.1f} ms")
EOF

step "check --thorough: the NCCL all-reduce over this node's GPUs, judged"
timeout 180 "$bin" check --thorough --format json -o "$out/thorough.json" >/dev/null 2>"$out/thorough.err"
echo "exit $?"
python3 - "$out/thorough.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("status", r["status"])
for c in r.get("collectives", []):
    print(c["transport"], "ranks", c["ranks"], "net", c.get("net"), "error", c.get("error"))
    for row in c["rows"]:
        print("  ", row)
for f in r["findings"]:
    if f["id"].startswith("collective."):
        print(f'{f["status"]:5} {f["id"]:22} {f["summary"][:200]}')
EOF

step "two ranks sharing the node over NCCL (NCCL_HOSTID per rank, 127.0.0.1)"
for r in 0 1; do
  NCCL_HOSTID="devhost$r" timeout 150 "$bin" cluster --nnodes 2 --node-rank $r \
      --master-addr 127.0.0.1 --master-port 29620 --token dev --quick --allreduce nccl \
      --timeout 60 --format json -o "$out/two-$r.json" >"$out/two-$r.txt" 2>&1 &
done
wait
for r in 0 1; do echo "rank $r:"; tail -n 30 "$out/two-$r.txt"; done
python3 - "$out/two-0.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("status", r["status"])
for n in r["nodes"]:
    nh = n["facts"]["gpu"].get("node_health") or {}
    print("rank", n["rank"], "copies", [(b["kind"], round(b["gb_s"], 1)) for b in nh.get("bandwidth", [])], nh.get("bandwidth_skipped"))
for f in r["findings"]:
    if f["id"] in ("cluster.gpu-health", "cluster.gpus", "collective.busbw", "collective.wrong"):
        print(f'{f["status"]:5} {f["id"]:22} {f["summary"][:200]}')
for c in r.get("collectives", []):
    print(c["transport"], "ranks", c["ranks"], "net", c.get("net"))
    for row in c["rows"]:
        print("  ", row)
EOF

if [ -x target/debug/gpu-tests ]; then
  step "the cudarc bandwidth unit tests on a real GPU"
  timeout 120 target/debug/gpu-tests gpu_bw --nocapture 2>&1 | tail -n 20
fi
echo "results in $out"
