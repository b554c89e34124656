#!/bin/sh
# Slurm HealthCheckProgram: checks this node every HealthCheckInterval (see slurm.conf.fragment).
# On a fail finding that is the node's problem it drains the node with
# Reason="preflight: [node_problem] <action>: <finding id>: <short cause>"; a user problem (the
# job's launch or environment) fails the check but never drains. Once the node has no node
# problem left it resumes it, but only if preflight set the reason. A reason an
# operator set is never replaced; down and maintenance nodes are left alone. Slurm only logs a
# health check's exit status (0 healthy, 1 a fail finding, 2 preflight or scontrol could not run).
#
# slurmd runs it as root with an empty environment: give full paths. PREFLIGHT_ARGS: the job
# shape every node must meet, e.g. "--expect-gpus 8" (or "--no-gpu" on CPU nodes).
PREFLIGHT=${PREFLIGHT:-/usr/local/bin/preflight}
LOG=${PREFLIGHT_LOG:-/var/log/slurm/preflight-health.log}
# shellcheck disable=SC2086 # PREFLIGHT_ARGS is a list of flags
exec "$PREFLIGHT" check ${PREFLIGHT_ARGS:-} --slurm-health --drain >>"$LOG" 2>&1
