#!/usr/bin/env bash
# The checks that need a real GPU (issues 34 and 35), run on a lent GPU machine that has the
# driver, CUDA and PyTorch with its NCCL but no Rust: build here, carry target/release/preflight,
# and run `bash scripts/gpu-check.sh OUT_DIR`. Every step has its own timeout; nothing changes the
# GPU's settings.
#  1. `preflight check --gemm --burn 20`: the real GEMM worker through cuBLAS, judged.
#  2. the worker alone, twice: the checksums must be the same bits on every run.
#  3. the per-rail pair test's child twice on the one GPU as two "hosts" (distinct NCCL_HOSTID)
#     over sockets (no InfiniBand here), with NCCL_DEBUG=INFO logs kept as fixtures.
set -u
out=${1:?usage: gpu-check.sh OUT_DIR}
mkdir -p "$out"
bin=${PREFLIGHT_BIN:-target/release/preflight}
log() { echo "== $*"; }

log "machine"
timeout 20 nvidia-smi -L
timeout 60 python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
site=$(timeout 60 python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
cublas_dir="$site/nvidia/cublas/lib"
nccl_lib=$(ls "$site"/nvidia/nccl/lib/libnccl.so* 2>/dev/null | head -n1)
echo "site=$site cublas_dir=$cublas_dir nccl=$nccl_lib"

log "1. preflight check --gemm --burn 20"
timeout 240 "$bin" check --gemm --burn 20 -o "$out/check-gemm.json" > "$out/check-gemm.txt" 2> "$out/check-gemm.err"
echo "exit $?"
grep -E "compute|GEMM|cuBLAS|TFLOP" "$out/check-gemm.txt" | head -n 30

log "2. gemm-worker twice (checksums stable across runs)"
for i in 1 2; do
  LD_LIBRARY_PATH="$cublas_dir:${LD_LIBRARY_PATH:-}" timeout 180 "$bin" gemm-worker --gpus 1 > "$out/worker-run$i.jsonl" 2> "$out/worker-run$i.err"
  echo "run $i exit $?"
  cat "$out/worker-run$i.jsonl"
done

log "3. two NCCL ranks on one GPU, distinct NCCL_HOSTID, over sockets"
libdir=$(mktemp -d)
ln -s "$nccl_lib" "$libdir/libnccl.so"
rm -f /tmp/pf-in0 /tmp/pf-in1
mkfifo /tmp/pf-in0 /tmp/pf-in1
mkdir -p "$out/nccl-logs"
for r in 0 1; do
  ( CUDA_VISIBLE_DEVICES=0 NCCL_HOSTID="preflight-host-$r" NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
    NCCL_CROSS_NIC=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    NCCL_DEBUG_FILE="$out/nccl-logs/rank$r.%p.log" LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" \
    timeout 120 "$bin" nccl-worker --nranks 2 --first-rank $r --gpus 1 --sizes 268435456 --warmup 2 --iters 10 \
    < /tmp/pf-in$r > "$out/nccl-rank$r.jsonl" 2> "$out/nccl-rank$r.err"; echo "rank $r exit $?" ) &
done
exec 3>/tmp/pf-in0 4>/tmp/pf-in1
id=""
for _ in $(seq 1 300); do
  id=$(grep -m1 unique_id "$out/nccl-rank0.jsonl" 2>/dev/null) && [ -n "$id" ] && break
  sleep 0.2
done
echo "$id" >&3
echo "$id" >&4
wait
exec 3>&- 4>&-
cat "$out/nccl-rank0.jsonl" "$out/nccl-rank1.jsonl"
grep -h -E "NCCL version|Using network|via NET|NET/Socket" "$out"/nccl-logs/*.log | sort | uniq | head -n 20
rm -rf "$libdir" /tmp/pf-in0 /tmp/pf-in1
log "done"
