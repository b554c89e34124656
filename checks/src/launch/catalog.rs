//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        AS_WRITTEN,
        "warn",
        "the job as given (its master address, its NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME) \
         would hang: the advice changes it because what it names cannot carry the job",
        "A master address on a network that passes only the master port lets every node join \
         the rendezvous, then NCCL's and Gloo's connections on random high ports time out \
         (gloo: `Timed out waiting ... for recv operation`, NCCL: a watchdog timeout). \
         preflight picks a working network and changes the master address or interface; \
         this finding says that the command as written would hang, and why. A change made \
         only for speed is a note (pass).",
        "Launch with the master address and the environment the report recommends (its \
         launch commands carry them), or open NCCL's ports on the network you gave.",
    )
    .user(Action::FixConfig),
    entry(
        ARGS,
        "fail / warn",
        "torchrun would reject the command line (an option missing its value, a value on a flag, no script); or the line's program is not torchrun: warn for accelerate launch and deepspeed (read for what maps), fail for any other program",
        "`preflight torchrun` reads your command as torchrun's argparse does; a command it \
         cannot read is one torchrun stops with `error: the following arguments are required` \
         or `expected one argument`, after the scheduler already gave you the nodes.",
        "Write the launch in torchrun's form, options first and the script last: \
         `torchrun --nnodes=N --nproc-per-node=G --rdzv-backend=c10d \
         --rdzv-endpoint=HOST:PORT train.py ARGS` (see `torchrun --help`).",
    )
    .user(Action::FixConfig),
    entry(
        UNKNOWN_FLAG,
        "fail",
        "an option before the script that torchrun does not know (with \"did you mean\"), or `--use-env` under torchrun",
        "torchrun rejects options it does not know (`error: unrecognized arguments`), and a \
         script option placed before the script name goes to torchrun instead of the script. \
         `--use-env` exists only in the legacy `torch.distributed.launch`.",
        "Correct the spelling (torchrun accepts `--nproc-per-node` and `--nproc_per_node`), or \
         move the script's own options after the script name: `torchrun [torchrun options] \
         train.py [script options]`; the printed command drops `--use-env` under torchrun.",
    )
    .user(Action::FixConfig),
    entry(
        NNODES,
        "fail / warn",
        "`--nnodes` malformed, MIN>MAX or 0, missing in a multi-node command, or an elastic range with static rendezvous (warn)",
        "torchrun waits until `--nnodes` (or the minimum of an elastic `MIN:MAX` range) nodes \
         join; a wrong count waits for nodes that never come, until the rendezvous timeout, \
         and the static rendezvous cannot be elastic.",
        "Give the real node count (`--nnodes=4`) or a valid range with c10d \
         (`--nnodes=2:4 --rdzv-backend=c10d`), the same on every node.",
    )
    .user(Action::FixConfig),
    entry(
        NODE_RANK,
        "fail",
        "node rank not below nnodes, not a number, or missing in a static multi-node job",
        "With the static rendezvous every node needs a distinct `--node-rank` in 0..nnodes-1; \
         torchrun's default 0 on every node makes them all claim rank 0 and the rendezvous \
         never completes.",
        "Give each node its own rank, 0 on the master: `--node-rank=$SLURM_NODEID`, \
         `--node-rank=$NODE_RANK`, or use `--rdzv-backend=c10d`, which assigns ranks itself.",
    )
    .user(Action::FixConfig),
    entry(
        NPROC,
        "fail / warn",
        "more workers than visible GPUs (lowered to the count), `gpu` with none visible, an invalid value; warn when GPUs would sit idle",
        "More processes than visible GPUs gives `invalid device ordinal` or `Duplicate GPU \
         detected`; fewer leaves GPUs idle. `gpu`, `auto` and `cpu` values are resolved as \
         torchrun does.",
        "Use the number of visible GPUs: `torchrun --nproc-per-node=<visible> ...` (or \
         `--nproc-per-node=gpu`), or fix `CUDA_VISIBLE_DEVICES`.",
    )
    .user(Action::FixConfig),
    entry(
        STANDALONE,
        "fail / warn",
        "`--standalone` with multi-node flags (dropped when an endpoint is given); warn when it ignores rendezvous flags",
        "`--standalone` makes torchrun start its own rendezvous on localhost with a random port \
         and ignore `--rdzv-endpoint`/`--master-addr`, so nodes never meet: each trains alone.",
        "Use `--standalone` only for one node; for several, drop it and give \
         `--nnodes=N --rdzv-backend=c10d --rdzv-endpoint=<rank0 IP>:29500`.",
    )
    .user(Action::FixConfig),
    entry(
        RDZV_BACKEND,
        "fail / warn",
        "unknown rendezvous backend (a near miss is corrected to c10d); etcd needs an etcd server",
        "torchrun knows `static`, `c10d`, `etcd` and `etcd-v2`; a misspelled backend fails with \
         `ValueError: unknown rendezvous backend`, and etcd needs a reachable etcd server and \
         the `python-etcd` module.",
        "Use `--rdzv-backend=c10d` (no extra service) with `--rdzv-endpoint=<rank0 IP>:29500`, \
         or the static form `--master-addr`/`--master-port` with `--node-rank`.",
    )
    .user(Action::FixConfig),
    entry(
        RDZV_CONF,
        "fail",
        "`--rdzv-conf` is not KEY=VALUE,...",
        "torchrun parses `--rdzv-conf` as comma-separated KEY=VALUE pairs (`join_timeout=900`, \
         `read_timeout=60`); anything else stops it with a `ValueError` before any rendezvous.",
        "Write it as `--rdzv-conf=join_timeout=900,read_timeout=60`.",
    )
    .user(Action::FixConfig),
    entry(
        ENDPOINT,
        "fail",
        "the endpoint host does not resolve, is loopback in a multi-node job, is not this machine on static rank 0, or a static endpoint has no port",
        "Every node connects to the endpoint's host: a name that does not resolve, a loopback \
         address, or a host other than rank 0's machine makes the others time out after 900 s \
         (`The client socket has timed out after 900s while trying to connect to (addr, \
         port)`).",
        "Use rank 0's address on the cluster network, the same on every node: \
         `--rdzv-endpoint=<rank0 IP>:29500` (check with `getent hosts <host>` and \
         `nc -vz <host> <port>` from another node).",
    )
    .user(Action::FixConfig),
    entry(
        PORT,
        "fail",
        "the port this node must bind is held (pid named); the printed command moves it to a free port",
        "The node hosting the rendezvous binds the port: if it is in use torchrun exits with \
         `failed to bind to [::]:29500 (errno: 98 - Address already in use)`.",
        "Stop the process holding it (`kill <pid>`, found with `ss -ltnp 'sport = :<port>'`) \
         or use the free port in the corrected command (`--rdzv-endpoint=<host>:<free>` or \
         `--master-port=<free>`) on every node.",
    )
    .user(Action::FixConfig),
    entry(
        LEGACY,
        "fail / warn",
        "`torch.distributed.launch` without `--use-env`: the script must accept `--local-rank` (fail, and `--use-env` added, when the script never mentions local_rank)",
        "The legacy launcher is deprecated; without `--use-env` it passes `--local-rank=N` to \
         the script, which fails with `unrecognized arguments: --local-rank` unless the script \
         parses it, and torchrun never passes it.",
        "Switch to `torchrun` with the same flags and read `LOCAL_RANK` from the environment in \
         the script (`int(os.environ[\"LOCAL_RANK\"])`); or add `--use-env` to the legacy \
         launcher.",
    )
    .user(Action::FixConfig),
    entry(
        VARIABLES,
        "warn",
        "a `$VAR` or `${VAR}` in the pasted line is not set on this node, so the shell puts nothing there (evidence `unset`, `words`)",
        "An unset variable silently empties the flag it is in: `--nproc_per_node=$SLURM_GPUS_PER_TASK` \
         becomes `--nproc_per_node=` and torchrun stops, `--rdzv-endpoint=$MASTER_ADDR:29400` \
         becomes `:29400`. preflight reads the line as the shell would, with the value empty.",
        "Set the variable before the line runs (`export NAME=...`), or write the value in; under \
         Slurm request what sets it (`--gpus-per-task` sets `SLURM_GPUS_PER_TASK`).",
    )
    .user(Action::FixConfig),
    entry(
        SCRIPT,
        "warn",
        "the script is not in the working directory, or cannot run as given (neither `.py` nor executable without `--no-python`/`-m`; not executable with `--no-python`)",
        "torchrun starts the workers anyway and every one of them stops at once (`can't open \
         file`, `Permission denied`), on every node that lacks the file, after the scheduler \
         gave you the nodes.",
        "Run from the directory that holds the script or give its full path, and copy it to \
         every node; for a program or shell script add `--no-python` and `chmod +x` it; for a \
         module use `-m`.",
    )
    .user(Action::FixConfig),
    entry(
        COMMAND,
        "pass",
        "the command to run on this node: yours, fixed, with the recommended environment in front (evidence `command`)",
        "It is your own torchrun command with only the flags that would fail corrected and \
         the measured NCCL environment in front, so the job starts the way preflight tested.",
        "Run the printed command on this node (each node prints its own).",
    )
    .user(Action::None),
    entry(
        TASKS_PER_NODE,
        "fail",
        "a launcher started several preflight tasks on one node (srun --ntasks-per-node, mpirun, torchrun) but its local-rank variables are missing, contradict each other, or do not match the tasks that started (two claim local rank 0, fewer than announced)",
        "Only one task per node may join the cluster (the first, local rank 0); the others wait \
         for its verdict. When the variables that say which task is first cannot be trusted, \
         several tasks of one node join as the same node: one cannot bind the master port \
         (`Address already in use`), the others are refused, and the failures look like a \
         firewall or a stale /etc/hosts although the network is fine.",
        "Run the preflight step with one task per node (`srun --ntasks-per-node=1 preflight \
         cluster`, `mpirun --map-by ppr:1:node ...`), or start preflight as the launcher's own \
         task so its variables reach it (`srun ... bash -c 'preflight cluster && exec python \
         train.py'`; a wrapper must not rewrite SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, \
         MPI_LOCALRANKID, PMI_LOCAL_RANK, LOCAL_RANK or their sizes), and give every task of a \
         node the same TMPDIR.",
    )
    .user(Action::FixConfig),
];
