//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        LISTEN_BACKLOG,
        "warn",
        "min(`net.core.somaxconn`, `net.ipv4.tcp_max_syn_backlog`) below the world size (every node; the master's TCPStore most of all)",
        "The master's TCPStore takes a connection from every rank at once and gloo's full mesh \
         makes every rank's listener take one from every other rank; the kernel caps every \
         listen() backlog at somaxconn. Past it SYNs are dropped and retried (slow init), and with \
         `tcp_abort_on_overflow` = 1 each overflow is a reset: `TCPStore ... Connection reset by \
         peer` (pytorch/pytorch #76913, PRs #128739, #129261: the store listens with the \
         system's backlog; the libuv backend asks for at least the world size). Skipped when no \
         world size is known.",
        "Raise both to at least the world size on every node, now and at boot: \
         `sysctl -w net.core.somaxconn=<n>`, `sysctl -w net.ipv4.tcp_max_syn_backlog=<n>` and the \
         same lines in /etc/sysctl.d/90-preflight-backlog.conf; set \
         `net.ipv4.tcp_abort_on_overflow=0`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        NOFILE,
        "warn / fail",
        "the soft `RLIMIT_NOFILE` a worker gets is below the estimate for the job's size (evidence: the formula); fail when the hard limit is below it too",
        "Each rank holds a gloo socket to every other rank, NCCL over sockets \
         `NCCL_SOCKET_NTHREADS` × `NCCL_NSOCKS_PERTHREAD` data sockets plus a control socket per \
         peer, the CUDA driver its own descriptors, and the master one per rank for the TCPStore. \
         Only NCCL's bootstrap root raises its own limit (NVIDIA/nccl #550, #1917, bootstrap.cc): \
         the workers fail with `Too many open files` / `Accept failed`. The estimate is 64 + \
         world (+ 128 + peers × sockets per peer with GPUs) (+ world + 32 on the master).",
        "Raise the soft limit where the job starts (`ulimit -n <n>`, up to `ulimit -Hn`), and for \
         good in /etc/security/limits.d/ (`* soft nofile 1048576`), systemd `LimitNOFILE=`, \
         `docker run --ulimit nofile=...`; under Slurm raise it in the shell that runs srun or set \
         `PropagateResourceLimitsExcept=NOFILE` so tasks get slurmd's limit.",
    )
    .node(Action::DrainAndRepair),
    entry(
        PORT_RANGE,
        "warn",
        "usable ports in `ip_local_port_range` minus `ip_local_reserved_ports` below (N−1)·G²·channels·2 on a GPU node that runs NCCL over sockets",
        "NCCL binds each socket before it connects, so every socket of an all-to-all takes an \
         ephemeral port of its own: ports per node ≈ (N−1)·G²·channels·2 (NVIDIA/nccl #1882, \
         ROCm/rccl PR #577). Past the range NCCL fails with `Call to bind failed: Address already \
         in use`. gloo's plain connects share ports across destinations, so gloo-only jobs and \
         nodes where NCCL uses InfiniBand/RoCE are not judged.",
        "Widen the range above your services' ports and drop unneeded reserved ranges, now and \
         at boot: `sysctl -w net.ipv4.ip_local_port_range=\"15000 64999\"` and the line in \
         /etc/sysctl.d/90-preflight-ports.conf.",
    )
    .node(Action::DrainAndRepair),
    entry(
        NEIGH_TABLE,
        "warn",
        "`gc_thresh3` (IPv4, and IPv6 when used) below the peers on the node's on-link subnets (nodes × this node's addresses there)",
        "The kernel keeps one neighbour (ARP/NDP) entry per on-link peer address; past \
         `gc_thresh3` it logs `neighbour table overflow` and new connections fail at random, \
         which at a few hundred nodes with several NICs on one flat subnet is the default 1024. \
         Skipped in a network namespace, which has no gc_thresh3 of its own.",
        "Raise the thresholds above the peer count (twice, for headroom), now and at boot: \
         `sysctl -w net.ipv4.neigh.default.gc_thresh3=<n>` (and gc_thresh1/2 at n/4 and n/2; \
         `net.ipv6.neigh.default.*` for IPv6) and the same lines under /etc/sysctl.d/.",
    )
    .node(Action::DrainAndRepair),
    entry(
        STALE_NCCL,
        "warn",
        "NCCL shared-memory segments (`/dev/shm/nccl-*`) whose owning processes are gone (sizes in the evidence)",
        "A crashed or killed job leaves its NCCL segments in /dev/shm; no process maps or holds \
         them (read from /proc/<pid>/maps and fd), but they keep their tmpfs memory, so the next \
         job's NCCL fails with `posix_fallocate failed: No space left on device` or bus errors \
         in a small /dev/shm.",
        "Remove the segments no process holds, after checking with `fuser -v /dev/shm/nccl-*` \
         that no job is starting: `rm -f /dev/shm/nccl-<name> ...` as the finding lists.",
    )
    .node(Action::DrainAndRepair),
    entry(
        PIDS,
        "warn",
        "cgroup `pids.max` minus `pids.current` (and `ulimit -u`) below an estimate of the threads the job's workers start",
        "Every worker starts tens of threads (Python, CUDA, NCCL proxy and service threads, gloo, \
         the watchdog) and NCCL over sockets `NCCL_SOCKET_NTHREADS` helpers per connection; a \
         container's or Slurm job's pids limit (or RLIMIT_NPROC, which counts every thread of the \
         user) then fails thread creation: `pthread_create failed: Resource temporarily \
         unavailable`. The estimate is processes × (64 + socket helper threads).",
        "Raise the limit of the job's cgroup (`echo <n> > /sys/fs/cgroup/<cgroup>/pids.max`, \
         `docker run --pids-limit <n>`, the kubelet's podPidsLimit, systemd `TasksMax=`, Slurm's \
         cgroup.conf) and `ulimit -u <n>` for non-root users.",
    )
    .node(Action::DrainAndRepair),
    entry(
        TCPSTORE,
        "warn",
        "a world above 1,024 ranks with the legacy TCPStore (torch < 2.4, or `USE_LIBUV=0`), judged on the master",
        "The legacy TCPStore server serves every rank from one thread and times out above about \
         1,000 ranks at init; the libuv backend does not and is the default from torch 2.4 \
         (PyTorch's libuv TCPStore tutorial, pytorch/pytorch PR #118944). `USE_LIBUV=0` turns it \
         back off.",
        "Use the libuv store: `unset USE_LIBUV` where it is 0, `export USE_LIBUV=1` on torch \
         2.3, or upgrade: `pip install -U 'torch>=2.4'`.",
    )
    .user(Action::FixConfig),
];
