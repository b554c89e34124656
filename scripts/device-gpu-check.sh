#!/usr/bin/env bash
# The GPU checks on a real GPU node, in one bounded run: what `preflight check` prints there
# (every GPU health check), the JSON, how long the checks take with and without the GPUs, a
# one-node NCCL all-reduce over the node's GPUs, and two ranks sharing the node over NCCL
# (each with its own NCCL_HOSTID, on 127.0.0.1); the GEMM test (issue 35); and the per-rail
# pair test's child run as two hosts on the one GPU over sockets (issue 34). Every process has
# its own timeout.
#
#   scripts/device-gpu-check.sh [BINARY]      # results under $OUT (default: a temp dir)
#   STEPS="gemm rails" scripts/device-gpu-check.sh   # some steps only (default: all of
#        machine check json timing thorough two gemm rails)
#
# Needs the NVIDIA driver; PyTorch's NCCL is found as `preflight check` finds it.
set -u
bin=${1:-target/release/preflight}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
steps=${STEPS:-machine check json timing thorough two gemm rails}
want() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
step() { printf '\n===== %s\n' "$*"; }

if want machine; then
step "machine"
nvidia-smi -L 2>&1 | head -8
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode,pstate --format=csv 2>&1 | head -9
"$bin" --version
fi

if want check; then
step "preflight check -v (every check, passes included)"
timeout 90 "$bin" check -v >"$out/check-v.txt" 2>&1
echo "exit $?"
cat "$out/check-v.txt"
fi

if want json; then
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

fi

if want timing; then
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

fi

if want thorough; then
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

fi

if want two; then
step "two ranks sharing the node over NCCL (NCCL_HOSTID per rank, 127.0.0.1)"
for r in 0 1; do
  NCCL_HOSTID="devhost$r" timeout 150 "$bin" cluster --nnodes 2 --node-rank $r \
      --master-addr 127.0.0.1 --master-port 29620 --token dev --quick --gemm --allreduce nccl \
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
    if f["id"] in ("cluster.gpu-health", "cluster.gpus", "collective.busbw", "collective.wrong") or f["id"].startswith("gpu.compute"):
        print(f'{f["status"]:5} {f["id"]:22} {f["summary"][:200]}')
for c in r.get("collectives", []):
    print(c["transport"], "ranks", c["ranks"], "net", c.get("net"))
    for row in c["rows"]:
        print("  ", row)
EOF

fi

if want gemm; then
step "preflight check --gemm --burn 20: the GEMM test through cuBLAS, judged"
timeout 240 "$bin" check --gemm --burn 20 -o "$out/gemm.json" >"$out/gemm.txt" 2>"$out/gemm.err"
echo "exit $?"
grep -E -A3 "compute|TFLOP" "$out/gemm.txt" | head -n 40
python3 - "$out/gemm.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["nodes"][0]["facts"]["gpu"].get("compute") or {}
print("skipped", c.get("skipped"), "error", c.get("error"), "cublas", c.get("cublas_version"), c.get("cublas_library"))
for g in c.get("gpus", []):
    print("gpu", g["gpu"], g["model"], g.get("compute_capability"), g.get("error"))
    for x in g["rates"]:
        print("   rate", x)
    for x in g["checks"]:
        print("   check", x)
    print("   state", g.get("state"))
for t in (c.get("burn") or {}).get("gpus", []):
    print("burn gpu", t["gpu"], [(round(s["t_s"]), round(s["tflops"]), s.get("sm_clock_mhz"), s.get("temperature_c"), s.get("power_w")) for s in t["samples"]])
for f in r["findings"]:
    if f["id"].startswith("gpu.compute"):
        print(f'{f["status"]:5} {f["id"]:22} {f["summary"][:400]}')
EOF
step "gemm-worker alone, twice: the checksums must be the same bits on every run"
cublas_dir=$(timeout 60 python3 -c 'import torch, os; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "cublas", "lib"))' 2>/dev/null)
for i in 1 2; do
  LD_LIBRARY_PATH="$cublas_dir:${LD_LIBRARY_PATH:-}" timeout 120 "$bin" gemm-worker --gpus 1 >"$out/worker-$i.jsonl" 2>"$out/worker-$i.err"
  echo "run $i exit $?"
  grep -E '"check"|"error"|"gpu"' "$out/worker-$i.jsonl"
done
fi

if want rails; then
step "the per-rail pair child on one GPU as two hosts (NCCL_HOSTID), over sockets"
nccl_lib=$(timeout 60 python3 -c 'import torch, os, glob; print(sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "nccl", "lib", "libnccl.so*")))[0])' 2>/dev/null)
libdir=$(mktemp -d)
ln -s "$nccl_lib" "$libdir/libnccl.so"
mkdir -p "$out/rail-logs"
mkfifo "$libdir/in0" "$libdir/in1"
for r in 0 1; do
  ( CUDA_VISIBLE_DEVICES=0 NCCL_HOSTID="railhost$r" NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
    NCCL_CROSS_NIC=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    NCCL_DEBUG_FILE="$out/rail-logs/rank$r.%p.log" LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" \
    timeout 120 "$bin" nccl-worker --nranks 2 --first-rank $r --gpus 1 --sizes 268435456 \
      --warmup 2 --iters 10 <"$libdir/in$r" >"$out/rail-$r.jsonl" 2>"$out/rail-$r.err"
    echo "rank $r exit $?" ) &
done
exec 3>"$libdir/in0" 4>"$libdir/in1"
id=""
for _ in $(seq 1 300); do
  id=$(grep -m1 unique_id "$out/rail-0.jsonl" 2>/dev/null) && [ -n "$id" ] && break
  sleep 0.2
done
echo "$id" >&3
echo "$id" >&4
exec 3>&- 4>&-
wait
cat "$out/rail-0.jsonl" "$out/rail-1.jsonl"
grep -h -E "NCCL version|Using network|via NET|NET/Socket :" "$out"/rail-logs/*.log | sed 's/^[^ ]* //' | sort -u | head -n 20
rm -rf "$libdir"
fi

if [ -x target/debug/gpu-tests ]; then
  step "the cudarc bandwidth unit tests on a real GPU"
  timeout 120 target/debug/gpu-tests gpu_bw --nocapture 2>&1 | tail -n 20
fi
echo "results in $out"
