#!/bin/sh
# Slurm Prolog: checks the node before each job starts on it (see slurm.conf.fragment).
# Exit 0: the job starts. Non-zero: Slurm drains the node and requeues the job (held, unless
# SchedulerParameters=nohold_on_prolog_fail). With --drain preflight sets the reason first,
# "preflight: [node_problem|user_problem] <action>: <finding id>: <short cause>", so `sinfo -R` shows the cause, not "Prolog error".
# Keep it fast: every job waits for it (a few hundred milliseconds; no network measurements).
PREFLIGHT=${PREFLIGHT:-/usr/local/bin/preflight}
LOG=${PREFLIGHT_LOG:-/var/log/slurm/preflight-prolog.log}
# shellcheck disable=SC2086 # PREFLIGHT_ARGS is a list of flags
exec "$PREFLIGHT" check ${PREFLIGHT_ARGS:-} --slurm-prolog --drain >>"$LOG" 2>&1
