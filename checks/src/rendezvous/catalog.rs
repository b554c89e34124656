//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        RENDEZVOUS,
        "fail",
        "ranks that never joined (by rank and expected host), a node that cannot reach the \
         master, or one lost mid-run",
        "This is torchrun's rendezvous failing early: a rank that is not started, cannot reach \
         the master (timeout = filtered, refused = nothing listening or REJECT, no route) or \
         was lost is what makes a real job wait 900 s and fail with `The client socket has \
         timed out ... (addr, 29500)`.",
        "Start `preflight cluster` with the same flags (and the same --token/--rdzv-id) on the \
         named ranks; check from them that the master answers (`nc -vz <master> 29500`); on \
         the master accept the port (`iptables -I INPUT -p tcp --dport 29500 -j ACCEPT`, \
         `firewall-cmd --add-port=29500/tcp`) or stop whatever else holds it \
         (`ss -ltnp 'sport = :29500'`).",
    )
    .user(Action::RestartJob),
    entry(
        REFUSED,
        "fail",
        "a node reached the coordinator and was turned away: another secret, another --nnodes, \
         another preflight version, a rank already taken, an address not in the host list, \
         facts over the limits, or a data listener that is not its own (kind `listener`)",
        "A refused node is not missing: it is running with a different idea of the job. \
         torchrun would either never let it join (another secret or node count: a 900 s \
         timeout) or, with a rank claimed twice, start two processes as one rank.",
        "Start every node with the same flags: the same --token / PREFLIGHT_TOKEN / \
         --token-file (or --rdzv-id), the same --nnodes and its own --node-rank, the same \
         preflight release; the finding names the address, the rank it claimed and what \
         differs.",
    )
    .user(Action::FixConfig),
    entry(
        MASTER_RESOLUTION,
        "warn",
        "the nodes that joined resolved the master's name to different addresses, or to the \
         same ones in another order (a stale /etc/hosts line, split DNS)",
        "torchrun and NCCL resolve MASTER_ADDR again on every node at launch: a node whose \
         /etc/hosts or DNS gives another address connects to another machine, or to nothing, \
         and waits until the rendezvous times out (`The client socket has timed out after \
         900s`), while the others look healthy.",
        "Make /etc/hosts or DNS agree on every node so the name resolves to rank 0's address \
         everywhere, first; compare `getent ahosts NAME` on each node (the order the job \
         dials; the finding lists each node's answer in that order), or give --master-addr as \
         rank 0's IP address.",
    )
    .node(Action::DrainAndRepair),
    entry(
        FQDN,
        "warn / fail",
        "under torchrun's c10d rendezvous, rank 0's FQDN (socket.getfqdn(), what torchrun \
         publishes unless --local-addr is given) does not resolve on a node to an address of \
         rank 0 that node reached (warn), or resolves first, in the resolver's order, to an \
         address that is not rank 0's and does not answer (fail: a stale /etc/hosts line)",
        "With --rdzv-backend=c10d the agent of rank 0 publishes its fully qualified host name, \
         and every worker connects to the TCPStore at that name (pytorch/pytorch #73682, \
         #150532). A node where the name does not resolve, resolves to loopback or to another \
         network fails at init with `host not found: Name or service not known` or a connect \
         timeout, although MASTER_ADDR and the endpoint work. The store client dials the \
         name's addresses in getaddrinfo's order (after RFC 6724 sorting) and waits on the \
         first for its whole connect timeout: a stale line that puts another box first fails \
         the job (`The client socket has timed out after 35000ms while trying to connect to \
         (fake-host, 37491)`, pytorch/pytorch #85300) even when rank 0's address comes second. \
         Each node reports the addresses in its resolver's order, the /etc/hosts line (or DNS) \
         that gave each, and a connect to the first on the master port when it is not rank \
         0's, bounded by the connect timeout.",
        "Start rank 0's torchrun with --local-addr=ADDRESS (its address on the chosen network; \
         the finding gives it), or make the name resolve to that address on every node (DNS \
         or /etc/hosts); for a stale first address, remove the line the finding names (its \
         command rewrites /etc/hosts in place, which works on a bind-mounted file too), or use \
         --rdzv-backend=static with --master-addr=<rank 0's IP>. `getent ahosts NAME` shows \
         the order the job dials.",
    )
    .user(Action::FixConfig),
    entry(
        MASTER_ELSEWHERE,
        "fail",
        "on a node the master's name leads to an address of rank 0's host that refuses, times \
         out or has no route, while another address of that host works (a short name resolving \
         through /etc/hosts or a search domain to an admin network), or resolves first to an \
         address that does not answer before the one where rank 0 does (a stale line)",
        "torchrun's rendezvous store dials the addresses getaddrinfo gives for MASTER_ADDR in \
         getaddrinfo's order, and gloo and NCCL find their peers through that store. When \
         a short name resolves on a node to another network of the master (an admin or IPMI \
         network where the port is rejected or filtered), that node's workers fail with \
         `Connection refused` or time out after 900 s, although rank 0 is up and reachable at \
         its data address (hpc-docs#2, accelerate#1489). The finding names both addresses and \
         what each gave. A first address that times out costs the store client its whole \
         connect timeout even when the name's next address is rank 0's: the finding names that \
         address and the /etc/hosts line (or DNS) that gave it.",
        "Give every node a master address that leads to the working address: the IP, or the \
         FQDN that resolves to it (`export MASTER_ADDR=<address>`); under torchrun's c10d \
         rendezvous start rank 0 with `--local-addr=<address>`; or fix the node's /etc/hosts \
         or DNS so the short name resolves to the data address, first (`getent ahosts NAME` \
         lists the addresses in the order the job dials them; remove a stale line the finding \
         names).",
    )
    .user(Action::FixConfig),
    entry(
        MASTER_LATE,
        "warn / fail",
        "the master's name resolved on a node only after a while (warn, with how long), or \
         never within the join timeout (fail)",
        "A Kubernetes headless Service publishes the master pod's DNS record only once the pod \
         is ready (pytorch-operator#125, jobset#504): workers that start first get `Name or \
         service not known` and, depending on the launcher, fail at once or retry until the \
         rendezvous timeout. preflight retries resolution within its join timeout and says how \
         long the name took to appear, or that it never did.",
        "Make the name resolvable before the job starts: `publishNotReadyAddresses: true` on the \
         headless Service, a master pod that becomes ready sooner (its readiness probe), or the \
         master's IP address instead of the name.",
    )
    .node(Action::DrainAndRepair),
    entry(
        LAUNCHER_MASTER,
        "fail",
        "the launcher's MASTER_ADDR is set but empty, or under Slurm names a node other than \
         the one with SLURM_NODEID=0",
        "Batch scripts fill MASTER_ADDR with a command, e.g. `$(scontrol show hostnames \
         \"$SLURM_JOB_NODELIST\" | head -n1)`: in a container without scontrol it is empty and \
         torchrun has no master to dial (mmcv#700, DeepSpeed#2612). A MASTER_ADDR that is not \
         the node with SLURM_NODEID=0, while torchrun gets `--node-rank=$SLURM_NODEID`, makes \
         one node host the store and every node dial another, until the rendezvous times out \
         (Primus#721). The finding names the variables and the values seen.",
        "Set MASTER_ADDR to the first host of the job's node list on every node: \
         `export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)`, run \
         where scontrol exists (outside the container, before srun), and check that it is not \
         empty.",
    )
    .user(Action::FixConfig),
    entry(
        AUTH,
        "warn",
        "no secret source (no --token, PREFLIGHT_TOKEN, --token-file or job id): anyone who can \
         reach the master port could join",
        "Without a secret the nodes prove only that they know the master endpoint, which anyone \
         on the network can compute: another host could join as a rank, read the nodes' facts \
         (interfaces, addresses, versions) and put made-up links into the report.",
        "Give every node one secret through the launcher's environment, e.g. \
         `export PREFLIGHT_TOKEN=$(openssl rand -hex 16)` in the job script before srun or \
         torchrun (every node inherits it), a Kubernetes Secret mounted as `--token-file`, or \
         run under Slurm/torchrun where the job id is the secret.",
    )
    .user(Action::FixConfig),
    entry(
        DUPLICATE_HOST,
        "fail",
        "two ranks on one host as NCCL sees it (`NCCL_HOSTID`, else hostname + boot id)",
        "NCCL identifies a host by `NCCL_HOSTID`, else hostname and boot id; two ranks with one \
         identity are one host to NCCL, which then uses shared memory between them and fails \
         (`Duplicate GPU detected`, or a hang) when they are really apart or share GPUs.",
        "Run one rank per machine (fix the host list or `--node-rank`), or, when ranks share a \
         machine on purpose, give each its own identity: \
         `export NCCL_HOSTID=preflight-rank<R>`.",
    )
    .user(Action::FixConfig),
    entry(
        VERSIONS,
        "warn / fail",
        "driver, CUDA, NCCL or torch differ across nodes",
        "Mixed versions behave undefinedly: different NCCL major.minor versions may not speak \
         the same wire protocol and hang in init (that case fails); different drivers, CUDA or \
         torch versions crash or diverge later (warn).",
        "Install what most nodes run on the odd ones: the same NVIDIA driver \
         (`nvidia-smi --query-gpu=driver_version --format=csv,noheader`), the same torch \
         (`pip install torch==<version> --index-url https://download.pytorch.org/whl/<cu>`), \
         the same NCCL (`pip install nvidia-nccl-cu12==<version>`); confirm with \
         `python -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'`.",
    )
    .node(Action::DrainAndRepair),
];
