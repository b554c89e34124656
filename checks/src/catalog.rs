//! The catalog of finding ids: what each one means, why it matters and how to fix it.
//!
//! One entry per id the tool can emit. `preflight explain ID` prints an entry, and
//! README's finding-id table is [`markdown_table`] (a test keeps them equal, and
//! another fails when the code emits an id that is missing here).

/// What one finding id means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Stable id, `area.name`.
    pub id: &'static str,
    /// The part before the dot: `gpu`, `net`, `cluster`, ...
    pub area: &'static str,
    /// The status(es) it has when it fires: "warn", "warn / fail".
    pub fires: &'static str,
    /// One line, as README's table shows it.
    pub meaning: &'static str,
    /// Why it matters: what the job does without the fix, with the error users see.
    pub why: &'static str,
    /// How to fix it, with commands.
    pub fix: &'static str,
}

const fn entry(
    id: &'static str,
    area: &'static str,
    fires: &'static str,
    meaning: &'static str,
    why: &'static str,
    fix: &'static str,
) -> Entry {
    Entry {
        id,
        area,
        fires,
        meaning,
        why,
        fix,
    }
}

static ENTRIES: &[Entry] = &[
    // ----- net -----
    entry(
        "net.no-interface",
        "net",
        "fail",
        "no usable non-loopback interface with an address",
        "No interface is up with a non-loopback, routable address, so no other node can reach \
         this one: NCCL reports `Bootstrap : no socket interface found` and torchrun's \
         rendezvous times out. `error` when the interfaces could not be listed at all.",
        "Bring the cluster-facing interface up and give it an address (DHCP or static), then \
         rerun: `ip -br addr show`, `ip link set <if> up`, `dhclient <if>` or \
         `ip addr add <addr>/<prefix> dev <if>`.",
    ),
    entry(
        "net.hostname-loopback",
        "net",
        "warn",
        "this host's name resolves to a loopback address (Debian's 127.0.1.1), so the master \
         would advertise loopback",
        "torchrun's master advertises the address its hostname resolves to. Debian and Ubuntu \
         put `127.0.1.1 <hostname>` in /etc/hosts, so peers are told to connect to loopback and \
         get `Connection refused`, or the rendezvous times out. Also fires when the hostname \
         does not resolve at all.",
        "Map the hostname to the node's cluster address in /etc/hosts (or DNS) and drop the \
         127.0.1.1 line: `sudo sed -i '/^127.0.1.1/d' /etc/hosts` then \
         `echo '<addr> <hostname>' | sudo tee -a /etc/hosts`; or pass \
         `--master-addr=<IP>` instead of a name. Check with `getent hosts $(hostname)`.",
    ),
    // ----- ib -----
    entry(
        "ib.port-down",
        "ib",
        "warn",
        "an InfiniBand/RoCE port is not ACTIVE",
        "NCCL uses every ACTIVE RDMA port it finds unless told otherwise; a port that is DOWN, \
         INIT (no subnet manager) or ARMED cannot carry traffic, and a job that expects it \
         hangs in init or fails with `NET/IB : Got completion from peer ... error 12`. A \
         device that lists no ports counts too; `error` when the RDMA devices could not be \
         listed.",
        "Check the cable, the switch port and the subnet manager: `ibstat <dev>`, `sminfo`, \
         `systemctl start opensm` (INIT: link up, no SM), `ip link set <netdev> up`, \
         `ethtool <netdev>` for RoCE. If the port is not meant to be used, leave it out with \
         `NCCL_IB_HCA=<dev>:<port>,...`.",
    ),
    entry(
        "ib.verbs",
        "ib",
        "warn",
        "RDMA devices exist but libibverbs is not installed",
        "NCCL's InfiniBand transport dlopens libibverbs.so.1; without it NCCL silently falls \
         back to TCP sockets (`NET/Socket` in NCCL_DEBUG=INFO), and the job runs many times \
         slower than the fabric allows.",
        "Install rdma-core's verbs library and the provider for the adapter: \
         `apt-get install -y libibverbs1 ibverbs-providers` or \
         `dnf install -y rdma-core libibverbs`; check with `ibv_devices`.",
    ),
    entry(
        "ib.partial",
        "ib",
        "warn",
        "InfiniBand usable on some nodes only",
        "NCCL needs the same transport on every node: when some nodes have an ACTIVE IB/RoCE \
         port and others none, ranks disagree on the network and init hangs, or fails with \
         `NET/IB` errors on the nodes that try IB.",
        "Run the job with `NCCL_IB_DISABLE=1` (TCP sockets on every node), or bring up an IB/RoCE \
         port on the nodes without one (`ibstat` there) and rerun preflight.",
    ),
    // ----- gpu -----
    entry(
        "gpu.nvml",
        "gpu",
        "skip, or fail when GPUs are expected",
        "NVML could not load (no driver)",
        "Without NVML the NVIDIA driver is missing or not mapped into the container, so CUDA \
         finds no device: `RuntimeError: No CUDA GPUs are available` or `Found no NVIDIA \
         driver`. Fails when `--nproc-per-node`/`--expect-gpus` asks for GPUs; warns when NVML \
         loads but cannot read some GPU (one that fell off the bus).",
        "Install the NVIDIA driver and check it with `nvidia-smi`; in a container start it with \
         GPU access (`docker run --gpus all ...` with the NVIDIA container toolkit: \
         `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`). \
         A GPU NVML cannot read: `nvidia-smi -q -i <index>`, then a reset or reboot.",
    ),
    entry(
        "gpu.count",
        "gpu",
        "fail",
        "fewer visible GPUs than `--nproc-per-node` / `--expect-gpus`",
        "torchrun starts `--nproc-per-node` processes and each takes `cuda:LOCAL_RANK`; with \
         fewer visible GPUs the extra ranks die with `CUDA error: invalid device ordinal`, or \
         two ranks share a GPU and NCCL aborts with `Duplicate GPU detected`. `error` when the \
         GPUs cannot be counted (NVML unavailable).",
        "Start one process per visible GPU (`torchrun --nproc-per-node=<visible> ...`), list \
         enough GPUs in `CUDA_VISIBLE_DEVICES` (`export CUDA_VISIBLE_DEVICES=0,1,2,3`), or run on \
         a node with more GPUs.",
    ),
    entry(
        "gpu.visible-devices",
        "gpu",
        "fail / warn",
        "`CUDA_VISIBLE_DEVICES` malformed, duplicated, naming missing GPUs, or hiding all",
        "CUDA stops reading `CUDA_VISIBLE_DEVICES` at the first invalid entry and hides \
         everything after it; a repeated or out-of-range index or an unknown UUID leaves ranks \
         with `invalid device ordinal` or `Duplicate GPU detected`. Warns when the value hides \
         every GPU on the node.",
        "List each GPU once, by an index below the GPU count or by a UUID from `nvidia-smi -L`, \
         or unset it to use every GPU: `unset CUDA_VISIBLE_DEVICES` or \
         `export CUDA_VISIBLE_DEVICES=0,1,2,3`.",
    ),
    entry(
        "gpu.in-use",
        "gpu",
        "warn",
        "other processes hold GPU memory",
        "A process left over from a crashed run (or another user's job) holds the GPU: the new \
         job runs out of memory (`CUDA out of memory`), runs slower, or an exclusive-process \
         GPU refuses it (`CUDA-capable device(s) is/are busy or unavailable`). Fires when a \
         compute process is listed or more than 5% of the GPU's memory is used.",
        "Stop the processes holding the GPU, or pick other GPUs: \
         `nvidia-smi --query-compute-apps=pid,used_memory --format=csv`, then `kill <pid>`.",
    ),
    entry(
        "gpu.mig",
        "gpu",
        "warn",
        "MIG is enabled on a GPU",
        "A MIG-partitioned GPU exposes instances that NCCL cannot use for communication between \
         processes, so a multi-process job on them fails in NCCL init or falls back to slow \
         paths.",
        "Disable MIG on the GPUs the job uses (root, idle GPU, may need a reset): \
         `sudo nvidia-smi -i <gpus> -mig 0`.",
    ),
    // ----- nccl -----
    entry(
        "nccl.library",
        "nccl",
        "pass / warn / skip",
        "which libnccl the job will load and its version; none found, unloadable, or several \
         versions (skip on a node with no GPU when none is expected)",
        "The job uses whichever libnccl.so.2 the loader finds first. None found means PyTorch \
         may have no NCCL (`Distributed package doesn't have NCCL built in`); one that cannot \
         load fails the same way; several versions on a node mean nodes can end up on \
         different NCCL releases, whose mismatch hangs init.",
        "Check what PyTorch really loads: \
         `python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'`; \
         install the wheel matching torch's CUDA (`pip install nvidia-nccl-cu12`); `ldd <lib>` \
         for a library that cannot load; remove stale copies from LD_LIBRARY_PATH and confirm \
         at start-up with `export NCCL_DEBUG=VERSION`.",
    ),
    // ----- port -----
    entry(
        "port.in-use",
        "port",
        "fail",
        "the master port is held; evidence names pid and command",
        "torchrun's rendezvous store binds the master port on rank 0; if a crashed run still \
         holds it, torchrun exits with `failed to bind to [::]:29500 (errno: 98 - Address \
         already in use)`. Warns when this user may not bind the port (below 1024), `error` \
         when the bind test could not run.",
        "Stop the leftover process (`ss -ltnp 'sport = :29500'`, then `kill <pid>`; as root \
         when the holder is another user's), or launch every node on the free port preflight \
         suggests: `torchrun --master-port=<free> ...`.",
    ),
    // ----- firewall -----
    entry(
        "firewall.rules",
        "firewall",
        "warn",
        "a local firewall filters input and does not plainly allow the master port or NCCL's \
         high ports, or its output path drops this node's own new connections to them",
        "A dropped master port makes every other node wait for the rendezvous timeout: `The \
         client socket has timed out after 900s while trying to connect to (addr, 29500)`. \
         Allowing only the master port is not enough: NCCL listens on random high ports \
         (32768-60999), and a dropped one gives `Call to connect timeout` and a watchdog \
         timeout after 600 s. Also warns when ufw/firewalld is active but its rules could not \
         be read.",
        "Accept the cluster's subnet (or the master port and 32768-60999/tcp) with the firewall \
         the node runs: `sudo ufw allow from <subnet>`, \
         `sudo firewall-cmd --zone=trusted --add-source=<subnet>`, \
         `sudo nft insert rule inet filter input ip saddr <subnet> accept` or \
         `sudo iptables -I INPUT -s <subnet> -j ACCEPT`. When the OUTPUT chain (or an \
         nftables output hook, or ufw's outgoing default) drops the node's own connections, \
         an INPUT rule does not help: let them out (`sudo iptables -I OUTPUT -d <subnet> -j \
         ACCEPT`, `sudo ufw allow out to <subnet>`). The finding prints the exact command \
         for the firewall it found.",
    ),
    // ----- sys -----
    entry(
        "sys.shm",
        "sys",
        "warn",
        "/dev/shm smaller than 1 GiB",
        "NCCL's shared-memory transport and DataLoader workers allocate in /dev/shm; Docker's \
         default 64 MiB gives `posix_fallocate failed: No space left on device` or `Bus error`. \
         `error` when its size cannot be read.",
        "Docker: `docker run --shm-size=16g ...` (or `--ipc=host`); Kubernetes: mount an \
         `emptyDir: {medium: Memory, sizeLimit: 16Gi}` volume at /dev/shm; bare host: \
         `mount -o remount,size=16G /dev/shm`.",
    ),
    entry(
        "sys.memlock",
        "sys",
        "warn",
        "memlock limit is not unlimited while RDMA devices exist",
        "InfiniBand/RoCE registers (pins) memory; with a small RLIMIT_MEMLOCK NCCL fails with \
         `ibv_reg_mr failed` / `Cannot allocate memory`, or falls back to sockets. Skipped on \
         nodes without RDMA devices.",
        "Make the limit unlimited for the job: `ulimit -l unlimited` in the launching shell; \
         `* soft memlock unlimited` and `* hard memlock unlimited` in \
         /etc/security/limits.conf; `docker run --ulimit memlock=-1:-1 ...`; \
         `LimitMEMLOCK=infinity` for systemd services.",
    ),
    // ----- env -----
    entry(
        "env.socket-ifname",
        "env",
        "fail / warn",
        "`NCCL_SOCKET_IFNAME` / `GLOO_SOCKET_IFNAME` match no interface, only down or virtual \
         ones, or more than intended; or select a network measured slower than the best",
        "NCCL and Gloo pick their socket interface from these variables (NCCL: comma list of \
         prefixes, `^` excludes, `=` exact; Gloo: exact names). A value matching nothing gives \
         `Bootstrap : no socket interface found`; one matching docker0/veth or a down interface \
         hangs `ncclCommInitRank`; a prefix like `bond0` also matches `bond0.100`. Unset, it \
         warns when NCCL's own pick would include a virtual interface or one without a routable \
         address.",
        "Set the variable to the cluster-facing interface, exactly when a prefix matches more: \
         `export NCCL_SOCKET_IFNAME==bond0` and `export GLOO_SOCKET_IFNAME=bond0` (check names \
         with `ip -br addr show`). `preflight cluster` prints the value that worked on every \
         node.",
    ),
    entry(
        "env.ib-disable",
        "env",
        "warn",
        "`NCCL_IB_DISABLE` contradicts the InfiniBand state found, or is not a number",
        "NCCL reads the value with strtoll: garbage reads as 0 and leaves IB enabled. \
         `NCCL_IB_DISABLE=1` with ACTIVE ports leaves the fabric unused and the job on TCP; `0` \
         where no port is ACTIVE makes NCCL try IB where it cannot work. `error` when the IB \
         state could not be read.",
        "Unset it to let NCCL use ACTIVE IB ports (`unset NCCL_IB_DISABLE`), or set exactly `1` \
         on every node to use TCP (`export NCCL_IB_DISABLE=1`), consistently across the \
         cluster (see ib.partial).",
    ),
    entry(
        "env.master",
        "env",
        "warn",
        "`MASTER_ADDR` is loopback, or `MASTER_PORT` is invalid or differs from `--master-port`",
        "With `MASTER_ADDR` empty, loopback (127.0.0.1, localhost), 0.0.0.0 or with whitespace, \
         ranks on other nodes cannot reach the master and wait for the rendezvous timeout. A \
         `MASTER_PORT` that is not a port, or differs from the one preflight checked, sends the \
         job to a port nobody tested.",
        "Set rank 0's address on the cluster network and the port preflight checked: \
         `export MASTER_ADDR=<rank 0 IP>` and `export MASTER_PORT=29500` (or rerun preflight \
         with `--master-port=$MASTER_PORT`).",
    ),
    // ----- cluster -----
    entry(
        "cluster.rendezvous",
        "cluster",
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
    ),
    entry(
        "cluster.refused",
        "cluster",
        "fail",
        "a node reached the coordinator and was turned away: another secret, another --nnodes, \
         another preflight version, a rank already taken, an address not in the host list, or \
         facts over the limits",
        "A refused node is not missing: it is running with a different idea of the job. \
         torchrun would either never let it join (another secret or node count: a 900 s \
         timeout) or, with a rank claimed twice, start two processes as one rank.",
        "Start every node with the same flags: the same --token / PREFLIGHT_TOKEN / \
         --token-file (or --rdzv-id), the same --nnodes and its own --node-rank, the same \
         preflight release; the finding names the address, the rank it claimed and what \
         differs.",
    ),
    entry(
        "cluster.master-resolution",
        "cluster",
        "warn",
        "the nodes that joined resolved the master's name to different addresses (a stale \
         /etc/hosts line, split DNS)",
        "torchrun and NCCL resolve MASTER_ADDR again on every node at launch: a node whose \
         /etc/hosts or DNS gives another address connects to another machine, or to nothing, \
         and waits until the rendezvous times out (`The client socket has timed out after \
         900s`), while the others look healthy.",
        "Make /etc/hosts or DNS agree on every node so the name resolves to rank 0's address \
         everywhere; compare `getent hosts NAME` on each node (the finding lists each node's \
         answer), or give --master-addr as rank 0's IP address.",
    ),
    entry(
        "cluster.auth",
        "cluster",
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
    ),
    entry(
        "cluster.duplicate-host",
        "cluster",
        "fail",
        "two ranks on one host as NCCL sees it (`NCCL_HOSTID`, else hostname + boot id)",
        "NCCL identifies a host by `NCCL_HOSTID`, else hostname and boot id; two ranks with one \
         identity are one host to NCCL, which then uses shared memory between them and fails \
         (`Duplicate GPU detected`, or a hang) when they are really apart or share GPUs.",
        "Run one rank per machine (fix the host list or `--node-rank`), or, when ranks share a \
         machine on purpose, give each its own identity: \
         `export NCCL_HOSTID=preflight-rank<R>`.",
    ),
    entry(
        "cluster.versions",
        "cluster",
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
    ),
    entry(
        "cluster.gpus",
        "cluster",
        "warn",
        "GPU count or model differs across nodes",
        "torchrun starts the same `--nproc-per-node` on every node, so a node with fewer GPUs \
         fails with `invalid device ordinal`; with mixed models the whole job runs at the pace \
         of the slowest GPU.",
        "Use at most the smallest GPU count for `--nproc-per-node`, or fix the nodes with fewer \
         GPUs; prefer one GPU model per job. Compare with `nvidia-smi -L` on each node.",
    ),
    // ----- link -----
    entry(
        "link.unreachable",
        "link",
        "fail",
        "a pair cannot connect on the chosen network; timeout (filtered) told from refused",
        "NCCL connects every pair of ranks on random high ports. A pair that times out is \
         filtered by a firewall (`Call to connect timeout`, then a watchdog timeout after \
         600 s); refused means a REJECT rule or nothing listening; no route means the \
         addresses are on different networks. Also fails when no network connects every node.",
        "On the node that filters, accept every connection from the cluster's subnet (opening \
         only the master port is not enough): `sudo ufw allow from <subnet>` or \
         `sudo iptables -I INPUT -s <subnet> -j ACCEPT`; when the sender's OUTPUT rules drop \
         its own connections, fix the sender instead (`sudo iptables -I OUTPUT -d <subnet> -j \
         ACCEPT`); when neither node's rules explain a one-way failure, the finding gives the \
         `nc` commands that tell the sender, the receiver and a firewall between them apart; \
         for no route, check `ip route get <addr>`. The finding names the node and the exact \
         command.",
    ),
    entry(
        "launch.as-written",
        "launch",
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
    ),
    entry(
        "link.mtu-blackhole",
        "link",
        "fail",
        "a connection was established but a large message stalled, and the largest \
         don't-fragment packet that passed is below the interfaces' MTU",
        "Both hosts at a jumbo MTU (9000) with a switch or link between them at 1500: the \
         handshake and small messages pass, large frames are dropped without an ICMP answer, \
         so TCP stalls. The job joins, then dies in its first large transfer (gloo: `Timed \
         out waiting 25000ms for recv operation`, NCCL: a watchdog timeout). preflight probes \
         the path with don't-fragment packets from both ends when a transfer stalls.",
        "Set the interface MTU on the nodes to what the path carries (`sudo ip link set dev \
         <if> mtu 1500`, and persist it), or raise the switch's MTU to the interfaces'.",
    ),
    entry(
        "link.mtu-mismatch",
        "link",
        "warn",
        "MTU differs on the network chosen for NCCL",
        "When interfaces disagree on MTU (or a switch in between carries less than the \
         interfaces), small messages pass and large ones are dropped: NCCL init succeeds and \
         the first big all-reduce hangs.",
        "Set one MTU on every node's interface on that network (what most nodes have): \
         `ip link set dev <if> mtu <mtu>`, and persist it (netplan `mtu:`, \
         `nmcli connection modify <conn> 802-3-ethernet.mtu <mtu>`, or MTU= in ifcfg); or raise \
         the switches' MTU.",
    ),
    entry(
        "link.degraded",
        "link",
        "warn",
        "a faster network works on some nodes only; the job falls back to a slower one",
        "The advice uses the fastest network that connects every node. When a faster one (by \
         measured throughput on the pairs that work, else rated speed) is broken by one node (its \
         NIC down or without carrier, no address, filtered, no route), the job still runs, on the \
         slower network: the finding names the node, the interface and why, with both speeds.",
        "Repair the named interface on the named node (`ip link set dev <if> up`, `ethtool <if>`, \
         the firewall command given) and rerun; the advice then moves to the faster network.",
    ),
    entry(
        "link.slow",
        "link",
        "warn",
        "a pair's throughput is far below its peers or its rated speed",
        "A ring or tree all-reduce runs at the pace of its slowest link: one pair under half the \
         median of all pairs (or under half its rated speed, up to 25 Gbit/s) slows the whole \
         job.",
        "Check cabling, negotiated speed and duplex, and traffic shaping on both ends: \
         `ethtool <if>`, `tc qdisc show dev <if>`; rerun with `--thorough` to confirm.",
    ),
    // ----- collective -----
    entry(
        "collective.busbw",
        "collective",
        "warn / fail",
        "all-reduce bus bandwidth of the largest message under `--min-busbw` (fail) or under half of the slowest ring link's pairwise throughput (warn)",
        "Large-message all-reduce bus bandwidth (nccl-tests' busbw) under `--min-busbw` or under \
         half of what the slowest link in the ring measured pairwise means the collectives, and so the \
         training step, will be slow with these settings, even if every link looks fine.",
        "Use the environment preflight recommends (`NCCL_SOCKET_IFNAME`, `NCCL_IB_DISABLE`, \
         `NCCL_IB_HCA`), check link.slow and ib.* findings, and compare transports with \
         `preflight cluster --compare-env`; run with `NCCL_DEBUG=INFO` to see which network NCCL \
         picked.",
    ),
    entry(
        "collective.wrong",
        "collective",
        "fail",
        "all-reduce returned wrong values",
        "The all-reduce result differed from the exact expected sum: data is corrupted in \
         flight or in memory (a faulty NIC, GPU, driver or NCCL build). Training would silently \
         diverge or produce NaNs.",
        "Rerun to see whether it repeats on the same ranks; run nccl-tests' \
         `all_reduce_perf -c 1` between those nodes, check `dmesg` and \
         `nvidia-smi -q -d ECC,PAGE_RETIREMENT`, and take the faulty node out of the job.",
    ),
    entry(
        "collective.net",
        "collective",
        "warn",
        "NCCL used a different network than advised",
        "NCCL's own log (`NET/IB` or `NET/Socket : Using [0]eth0`) showed it picked another \
         transport or interface than the one preflight measured and recommended, so its \
         numbers and the job's speed are not what the advice promised.",
        "Export the recommended environment on every node before launching (preflight prints \
         it: `NCCL_SOCKET_IFNAME`, `NCCL_IB_DISABLE`, `NCCL_IB_HCA`), and check NCCL's choice \
         with `NCCL_DEBUG=INFO` (look for `NET/` lines).",
    ),
    entry(
        "collective.error",
        "collective",
        "error",
        "the all-reduce could not run",
        "The measured all-reduce did not complete: the NCCL child process hung (killed by the \
         watchdog), aborted, could not load libnccl or CUDA, or a ring connection failed. A \
         real job would fail or hang the same way.",
        "Read the error in the finding's evidence; rerun with `NCCL_DEBUG=INFO`; check \
         nccl.library and gpu.* findings on each node, and fall back to TCP with \
         `--allreduce tcp` to tell the network from the GPU stack.",
    ),
    // ----- launch -----
    entry(
        "launch.args",
        "launch",
        "fail / warn",
        "torchrun would reject the command line (an option missing its value, a value on a flag, no script); or the line's program is not torchrun: warn for accelerate launch and deepspeed (read for what maps), fail for any other program",
        "`preflight torchrun` reads your command as torchrun's argparse does; a command it \
         cannot read is one torchrun stops with `error: the following arguments are required` \
         or `expected one argument`, after the scheduler already gave you the nodes.",
        "Write the launch in torchrun's form, options first and the script last: \
         `torchrun --nnodes=N --nproc-per-node=G --rdzv-backend=c10d \
         --rdzv-endpoint=HOST:PORT train.py ARGS` (see `torchrun --help`).",
    ),
    entry(
        "launch.unknown-flag",
        "launch",
        "fail",
        "an option before the script that torchrun does not know (with \"did you mean\"), or `--use-env` under torchrun",
        "torchrun rejects options it does not know (`error: unrecognized arguments`), and a \
         script option placed before the script name goes to torchrun instead of the script. \
         `--use-env` exists only in the legacy `torch.distributed.launch`.",
        "Correct the spelling (torchrun accepts `--nproc-per-node` and `--nproc_per_node`), or \
         move the script's own options after the script name: `torchrun [torchrun options] \
         train.py [script options]`; the printed command drops `--use-env` under torchrun.",
    ),
    entry(
        "launch.nnodes",
        "launch",
        "fail / warn",
        "`--nnodes` malformed, MIN>MAX or 0, missing in a multi-node command, or an elastic range with static rendezvous (warn)",
        "torchrun waits until `--nnodes` (or the minimum of an elastic `MIN:MAX` range) nodes \
         join; a wrong count waits for nodes that never come, until the rendezvous timeout, \
         and the static rendezvous cannot be elastic.",
        "Give the real node count (`--nnodes=4`) or a valid range with c10d \
         (`--nnodes=2:4 --rdzv-backend=c10d`), the same on every node.",
    ),
    entry(
        "launch.node-rank",
        "launch",
        "fail",
        "node rank not below nnodes, not a number, or missing in a static multi-node job",
        "With the static rendezvous every node needs a distinct `--node-rank` in 0..nnodes-1; \
         torchrun's default 0 on every node makes them all claim rank 0 and the rendezvous \
         never completes.",
        "Give each node its own rank, 0 on the master: `--node-rank=$SLURM_NODEID`, \
         `--node-rank=$NODE_RANK`, or use `--rdzv-backend=c10d`, which assigns ranks itself.",
    ),
    entry(
        "launch.nproc",
        "launch",
        "fail / warn",
        "more workers than visible GPUs (lowered to the count), `gpu` with none visible, an invalid value; warn when GPUs would sit idle",
        "More processes than visible GPUs gives `invalid device ordinal` or `Duplicate GPU \
         detected`; fewer leaves GPUs idle. `gpu`, `auto` and `cpu` values are resolved as \
         torchrun does.",
        "Use the number of visible GPUs: `torchrun --nproc-per-node=<visible> ...` (or \
         `--nproc-per-node=gpu`), or fix `CUDA_VISIBLE_DEVICES`.",
    ),
    entry(
        "launch.standalone",
        "launch",
        "fail / warn",
        "`--standalone` with multi-node flags (dropped when an endpoint is given); warn when it ignores rendezvous flags",
        "`--standalone` makes torchrun start its own rendezvous on localhost with a random port \
         and ignore `--rdzv-endpoint`/`--master-addr`, so nodes never meet: each trains alone.",
        "Use `--standalone` only for one node; for several, drop it and give \
         `--nnodes=N --rdzv-backend=c10d --rdzv-endpoint=<rank0 IP>:29500`.",
    ),
    entry(
        "launch.rdzv-backend",
        "launch",
        "fail / warn",
        "unknown rendezvous backend (a near miss is corrected to c10d); etcd needs an etcd server",
        "torchrun knows `static`, `c10d`, `etcd` and `etcd-v2`; a misspelled backend fails with \
         `ValueError: unknown rendezvous backend`, and etcd needs a reachable etcd server and \
         the `python-etcd` module.",
        "Use `--rdzv-backend=c10d` (no extra service) with `--rdzv-endpoint=<rank0 IP>:29500`, \
         or the static form `--master-addr`/`--master-port` with `--node-rank`.",
    ),
    entry(
        "launch.rdzv-conf",
        "launch",
        "fail",
        "`--rdzv-conf` is not KEY=VALUE,...",
        "torchrun parses `--rdzv-conf` as comma-separated KEY=VALUE pairs (`join_timeout=900`, \
         `read_timeout=60`); anything else stops it with a `ValueError` before any rendezvous.",
        "Write it as `--rdzv-conf=join_timeout=900,read_timeout=60`.",
    ),
    entry(
        "launch.endpoint",
        "launch",
        "fail",
        "the endpoint host does not resolve, is loopback in a multi-node job, is not this machine on static rank 0, or a static endpoint has no port",
        "Every node connects to the endpoint's host: a name that does not resolve, a loopback \
         address, or a host other than rank 0's machine makes the others time out after 900 s \
         (`The client socket has timed out after 900s while trying to connect to (addr, \
         port)`).",
        "Use rank 0's address on the cluster network, the same on every node: \
         `--rdzv-endpoint=<rank0 IP>:29500` (check with `getent hosts <host>` and \
         `nc -vz <host> <port>` from another node).",
    ),
    entry(
        "launch.port",
        "launch",
        "fail",
        "the port this node must bind is held (pid named); the printed command moves it to a free port",
        "The node hosting the rendezvous binds the port: if it is in use torchrun exits with \
         `failed to bind to [::]:29500 (errno: 98 - Address already in use)`.",
        "Stop the process holding it (`kill <pid>`, found with `ss -ltnp 'sport = :<port>'`) \
         or use the free port in the corrected command (`--rdzv-endpoint=<host>:<free>` or \
         `--master-port=<free>`) on every node.",
    ),
    entry(
        "launch.legacy",
        "launch",
        "fail / warn",
        "`torch.distributed.launch` without `--use-env`: the script must accept `--local-rank` (fail, and `--use-env` added, when the script never mentions local_rank)",
        "The legacy launcher is deprecated; without `--use-env` it passes `--local-rank=N` to \
         the script, which fails with `unrecognized arguments: --local-rank` unless the script \
         parses it, and torchrun never passes it.",
        "Switch to `torchrun` with the same flags and read `LOCAL_RANK` from the environment in \
         the script (`int(os.environ[\"LOCAL_RANK\"])`); or add `--use-env` to the legacy \
         launcher.",
    ),
    entry(
        "launch.variables",
        "launch",
        "warn",
        "a `$VAR` or `${VAR}` in the pasted line is not set on this node, so the shell puts nothing there (evidence `unset`, `words`)",
        "An unset variable silently empties the flag it is in: `--nproc_per_node=$SLURM_GPUS_PER_TASK` \
         becomes `--nproc_per_node=` and torchrun stops, `--rdzv-endpoint=$MASTER_ADDR:29400` \
         becomes `:29400`. preflight reads the line as the shell would, with the value empty.",
        "Set the variable before the line runs (`export NAME=...`), or write the value in; under \
         Slurm request what sets it (`--gpus-per-task` sets `SLURM_GPUS_PER_TASK`).",
    ),
    entry(
        "launch.script",
        "launch",
        "warn",
        "the script is not in the working directory, or cannot run as given (neither `.py` nor executable without `--no-python`/`-m`; not executable with `--no-python`)",
        "torchrun starts the workers anyway and every one of them stops at once (`can't open \
         file`, `Permission denied`), on every node that lacks the file, after the scheduler \
         gave you the nodes.",
        "Run from the directory that holds the script or give its full path, and copy it to \
         every node; for a program or shell script add `--no-python` and `chmod +x` it; for a \
         module use `-m`.",
    ),
    entry(
        "launch.command",
        "launch",
        "pass",
        "the command to run on this node: yours, fixed, with the recommended environment in front (evidence `command`)",
        "It is your own torchrun command with only the flags that would fail corrected and \
         the measured NCCL environment in front, so the job starts the way preflight tested.",
        "Run the printed command on this node (each node prints its own).",
    ),
];

/// Every entry, in README order.
pub fn all() -> &'static [Entry] {
    ENTRIES
}

/// The entry for `id`, if the id exists.
pub fn get(id: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.id == id)
}

/// Ids that look like `query`: same prefix first, then by edit distance; at most `max`.
pub fn closest(query: &str, max: usize) -> Vec<&'static str> {
    let q = query.trim().to_ascii_lowercase();
    let mut scored: Vec<(usize, &'static str)> = ENTRIES
        .iter()
        .filter_map(|e| {
            let d = edit_distance(&q, e.id);
            let related = !q.is_empty()
                && (e.id.starts_with(&q) || e.id.contains(&q) || q.starts_with(e.area));
            let near = d <= (q.chars().count() / 3).max(2);
            (related || near).then_some((if e.id.starts_with(&q) { 0 } else { d }, e.id))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(max).map(|(_, id)| id).collect()
}

/// Levenshtein distance over chars (ids are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// README's finding-id table: header and one `| \`id\` | fires | meaning |` row per entry.
pub fn markdown_table() -> String {
    let mut s = String::from("| id | fires as | meaning |\n| --- | --- | --- |\n");
    for e in ENTRIES {
        s.push_str(&format!("| `{}` | {} | {} |\n", e.id, e.fires, e.meaning));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ids_are_unique_and_shaped_area_dot_name() {
        let mut seen = BTreeSet::new();
        for e in all() {
            assert!(seen.insert(e.id), "duplicate id {}", e.id);
            let (area, name) = e.id.split_once('.').expect("area.name");
            assert_eq!(area, e.area, "{}", e.id);
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                e.id
            );
        }
    }

    #[test]
    fn every_text_is_filled_and_one_line_where_the_table_needs_it() {
        for e in all() {
            for (what, text) in [
                ("fires", e.fires),
                ("meaning", e.meaning),
                ("why", e.why),
                ("fix", e.fix),
            ] {
                assert!(text.trim().len() > 2, "{} has no {what}", e.id);
                assert!(!text.contains('\n'), "{} {what} spans lines", e.id);
                assert!(!text.contains("  "), "{} {what} has a double space", e.id);
            }
            assert!(
                !e.meaning.contains('|'),
                "{} meaning breaks the table",
                e.id
            );
            assert!(
                ["skip", "pass", "warn", "fail", "error"]
                    .iter()
                    .any(|st| e.fires.contains(st)),
                "{}: fires names no status",
                e.id
            );
        }
    }

    #[test]
    fn get_finds_entries_and_rejects_unknown() {
        assert_eq!(get("port.in-use").map(|e| e.area), Some("port"));
        assert!(get("port.in_use").is_none());
        assert!(get("").is_none());
    }

    #[test]
    fn closest_suggests_typos_and_prefixes() {
        assert_eq!(closest("port.in_use", 3).first(), Some(&"port.in-use"));
        assert_eq!(closest("gpu.cont", 3).first(), Some(&"gpu.count"));
        let gpu = closest("gpu", 10);
        assert!(
            gpu.contains(&"gpu.mig") && gpu.contains(&"gpu.nvml"),
            "{gpu:?}"
        );
        assert!(closest("zzzzzzzzzzzzzz", 3).is_empty());
    }

    #[test]
    fn markdown_table_has_a_row_per_entry() {
        let t = markdown_table();
        assert_eq!(t.lines().count(), all().len() + 2);
        assert!(t.contains("| `sys.shm` | warn | /dev/shm smaller than 1 GiB |\n"));
    }
}
