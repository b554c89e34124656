#!/bin/sh
# Slurm TaskProlog: prints `export NAME=value` lines (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME,
# NCCL_IB_DISABLE, NCCL_IB_HCA ...) that slurmstepd sets in every task of every step, so the
# training script gets the advice unedited. A value preflight cannot decide on this node is not
# printed; it always exits 0, so it never stops a task.
PREFLIGHT=${PREFLIGHT:-/usr/local/bin/preflight}
LOG=${PREFLIGHT_LOG:-/dev/null}
# shellcheck disable=SC2086 # PREFLIGHT_ARGS is a list of flags
exec "$PREFLIGHT" check ${PREFLIGHT_ARGS:-} --format task-prolog 2>>"$LOG"
