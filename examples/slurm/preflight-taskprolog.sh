#!/bin/sh
# Slurm TaskProlog: prints `export NAME=value` lines (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME,
# NCCL_IB_DISABLE, NCCL_IB_HCA ...) that slurmstepd sets in every task of every step, so the
# training script gets the advice unedited. A value preflight cannot decide on this node is not
# printed; a value the user set is kept when it works here, and replaced with a `print` line in
# the task's output when it does not (which value, why, and what the task gets instead).
# It exits 0 (the task runs) except when the job's MASTER_PORT is held by another running job on
# this node: then its `print` line names that job and a free port, and the task fails (the
# node is fine and stays in service).
# PREFLIGHT_PROM: a node_exporter textfile to write the verdict's metrics to (optional).
PREFLIGHT=${PREFLIGHT:-/usr/local/bin/preflight}
LOG=${PREFLIGHT_LOG:-/dev/null}
# shellcheck disable=SC2086 # PREFLIGHT_ARGS is a list of flags
exec "$PREFLIGHT" check ${PREFLIGHT_ARGS:-} ${PREFLIGHT_PROM:+--prom-file "$PREFLIGHT_PROM"} --format task-prolog 2>>"$LOG"
