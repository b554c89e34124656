#!/usr/bin/env bash
# The per-rail NCCL pair test (issue 34) end to end on one GPU machine without RDMA: two
# `preflight cluster` ranks on 127.0.0.1, each with its own NCCL_HOSTID, share GPU 0; a fixture
# sysfs tree gives both the same one-rail RDMA inventory (GPU 0 beside mlx5_0), and the
# test-only knob PREFLIGHT_TEST_RAIL_NCCL_NET=Socket runs the rail children over sockets (there
# is no HCA) and accepts that path. Prints the rail findings, the rail phase's log lines and
# the JSON's per-rail evidence. Every process has its own timeout.
#
#   scripts/device-rail-pair.sh [BINARY]      # results under $OUT (default: a temp dir)
#
# Needs the NVIDIA driver and PyTorch's NCCL (found as `preflight check` finds it). Without a
# GPU, PREFLIGHT_TEST_FAKE_GPUS=1 and PREFLIGHT_NCCL_WORKER=tests/fixtures/nccl-worker/fake-worker.sh
# run the same flow with the fake worker.
set -u
bin=${1:-target/release/preflight}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT

# One PCIe switch holding GPU 0 (0000:11:00.0) and mlx5_0 (0000:12:00.0), NDR, ACTIVE.
dev=/sys/devices/pci0000:00/0000:00:01.0/0000:10:00.0
mkdir -p "$tree$dev/0000:11:00.0" "$tree$dev/0000:12:00.0/infiniband_verbs/uverbs0" \
  "$tree/sys/bus/pci/devices" "$tree/sys/class/infiniband" "$tree/dev/infiniband" \
  "$tree/sys/module/mlx5_core" "$tree/usr/lib/x86_64-linux-gnu"
for b in 0000:11:00.0 0000:12:00.0; do
  ln -s "../../../..$dev/$b" "$tree/sys/bus/pci/devices/$b"
done
ib=$dev/0000:12:00.0/infiniband/mlx5_0
mkdir -p "$tree$ib/ports/1/counters"
ln -s "../../..$ib" "$tree/sys/class/infiniband/mlx5_0"
ln -s ../.. "$tree$ib/device"
ln -s ../../../../../bus/pci/drivers/mlx5_core "$tree$dev/0000:12:00.0/driver"
echo 24.10-1.1.4 >"$tree/sys/module/mlx5_core/version"
echo 28.39.1002 >"$tree$ib/fw_ver"
echo MT4129 >"$tree$ib/hca_type"
echo "4: ACTIVE" >"$tree$ib/ports/1/state"
echo "5: LinkUp" >"$tree$ib/ports/1/phys_state"
echo "400 Gb/sec (4X NDR)" >"$tree$ib/ports/1/rate"
echo InfiniBand >"$tree$ib/ports/1/link_layer"
for c in symbol_error link_error_recovery link_downed port_rcv_errors \
  excessive_buffer_overrun_errors local_link_integrity_errors; do
  echo 0 >"$tree$ib/ports/1/counters/$c"
done
: >"$tree/dev/infiniband/uverbs0"
: >"$tree/usr/lib/x86_64-linux-gnu/libibverbs.so.1"

export PREFLIGHT_TEST_RDMA_ROOT=$tree
export PREFLIGHT_TEST_FAKE_GPU_BUSES=00000000:11:00.0
export PREFLIGHT_TEST_RAIL_NCCL_NET=Socket
"$bin" --version
for r in 0 1; do
  NCCL_HOSTID="railhost$r" timeout 200 "$bin" cluster --nnodes 2 --node-rank $r \
    --master-addr 127.0.0.1 --master-port 29630 --token rails --quick --allreduce nccl \
    --sizes 1M --timeout 90 --format json -o "$out/rail-$r.json" >"$out/rail-$r.txt" 2>&1 &
done
wait
for r in 0 1; do
  echo "===== rank $r: the per-rail phase's log lines"
  grep -E "per-rail|lost rank" "$out/rail-$r.txt"
done
python3 - "$out/rail-0.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("status", r["status"], "phases", r.get("measurement", {}).get("phases"))
for f in r["findings"]:
    if f["id"] in ("ib.rail-fault", "ib.counters-grew"):
        print(f'{f["status"]:5} {f["id"]:18} {f.get("subject") or "":28} {f["summary"]}')
        ev = f.get("evidence") or {}
        if ev:
            print("      evidence", json.dumps(ev)[:400])
print("advice NCCL_IB_HCA:", (r.get("recommendation") or {}).get("env", {}).get("NCCL_IB_HCA"))
EOF
