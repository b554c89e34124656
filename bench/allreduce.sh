#!/usr/bin/env bash
# Side-by-side benchmark on network namespaces (the test harness's conventions: 10.200.0.0/16 with
# a blackhole route in the root namespace, a switch namespace with a bridge, one namespace per host
# with its own hostname and NCCL_HOSTID), in one run on the same links:
#   1. iperf3 throughput per link, and preflight's pairwise throughput on the same links;
#   2. preflight's TCP ring all-reduce busbw for 2, 4 and 8 nodes, and torch.distributed gloo's
#      all-reduce busbw over the same namespaces with the same sizes (when `$PYTHON -c "import torch"` works);
#   3. the same on a link shaped with `tc qdisc tbf rate 1gbit`, against the shaped rate.
#
# Usage (as root):  cargo build --release && bench/allreduce.sh
# Environment: PREFLIGHT_BIN (default target/release/preflight), PYTHON (default python3),
#   NODES (default "2 4 8"), SIZES (default 1M:256M), IPERF_SECONDS (default 3).
set -euo pipefail

BIN=${PREFLIGHT_BIN:-target/release/preflight}
PYTHON=${PYTHON:-python3}
NODES=${NODES:-"2 4 8"}
SIZES=${SIZES:-1M:256M}
IPERF_SECONDS=${IPERF_SECONDS:-3}
SUBNET=10.200.240
RANGE=10.200.0.0/16
ID="pfb-$$"
WORK=$(mktemp -d /tmp/preflight-bench.XXXXXX)
PORT=29510

die() { echo "bench: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
for tool in ip tc iperf3 unshare python3 timeout; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install -y iproute2 iperf3 util-linux python3 coreutils)"
done
[ -x "$BIN" ] || die "$BIN is not built (cargo build --release)"
BIN=$(realpath "$BIN")
HAVE_TORCH=0
if "$PYTHON" -c "import torch, torch.distributed" 2>/dev/null; then HAVE_TORCH=1; fi

# Kills every process in this run's namespaces and deletes them (and their /etc/netns files).
destroy_cluster() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$ID-" || true); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
        rm -rf "/etc/netns/$ns"
    done
}

cleanup() {
    destroy_cluster
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
# Nothing for the test range may ever leave this machine.
ip route replace blackhole "$RANGE"

addr() { echo "$SUBNET.$(($1 + 1))"; }
ns() { echo "$ID-h$1"; }

# make_cluster N [RATE]: N hosts node0.. on one bridge; RATE shapes both ends of every veth.
make_cluster() {
    local n=$1 rate=${2:-} sw="$ID-sw"
    ip netns add "$sw"
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    for ((k = 0; k < n; k++)); do
        local h; h=$(ns "$k")
        ip netns add "$h"
        ip -n "$h" link set lo up
        ip -n "$h" link add eth0 type veth peer name "p$k" netns "$sw"
        ip -n "$sw" link set "p$k" master br0
        ip -n "$sw" link set "p$k" up
        ip -n "$h" addr add "$(addr "$k")/24" dev eth0
        ip -n "$h" link set eth0 up
        if [ -n "$rate" ]; then
            ip netns exec "$h" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
            ip netns exec "$sw" tc qdisc add dev "p$k" root tbf rate "$rate" burst 256kb latency 50ms
        fi
        mkdir -p "/etc/netns/$h"
        {
            printf '127.0.0.1\tlocalhost\n'
            for ((j = 0; j < n; j++)); do printf '%s\tnode%s\n' "$(addr "$j")" "$j"; done
        } >"/etc/netns/$h/hosts"
    done
}

# in_host K CMD...: CMD inside host K as that host (own hostname and NCCL_HOSTID).
in_host() {
    local k=$1; shift
    ip netns exec "$(ns "$k")" unshare --uts sh -c \
        'hostname "$1" && NCCL_HOSTID="$1" && export NCCL_HOSTID && shift && exec "$@"' sh "node$k" "$@"
}

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# iperf3 A B [--bidir]: Gbit/s received at B from A (mean of both directions with --bidir).
iperf() {
    local a=$1 b=$2 extra=${3:-}
    in_host "$b" timeout 60 iperf3 -s -1 -B "$(addr "$b")" -p 5201 >/dev/null 2>&1 &
    local server=$!
    sleep 0.5
    in_host "$a" timeout 60 iperf3 -c "$(addr "$b")" -p 5201 -t "$IPERF_SECONDS" -J $extra >"$WORK/iperf.json" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    python3 - "$WORK/iperf.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    end = d["end"]
    if "sum_received_bidir_reverse" in end:
        v = (end["sum_received"]["bits_per_second"] + end["sum_received_bidir_reverse"]["bits_per_second"]) / 2
    else:
        v = end["sum_received"]["bits_per_second"]
    print(f"{v / 1e9:.3f}")
except Exception as e:
    print("nan")
PY
}

# preflight_cluster N OUT ARGS...: every host runs `preflight cluster`; rank 0's JSON goes to OUT.
preflight_cluster() {
    local n=$1 out=$2; shift 2
    PORT=$((PORT + 1))
    local pids=()
    for ((k = 0; k < n; k++)); do
        in_host "$k" timeout 600 "$BIN" cluster --nnodes "$n" --node-rank "$k" \
            --master-addr "$(addr 0)" --master-port "$PORT" --token "bench-$ID" --no-gpu \
            --format json -o "$WORK/r$k.json" "$@" >/dev/null 2>"$WORK/r$k.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    [ -s "$WORK/r0.json" ] || { cat "$WORK/r0.err" >&2; die "preflight on rank 0 wrote no report"; }
    cp "$WORK/r0.json" "$out"
}

# Byte sizes of a preflight --sizes spec (BEGIN:END[:FACTOR], K/M/G).
sizes_bytes() {
    python3 - "$1" <<'PY'
import re, sys
def b(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s.upper())
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
p = sys.argv[1].split(":")
lo, hi = b(p[0]), b(p[-1] if len(p) > 1 else p[0])
f = int(p[2]) if len(p) > 2 else 2
out = []
while lo <= hi:
    out.append(lo); lo *= f
print(",".join(map(str, out)))
PY
}

gloo() {
    local n=$1 out=$2 sizes
    sizes=$(sizes_bytes "$SIZES")
    PORT=$((PORT + 1))
    local pids=()
    for ((k = 0; k < n; k++)); do
        in_host "$k" env GLOO_SOCKET_IFNAME=eth0 timeout 900 "$PYTHON" "$(dirname "$0")/gloo_allreduce.py" \
            --rank "$k" --world "$n" --master "$(addr 0)" --port "$PORT" --sizes "$sizes" \
            >"$WORK/g$k.out" 2>"$WORK/g$k.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    cp "$WORK/g0.out" "$out"
}

echo "# preflight all-reduce benchmark: $(date -u +%FT%TZ), $(nproc) cores, $(uname -r)"
echo "# preflight $("$BIN" --version | awk '{print $2}'), $(iperf3 --version | head -1), torch: $([ $HAVE_TORCH = 1 ] && "$PYTHON" -c 'import torch; print(torch.__version__)' || echo 'not installed')"
echo

# ---- 1. pairwise throughput vs iperf3 (2 hosts, one veth pair through a bridge) ----
make_cluster 2
one_way=$(iperf 0 1)
bidir=$(iperf 0 1 --bidir)
preflight_cluster 2 "$WORK/pair.json" --thorough --allreduce off
pf=$(json "$WORK/pair.json" "min(l['throughput_gbit_s'] for l in d['links'] if l.get('throughput_gbit_s'))")
echo "## Pairwise throughput, Gbit/s (preflight sends both directions at once, so it is compared with iperf3 --bidir)"
echo "| link | iperf3 one way | iperf3 --bidir (per direction) | preflight pairwise | preflight / iperf3 --bidir |"
echo "|---|---|---|---|---|"
python3 -c "import sys; o,b,p=map(float,sys.argv[1:]); print(f'| node0<->node1 | {o:.2f} | {b:.2f} | {p:.2f} | {p/b:.2f}x |')" "$one_way" "$bidir" "$pf"
destroy_cluster
echo

# ---- 2. TCP ring all-reduce busbw vs gloo ----
echo "## All-reduce busbw, GB/s (float32 sum; time = slowest rank's mean per iteration; busbw = algbw * 2(n-1)/n)"
echo "| nodes | bytes | preflight tcp ring | gloo | preflight / gloo | wrong (preflight, gloo) |"
echo "|---|---|---|---|---|---|"
for n in $NODES; do
    make_cluster "$n"
    preflight_cluster "$n" "$WORK/ring$n.json" --allreduce tcp --sizes "$SIZES"
    if [ $HAVE_TORCH = 1 ]; then gloo "$n" "$WORK/gloo$n.out"; else : >"$WORK/gloo$n.out"; fi
    python3 - "$n" "$WORK/ring$n.json" "$WORK/gloo$n.out" <<'PY'
import json, sys
n, ring, gloo = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
rows = {r["bytes"]: r for c in ring.get("collectives", []) if c["transport"] == "tcp" for r in c["rows"]}
g = {}
for line in open(gloo):
    try:
        r = json.loads(line); g[r["bytes"]] = r
    except ValueError:
        pass
for b in sorted(rows):
    p = rows[b]
    q = g.get(b)
    ratio = f"{p['busbw_gb_s'] / q['busbw_gb_s']:.2f}x" if q and q["busbw_gb_s"] > 0 else "n/a"
    gb = f"{q['busbw_gb_s']:.3f}" if q else "n/a"
    gw = q["wrong"] if q else "n/a"
    print(f"| {n} | {b} | {p['busbw_gb_s']:.3f} | {gb} | {ratio} | {p['wrong']}, {gw} |")
if not rows:
    print(f"| {n} | - | no result: {[c.get('error') for c in ring.get('collectives', [])]} | | | |")
PY
    destroy_cluster
done
echo

# ---- 3. a link shaped to 1 Gbit/s ----
make_cluster 2 1gbit
shaped_iperf=$(iperf 0 1)
preflight_cluster 2 "$WORK/shaped.json" --thorough --allreduce tcp --sizes "${SHAPED_SIZES:-16M:64M}"
echo "## Shaped link: tc qdisc tbf rate 1gbit on both ends of each veth (target: within 10% of the rate)"
python3 - "$shaped_iperf" "$WORK/shaped.json" <<'PY'
import json, sys
iperf = float(sys.argv[1]); d = json.load(open(sys.argv[2]))
pair = min(l["throughput_gbit_s"] for l in d["links"] if l.get("throughput_gbit_s"))
rows = [r for c in d["collectives"] if c["transport"] == "tcp" for r in c["rows"]]
big = max(rows, key=lambda r: r["bytes"])
print("| measure | value | share of 1 Gbit/s |")
print("|---|---|---|")
print(f"| iperf3 one way | {iperf:.3f} Gbit/s | {iperf / 1.0:.2f} |")
print(f"| preflight pairwise (both directions at once) | {pair:.3f} Gbit/s | {pair / 1.0:.2f} |")
print(f"| preflight tcp ring busbw, 2 nodes, {big['bytes']} B | {big['busbw_gb_s']:.4f} GB/s = {big['busbw_gb_s'] * 8:.3f} Gbit/s | {big['busbw_gb_s'] * 8 / 1.0:.2f} |")
PY
destroy_cluster
