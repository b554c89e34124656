#!/bin/bash
# Preflight a set of hosts over pdsh (ssh): every node runs the same command and finds its
# own rank in --hosts; rank 0 (the first host) hosts the coordinator and every node writes
# the same cluster report.
#
#   HOSTS='gpu[01-04]' examples/pdsh.sh
#
# Needs pdsh with ssh access to every host and preflight on PATH there.
set -uo pipefail
HOSTS=${HOSTS:?set HOSTS to the nodes in rank order, e.g. HOSTS=gpu[01-04]}
MASTER_PORT=${MASTER_PORT:-29500}
# Every node must know the same secret: one random token for this run. It travels on the
# remote command line (visible in ps there while preflight runs); on shared nodes put it in a
# file only you can read and use PREFLIGHT_TOKEN=$(cat that-file) in the remote command instead.
TOKEN=${PREFLIGHT_TOKEN:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
REPORT=${REPORT:-/tmp/preflight-$(date +%Y%m%d-%H%M%S).json}

# -S: pdsh exits with the largest exit code of the remote commands.
status=0
pdsh -S -R ssh -w "$HOSTS" \
    "PREFLIGHT_TOKEN=$TOKEN preflight cluster --hosts '$HOSTS' --master-port $MASTER_PORT --format json -o $REPORT >/dev/null" \
    || status=$?
echo "preflight exit code $status (0 go, 1 findings, 2 could not run); the report is $REPORT on every node"
echo "then: scp <first-host>:$REPORT . && preflight launch --format torchrun --report $(basename "$REPORT") -- train.py"
exit "$status"
