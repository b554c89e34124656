#!/usr/bin/env bash
# The scale benchmark: N real `preflight cluster` agents on one healthy bridge, then the same
# sizes and beyond in the simulation, with what a user sees: the status, the time until every
# rank had its report, rank 0's peak RSS and the largest of the others', the lines of rank 0's
# report at 80 columns, and the JSON's size.
#
#   sudo bench/scale.sh [SIZES...]          # default: 64 128 256 (real), then 1024 2048 4096 (simulated)
#   bench/scale.sh --sim                    # the simulated sizes only (no root): sim:1024 sim:2048 sim:4096
#   PER_NS=4 sudo bench/scale.sh 256        # several agents per namespace, each its own hostname
#
# Simulated sizes (sim:N) run `preflight simulate` with faults, by default SIM_FAULTS="--slow 1
# --slow-cut 32 --bad-links 4" (a slow node, a rack behind a slow uplink, four filtered links),
# and record the time rank 0's judgment took to compute and the process's peak memory: the
# table bench/scale-growth.sh guards (2048 within 3x the time and 2.5x the memory of 1024).
#
# Real agents: one network namespace per PER_NS agents (default 1 up to 128 agents, else 4), on
# one bridge in its own namespace, addresses in 10.200.0.0/16 (blackholed in the root namespace),
# each agent under `unshare --uts` with its own hostname and NCCL_HOSTID. Results go to
# bench/results/scale-<date>.md (and stdout). Root only; everything is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${PREFLIGHT_BIN:-target/release/preflight}
[ -x "$bin" ] || cargo build --release -q
sizes=("$@")
[ "${sizes[*]:-}" != "--sim" ] || sizes=(sim:1024 sim:2048 sim:4096)
[ ${#sizes[@]} -gt 0 ] || sizes=(64 128 256 sim:1024 sim:2048 sim:4096)
real=0
for s in "${sizes[@]}"; do [[ $s == sim:* ]] || real=1; done
[ "$real" = 0 ] || [ "$(id -u)" = 0 ] || { echo "scale.sh: needs root (network namespaces)" >&2; exit 2; }
read -r -a sim_faults <<<"${SIM_FAULTS---slow 1 --slow-cut 32 --bad-links 4}"

out_dir=bench/results
mkdir -p "$out_dir"
results="$out_dir/scale-$(date -u +%Y%m%d-%H%M).md"
work=$(mktemp -d /tmp/pf-scale.XXXXXX)
tag="pfs$$"
namespaces=()

calc() { python3 -c "print($1)"; }

cleanup() {
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$real" = 1 ]; then
  # One kernel keeps every namespace's ARP entries under one cap: raise it for hundreds of hosts.
  for f in 1:8192 2:32768 3:65536; do
    cur=$(cat /proc/sys/net/ipv4/neigh/default/gc_thresh${f%%:*})
    [ "$cur" -ge "${f#*:}" ] || echo "${f#*:}" >/proc/sys/net/ipv4/neigh/default/gc_thresh${f%%:*}
  done
  ip route show type blackhole | grep -q '^blackhole 10.200.0.0/16' || ip route add blackhole 10.200.0.0/16
  # Hundreds of agents of tens of threads each outgrow the default 32768 pids.
  [ "$(cat /proc/sys/kernel/pid_max)" -ge 4194304 ] || echo 4194304 >/proc/sys/kernel/pid_max
fi

printf '| nodes | how | status | every report after | rank 0 RSS | other ranks, max RSS | table lines at 80 cols | JSON |\n' | tee "$results"
printf '|---|---|---|---|---|---|---|---|\n' | tee -a "$results"

run_real() {
  local n=$1 per=${PER_NS:-}
  [ -n "$per" ] || { if [ "$n" -le 128 ]; then per=1; else per=4; fi; }
  local nns=$(( (n + per - 1) / per ))
  local br="$tag-br"
  ip netns add "$br"; namespaces+=("$br")
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  for ((k = 0; k < nns; k++)); do
    local ns="$tag-$k"
    ip netns add "$ns"; namespaces+=("$ns")
    ip link add "v$tag$k" type veth peer name eth0 netns "$ns"
    ip link set "v$tag$k" netns "$br"
    ip -n "$br" link set "v$tag$k" master br0 up
    ip -n "$ns" addr add "10.200.$((k / 250)).$((k % 250 + 1))/16" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  # Every agent's hostname in every namespace's /etc/hosts (`ip netns exec` mounts
  # /etc/netns/NS/hosts), as a real cluster's hosts or DNS name its nodes.
  local hosts_text="127.0.0.1 localhost"$'\n'
  for ((r = 0; r < n; r++)); do
    local k=$(( r / per ))
    hosts_text+="10.200.$((k / 250)).$((k % 250 + 1)) $(printf 'node%04d' "$r")"$'\n'
  done
  for ((k = 0; k < nns; k++)); do
    mkdir -p "/etc/netns/$tag-$k"
    printf '%s' "$hosts_text" >"/etc/netns/$tag-$k/hosts"
  done
  local master=10.200.0.1
  # Two cores shared by every agent: past 256 the phases need more than 120 s.
  local timeout=120
  [ "$n" -le 256 ] || timeout=$(( n / 2 ))
  local start end
  start=$(date +%s.%N)
  local pids=()
  for ((r = 0; r < n; r++)); do
    local k=$(( r / per )) host
    host=$(printf 'node%04d' "$r")
    ip netns exec "$tag-$k" unshare --uts sh -c '
      hostname "$1"; shift
      exec /usr/bin/time -f "%M" -o "$1.rss" env NCCL_HOSTID="$2" "$3" cluster --nnodes "$4" --node-rank "$5" \
        --master-addr "$6" --master-port 29500 --token scale-bench --quick --timeout "$7" \
        --format json -o "$1.json" >/dev/null 2>"$1.err"' sh "$host" "$work/$r" "$host" "$bin" "$n" "$r" "$master" "$timeout" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  end=$(date +%s.%N)
  local status rss0 rssmax lines bytes
  status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$work/0.json" 2>/dev/null || echo "no report")
  rss0=$(tail -n 1 "$work/0.rss" 2>/dev/null || echo 0)
  rssmax=$(for ((r = 1; r < n; r++)); do tail -n 1 "$work/$r.rss" 2>/dev/null || echo 0; done | sort -n | tail -1)
  lines=$({ COLUMNS=80 NO_COLOR=1 "$bin" render --format table "$work/0.json" 2>/dev/null || true; } | wc -l)
  bytes=$(stat -c %s "$work/0.json" 2>/dev/null || echo 0)
  printf '| %d | real, %d per namespace | %s | %.1f s | %d MiB | %d MiB | %s | %.2f MB |\n' \
    "$n" "$per" "$status" "$(calc "$end - $start")" $((rss0 / 1024)) $((rssmax / 1024)) "$lines" \
    "$(calc "$bytes / 1000000")" | tee -a "$results"
  # What failed, when something did (finding ids and their first summary), and the exit codes.
  python3 - "$work/0.json" <<'PY' | tee -a "$results" || true
import json, sys
r = json.load(open(sys.argv[1]))
bad = [f for f in r["findings"] if f["status"] in ("fail", "error")]
for f in bad[:5]:
    print(f"    {f['status']} {f['id']} (node {f['node']}): {f['summary'][:300]}")
if len(bad) > 5:
    print(f"    ... {len(bad) - 5} more")
m = r.get("measurement") or {}
print("    measurement:", json.dumps({k: m.get(k) for k in ("links_total", "links_retried", "throughput_schedule", "throughput_rounds", "phases")}))
PY
  # /usr/bin/time notes "Command exited with non-zero status N" above the RSS line.
  codes=$(for ((r = 0; r < n; r++)); do grep -o 'status [0-9]*' "$work/$r.rss" 2>/dev/null || echo 'status 0'; done | sort | uniq -c | tr -s ' ' | paste -sd';')
  echo "    exit codes: $codes" | tee -a "$results"
  COLUMNS=80 NO_COLOR=1 "$bin" render --format table "$work/0.json" >"$out_dir/scale-$n-rank0.txt" 2>/dev/null || true
  cp "$work/0.json" "$out_dir/scale-$n-rank0.json" 2>/dev/null || true   # git-ignored: large
  # Tear this size down before the next.
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  namespaces=()
}

run_sim() {
  local n=$1
  local rss t0 t1 computed heading
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/sim.rss" "$bin" simulate --nodes "$n" --quick "${sim_faults[@]}" \
    --report "$work/sim.json" >"$work/sim.txt"
  t1=$(date +%s.%N)
  rss=$(tail -n 1 "$work/sim.rss")
  local predicted status lines bytes
  heading=$(head -n 1 "$work/sim.txt")
  computed=$(sed -n 's/.*computed in \([0-9.]*\) s.*/\1/p' <<<"$heading")
  predicted=$(awk '/^  total/ {print $2}' "$work/sim.txt")
  status=$(awk '/^status:/ {print $2}' "$work/sim.txt")
  lines=$({ COLUMNS=80 NO_COLOR=1 "$bin" render --format table "$work/sim.json" 2>/dev/null || true; } | wc -l)
  bytes=$(stat -c %s "$work/sim.json")
  printf '| %d | simulated (100 Gbit/s, 10 us; %s) | %s | %s s predicted (judgment computed in %s s; %.1f s with the report written) | %d MiB (the whole simulation) | - | %s | %.2f MB |\n' \
    "$n" "${sim_faults[*]:-no faults}" "$status" "$predicted" "$computed" "$(calc "$t1 - $t0")" $((rss / 1024)) "$lines" "$(calc "$bytes / 1000000")" | tee -a "$results"
  sed 's/^/    /' "$work/sim.txt" >>"$results"
  # Rank 0's memory with facts of a real size: every node given an 8-GPU HGX node's facts.
  "$bin" simulate --nodes "$n" --quick "${sim_faults[@]}" --facts tests/fixtures/facts/gpu-hgx-faults.json 2>&1 \
    | head -n 1 | grep -o 'peak memory [0-9]* MiB' \
    | sed 's/^/    with an 8-GPU node'"'"'s facts (tests\/fixtures\/facts\/gpu-hgx-faults.json): /' \
    | tee -a "$results" || true
}

for s in "${sizes[@]}"; do
  case "$s" in
    sim:*) run_sim "${s#sim:}" ;;
    *) run_real "$s" ;;
  esac
done
echo "results: $results"
