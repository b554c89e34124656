#!/bin/sh
# Slurm HealthCheckProgram: checks this node every HealthCheckInterval (see slurm.conf.fragment).
# It drains the node only for a node problem that fails now, with
# Reason="preflight: [node_problem] <action>: <finding id>: <short cause>"; the first reason
# (and its time) is kept while the fault holds, a new finding is appended. It never drains for
# a warning, a user problem (the job's launch or environment), or a port, GPU or shared memory
# a running job holds (that job's own). It resumes a node it drained as soon as nothing fails;
# a lemon (a fault that comes and goes) is said in its log, in the reason of a node drained for
# a failure, and in Prometheus, and drains only with --drain-lemons in PREFLIGHT_ARGS. A reason
# an operator set is never replaced; down and maintenance nodes are left alone. Slurm only logs
# a health check's exit status (0 healthy, 1 a fail finding, 2 preflight or scontrol could not
# run). Each log line starts with the time (UTC) and the job id, if any.
#
# slurmd runs it as root with an empty environment: give full paths. preflight finds the
# slurm.conf slurmd uses (its -f PATH or SLURM_CONF, else the configless cache) when
# SLURM_CONF is unset. PREFLIGHT_ARGS: the job shape every node must meet, e.g.
# "--expect-gpus 8" (or "--no-gpu" on CPU nodes). PREFLIGHT_PROM: a node_exporter textfile
# (e.g. /var/lib/node_exporter/textfile/preflight.prom) for fleet alerting.
PREFLIGHT=${PREFLIGHT:-/usr/local/bin/preflight}
LOG=${PREFLIGHT_LOG:-/var/log/slurm/preflight-health.log}
# shellcheck disable=SC2086 # PREFLIGHT_ARGS is a list of flags
exec "$PREFLIGHT" check ${PREFLIGHT_ARGS:-} ${PREFLIGHT_PROM:+--prom-file "$PREFLIGHT_PROM"} --slurm-health --drain >>"$LOG" 2>&1
