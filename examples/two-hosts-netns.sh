#!/usr/bin/env bash
# Try `preflight cluster` on one machine: two test "hosts" in network namespaces joined by a
# veth pair (10.200.77.1 and 10.200.77.2), each running the real binary as one node would.
# Each host has its own hostname (a UTS namespace: demo-a, demo-b) and its own /etc/hosts
# (`ip netns exec` bind-mounts /etc/netns/<ns>/hosts), so the report names two hosts as two
# real nodes would.
#
# As root (prefix `sudo` otherwise):
#   examples/two-hosts-netns.sh            # a healthy pair: exit 0, the advice for both
#   examples/two-hosts-netns.sh --firewall # host b drops NCCL's high ports: link.unreachable
#
# Needs root, iproute2, unshare and hostname (util-linux, hostname; and iptables for --firewall),
# and `preflight`: on PATH, PREFLIGHT=path, or this checkout's `cargo build --release` build
# (target/release/preflight). Nothing is created outside the two namespaces but their
# /etc/netns/<ns>/hosts and the two reports' copies in /tmp (pf-demo-rank1.txt); the runs keep
# no history (--history off), and the namespaces and hosts files are deleted on exit, whatever
# happens.
set -euo pipefail

CHECKOUT=$(cd "$(dirname "$0")/.." && pwd)
BUILT=$CHECKOUT/target/release/preflight
PREFLIGHT=${PREFLIGHT:-$(command -v preflight || true)}
if [[ -z $PREFLIGHT && -x $BUILT ]]; then
    PREFLIGHT=$BUILT
fi
FAULT=${1:-}
A=pf-demo-a
B=pf-demo-b
PORT=29500

if [[ $(id -u) -ne 0 ]]; then
    echo "run as root (network namespaces need it): sudo $0 $*" >&2
    exit 2
fi
if [[ -z $PREFLIGHT || ! -x $PREFLIGHT ]]; then
    echo "preflight not found: build it in this checkout with \`cargo build --release\` (in $CHECKOUT;" >&2
    echo "the script then finds $BUILT), put it on PATH, or set PREFLIGHT=/path/to/preflight" >&2
    exit 2
fi
for tool in ip timeout unshare hostname; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 2; }
done

cleanup() {
    ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -f "/etc/netns/$A/hosts" "/etc/netns/$B/hosts"
    rmdir "/etc/netns/$A" "/etc/netns/$B" 2>/dev/null || true
}
trap cleanup EXIT
cleanup

ip netns add "$A"
ip netns add "$B"
ip link add eth1 netns "$A" type veth peer name eth1 netns "$B"
ip -n "$A" addr add 10.200.77.1/24 dev eth1
ip -n "$B" addr add 10.200.77.2/24 dev eth1
for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth1 up
    # The host's own /etc/hosts: its name on its address, the other host by name.
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1\tlocalhost\n10.200.77.1\tdemo-a\n10.200.77.2\tdemo-b\n' >"/etc/netns/$ns/hosts"
done

if [[ $FAULT == --firewall ]]; then
    command -v iptables >/dev/null || { echo "--firewall needs iptables" >&2; exit 2; }
    # Host b accepts the master port but drops every other new TCP connection from outside.
    ip netns exec "$B" iptables -A INPUT -p tcp --dport "$PORT" -j ACCEPT
    ip netns exec "$B" iptables -A INPUT ! -i lo -p tcp --syn --dport 1024:65535 -j DROP
fi

# Each host runs preflight in its own UTS namespace named demo-a or demo-b; NCCL_HOSTID gives
# it its own host identity too (the two share one kernel and one boot id).
node() {
    local ns=$1 rank=$2 name=$3
    ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$name" \
        env NCCL_HOSTID="$name" timeout 60 "$PREFLIGHT" cluster \
        --nnodes=2 --node-rank="$rank" --master-addr=10.200.77.1 --master-port="$PORT" \
        --token=demo-two-hosts --timeout=10 --quick --history off
}

node "$B" 1 demo-b >/tmp/pf-demo-rank1.txt 2>&1 &
rank1=$!
set +e
node "$A" 0 demo-a
code=$?
wait "$rank1"
set -e
echo
echo "rank 0 exited $code; rank 1's own output is in /tmp/pf-demo-rank1.txt"
exit "$code"
