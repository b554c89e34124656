#!/bin/sh
# Slurm Prolog: checks the node before each job starts on it (see slurm.conf.fragment).
# Exit 0: the job starts. Non-zero: Slurm drains the node and requeues the job (held, unless
# SchedulerParameters=nohold_on_prolog_fail), so preflight fails only for a node problem, and
# with --drain sets the reason first,
# "preflight: [node_problem] <action>: <finding id>: <short cause>", so `sinfo -R` shows the
# cause, not "Prolog error". A user problem (such as a master port another running job holds)
# passes: the job's TaskProlog fails its tasks with the reason, and the node stays in service.
# Keep it fast: every job waits for it (a few hundred milliseconds; no network measurements).
# Each log line starts with the time (UTC) and the job id. PREFLIGHT_PROM: a node_exporter
# textfile to write the verdict's metrics to (optional).
PREFLIGHT=${PREFLIGHT:-/usr/local/bin/preflight}
LOG=${PREFLIGHT_LOG:-/var/log/slurm/preflight-prolog.log}
# shellcheck disable=SC2086 # PREFLIGHT_ARGS is a list of flags
exec "$PREFLIGHT" check ${PREFLIGHT_ARGS:-} ${PREFLIGHT_PROM:+--prom-file "$PREFLIGHT_PROM"} --slurm-prolog --drain >>"$LOG" 2>&1
