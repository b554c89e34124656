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
    entry(
        "net.arp-flux",
        "net",
        "warn",
        "two or more up interfaces with addresses in one IPv4 subnet, `arp_ignore` 0 and no per-interface `ip rule`: replies leave by the wrong NIC",
        "Linux answers ARP for every local address on every NIC and routes replies out of the \
         first interface of the subnet, so peers learn the wrong MAC and traffic leaves by the \
         wrong NIC (ARP flux): NCCL paths turn asymmetric, and a filtered or down NIC hangs \
         connections that seem to use another (NVIDIA/nccl #601, #1269).",
        "Set `net.ipv4.conf.all.arp_ignore=1` and `arp_announce=2` (`sysctl -w`, and a file \
         under /etc/sysctl.d/), and give each NIC its own routing table: \
         `ip rule add from <addr> table <n>` and `ip route add <subnet> dev <if> src <addr> table <n>`; \
         or put the NICs in different subnets.",
    ),
    entry(
        "net.nccl-auto-pick",
        "net",
        "warn",
        "NCCL_SOCKET_IFNAME is unset and NCCL would pick, besides the right NIC, one the peers cannot reach or use (link-local, shared address, no route, wireless, BMC)",
        "Without NCCL_SOCKET_IFNAME NCCL takes every `ib*` interface, else every interface but \
         `docker*`, `lo*` and `virbr*`, and uses all of them: its first pick carries the \
         bootstrap, the others carry socket traffic too. A link-local address that every node \
         holds (a BMC's USB NIC at 169.254.0.2, a cloud's metadata link), a second port with no \
         route, a wireless or management NIC hangs `ncclCommInitRank` or the first collective \
         (aws-samples/aws-do-eks #54, uccl-project/uccl #1034).",
        "Set NCCL_SOCKET_IFNAME to the interface the report advises on every node (the launch \
         commands carry it): `export NCCL_SOCKET_IFNAME=<if>`; or exclude the bad one while \
         keeping NCCL's own exclusions: `export NCCL_SOCKET_IFNAME=^docker,lo,virbr,<bad-if>`.",
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
    entry(
        "ib.gid-index",
        "ib",
        "warn",
        "`NCCL_IB_GID_INDEX` names a RoCE GID that is empty, link-local, RoCE v1, or not IPv4-mapped where the port has IPv4-mapped v2 GIDs",
        "On RoCE the GID index picks the address and RoCE version of every queue pair. A \
         link-local or RoCE v1 GID does not route across subnets, and an index whose GID differs \
         in kind across nodes makes both ends disagree: NCCL fails with `NET/IB : Got completion \
         with error 12` (retry exceeded) or hangs at init (NVIDIA/nccl #426, #769, #1131). Read \
         from /sys/class/infiniband/<dev>/ports/<n>/gids and gid_attrs/types.",
        "Point NCCL at the port's IPv4-mapped RoCE v2 GID (the same kind on every node): \
         `export NCCL_IB_GID_INDEX=<index>` as the finding suggests (`show_gids` lists the \
         table), or `unset NCCL_IB_GID_INDEX` and let NCCL choose.",
    ),
    entry(
        "ib.rate",
        "ib",
        "warn",
        "an RDMA port runs slower than the node's other rails or than the same rail on other nodes",
        "NCCL spreads its channels over every rail and waits for the slowest: one port that \
         trained at 200 instead of 400 Gb/s (fewer lanes, a lower speed: a bad cable or \
         transceiver) slows every collective of the job, and shows up elsewhere only as a low \
         collective.busbw. Read from /sys/class/infiniband/<hca>/ports/<n>/rate; the rail is the \
         GPU closest to the HCA on PCIe, as NCCL maps it.",
        "Reseat or replace the cable or transceiver on that port and check the switch port's \
         speed: `ibstat <hca> <port>`, `mlxlink -d <pci> -p <port> -m -c -e` (`ethtool <netdev>` \
         on RoCE). Until it is fixed, leave the rail out with `NCCL_IB_HCA`.",
    ),
    entry(
        "ib.rails",
        "ib",
        "warn",
        "a node has fewer working rails (ACTIVE HCA ports) than its peers",
        "NCCL builds as many channels as the rails allow on each node; a node with a rail missing \
         (port down, HCA absent) carries its share over fewer links, and every collective waits \
         for it.",
        "Bring the missing rail up (`ibstat`, cable, switch port, subnet manager) or replace the \
         HCA; until then run with `NCCL_IB_HCA` listing the rails every node has (the \
         recommendation gives it).",
    ),
    entry(
        "ib.firmware",
        "ib",
        "warn",
        "HCA firmware (per model) or the RDMA driver stack differs across nodes",
        "Mixed firmware or drivers (MLNX_OFED/DOCA against inbox) change link training, adaptive \
         routing and RDMA features between the two ends of a rail; health checkers (ClusterMAX, \
         sichek) require one version everywhere.",
        "Bring every node to one firmware per HCA model and one driver: `mlxfwmanager --query`, \
         `ibv_devinfo | grep fw_ver`, `modinfo mlx5_core`.",
    ),
    entry(
        "ib.roce-gid",
        "ib",
        "warn",
        "the RoCE GID NCCL would pick (v2, IPv4-mapped) is not of one kind on every node",
        "NCCL picks a RoCE v2 IPv4-mapped GID by default; a node whose netdev has no IPv4 address \
         offers only a link-local or IPv6 GID, and the two ends of a queue pair disagree: \
         `NET/IB : Got completion with error 12` or a hang at init.",
        "Give every RoCE netdev its IPv4 address so the IPv4-mapped RoCE v2 GID exists, check with \
         `show_gids`, and set `NCCL_IB_GID_INDEX` only when the index is the same on every node.",
    ),
    entry(
        "ib.counters",
        "ib",
        "warn",
        "RDMA port error counters over the health checkers' thresholds, or saturated",
        "symbol_error, link_error_recovery, link_downed, port_rcv_errors, \
         excessive_buffer_overrun_errors and local_link_integrity_errors count a link that \
         corrupts, retrains or drops; NVIDIA NVSentinel treats any link_downed, buffer overrun or \
         local link integrity error as fatal and symbol errors over the IBTA budget (120 an hour) \
         as degradation. These counters are 16, 8 or 4 bits wide and stop at their maximum: a \
         saturated one is reported as such, its true count unknown.",
        "Check the cable and transceiver (`mlxlink -d <pci> -p <port> -m -c -e` shows the \
         bit-error rate), reseat or replace it, clear the counters (`perfquery -x -R -C <hca> -P \
         <port>`) and rerun preflight to see whether they grow again.",
    ),
    entry(
        "ib.counters-grew",
        "ib",
        "warn / fail",
        "RDMA error counters grew while preflight measured (a link flap, bit errors, RDMA retries)",
        "Two snapshots of the port counters around the measurement: link_downed, buffer overruns, \
         local link integrity errors or RDMA transport retries exhausted growing during the run \
         (fail) mean a job on that rail fails or stalls the same way; symbol or receive errors \
         growing (warn) mean a link that degrades under load. A counter that saturated is \
         reported as saturated, not differenced.",
        "Reseat or replace the cable or transceiver on that port, check the switch port's log, and \
         leave the rail out with `NCCL_IB_HCA` until it holds.",
    ),
    entry(
        "ib.container",
        "ib",
        "warn",
        "HCAs listed in sysfs have no verbs device in /dev/infiniband (a container started without them)",
        "NCCL opens the HCAs through /dev/infiniband/uverbsN; a container that sees the HCAs in \
         /sys but lacks their device nodes makes NCCL leave them out, or fall back to TCP sockets \
         without an error (`NET/Socket` in NCCL_DEBUG=INFO).",
        "Start the container with the RDMA devices: docker `--device=/dev/infiniband \
         --cap-add=IPC_LOCK`, Kubernetes the RDMA shared device plugin's resource; check with \
         `ls -l /dev/infiniband` and `ibv_devices`.",
    ),
    entry(
        "ib.iommu",
        "ib",
        "warn",
        "the IOMMU translates DMA for the HCAs or GPUs (not passthrough) where GPUDirect RDMA runs",
        "GPUDirect RDMA moves data between the HCA and GPU memory peer to peer; with the IOMMU \
         translating (iommu_group type DMA or DMA-FQ) those transfers fail or run far below the \
         link rate. NVIDIA asks for `iommu=pt` on GPU nodes.",
        "Add `iommu=pt` (with `intel_iommu=on` or `amd_iommu=on`) to the kernel command line, \
         update the boot loader and reboot; `cat /sys/bus/pci/devices/*/iommu_group/type` shows \
         the mode.",
    ),
    entry(
        "ib.rail-fault",
        "ib",
        "warn / fail",
        "a per-rail NCCL pair test failed or ran slow: the (node, rail HCA, GPU), node, rail switch or pair that explains it",
        "Each matched pair of nodes runs one 2-rank NCCL send/recv per rail (GPU r with its closest \
         HCA, NCCL_IB_HCA pinned, NCCL_NET=IB so it fails instead of falling back to TCP). A rail \
         bad with two or more partners that pass elsewhere is that node's rail; most rails of a \
         node bad is the node; the same rail bad on three or more nodes is that rail's switch; a \
         pair bad while both ends pass elsewhere is the path between them. Suspects are retested \
         against known-good partners (fail when confirmed, warn when not yet retested).",
        "Reseat or replace the cable or transceiver on the named port (`ibstat`, `mlxlink -d <pci> \
         -p <port> -m -c -e`, `ibportstate`), check the rail's switch (`ibdiagnet`), and leave \
         the bad rail out for now with the `NCCL_IB_HCA` the finding gives.",
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
    // ----- gpu health (issue 22) -----
    entry(
        "gpu.pcie-link",
        "gpu",
        "warn",
        "a GPU's PCIe link trained below its maximum width, or below its maximum generation \
         while the GPU works at P0",
        "A GPU at x8 instead of x16 (a badly seated card, a riser, a BIOS slot setting) moves \
         host-device data at half speed: data loading, NCCL through the host and GPUDirect RDMA \
         all slow down, and the job runs at that GPU's pace. Idle GPUs lower their link \
         generation on purpose, so the generation counts only at P0.",
        "Reseat the GPU (or its riser or cable) and check the slot's BIOS setting; compare \
         `sudo lspci -vv -s <bus id> | grep -E 'LnkCap|LnkSta'` and \
         `nvidia-smi -q -i <gpu> -d PCIE`.",
    ),
    entry(
        "gpu.pcie-replay",
        "gpu",
        "warn",
        "a GPU's PCIe replay counter is above DCGM's threshold (80)",
        "Replays are link-level retransmissions: a marginal PCIe link slows every copy and often \
         ends in XID 79 (the GPU falls off the bus) mid-job.",
        "Reseat the GPU and its riser or cable; if the counter keeps rising after a reboot \
         (`nvidia-smi -q -i <gpu> -d PCIE`), have the slot or GPU replaced.",
    ),
    entry(
        "gpu.xid",
        "gpu",
        "fail / pass",
        "a critical NVIDIA XID error (48, 56-58, 62-65, 68, 69, 73, 74, 79-81, 92, 119, 120) in \
         the kernel log within the window (--xid-window, default 2 h); others are information",
        "These XIDs mean the GPU or its memory is in a bad state (79: fallen off the bus, 48: \
         uncorrectable ECC, 64: row remap failure, 74: NVLink error, 119/120: GSP): a job on the \
         GPU crashes, hangs in NCCL or computes wrong values until the GPU is reset. Application \
         XIDs (13, 31, 43, 45) are reported for information only. `skip` when the kernel log \
         cannot be read.",
        "Drain the node, reset the GPU (`sudo nvidia-smi -r -i <gpu>`) or reboot, then run \
         `dcgmi diag -r 1`; replace a GPU that logs the XID again. See the lines with \
         `sudo dmesg -T | grep -i xid`.",
    ),
    entry(
        "gpu.ecc",
        "gpu",
        "fail / warn",
        "uncorrectable ECC errors since the driver loaded (fail), or correctable ones above 1000 \
         (warn)",
        "An uncorrectable ECC error corrupted data in GPU memory: the process using it is killed \
         (XID 48) or computes wrong values; many correctable errors mean the memory is \
         degrading.",
        "Drain the node and reset the GPU (`sudo nvidia-smi -r -i <gpu>`) or reboot so the rows \
         are remapped; replace the GPU if errors return \
         (`nvidia-smi -q -i <gpu> -d ECC`).",
    ),
    entry(
        "gpu.row-remap",
        "gpu",
        "fail",
        "a GPU has a row remap pending (needs a reset) or failed (no spare rows left)",
        "On Ampere and newer, a bad memory row is replaced by a spare only at the next GPU reset; \
         until then the bad row stays in use and the next job can hit XID 48/63. A failed remap \
         means the GPU ran out of spare rows.",
        "Reset the GPU with no process on it (`sudo nvidia-smi -r -i <gpu>`) or reboot the node; \
         a failed remap needs the GPU replaced \
         (`nvidia-smi -q -i <gpu> -d ROW_REMAPPER`).",
    ),
    entry(
        "gpu.retired-pages",
        "gpu",
        "fail",
        "a pre-Ampere GPU (V100, T4) has memory pages waiting to be retired",
        "Pages marked for retirement after ECC errors stay in use until the driver reloads, so \
         the next job can hit the same bad memory.",
        "Reboot the node or reset the GPU (`sudo nvidia-smi -r -i <gpu>`); check with \
         `nvidia-smi -q -i <gpu> -d PAGE_RETIREMENT`.",
    ),
    entry(
        "gpu.nvlink",
        "gpu",
        "fail",
        "an NVLink that should be up is down (fewer active links than the node's other GPUs of \
         the same model)",
        "NCCL builds its rings over NVLink; with a link down it routes that GPU through PCIe \
         (intra-node all-reduce several times slower) or fails to set up its channels.",
        "Check `nvidia-smi nvlink --status -i <gpu>` and `nvidia-smi nvlink --errorcounters`; \
         reset the GPU or reboot, and have the baseboard serviced if the link stays down.",
    ),
    entry(
        "gpu.fabric-manager",
        "gpu",
        "fail / warn",
        "an NVSwitch system whose fabric manager is not running, or GPUs whose fabric \
         registration is not complete (or degraded)",
        "On HGX/DGX A100/H100 the NVSwitches are configured by nvidia-fabricmanager; without it \
         CUDA init fails with cudaErrorSystemNotReady or hangs, and NCCL cannot use NVLink. On \
         GB200 the GPU's fabric state must be Completed.",
        "`sudo systemctl enable --now nvidia-fabricmanager` (its version must equal the \
         driver's); check `systemctl status nvidia-fabricmanager` and \
         `nvidia-smi -q | grep -A3 -i fabric`.",
    ),
    entry(
        "gpu.peermem",
        "gpu",
        "warn",
        "InfiniBand/RoCE and GPUs on the node but no GPUDirect RDMA module (nvidia_peermem or \
         nv_peer_mem) loaded",
        "Without it NCCL cannot register GPU memory with the NIC (its log says `GDR 0`, unless \
         DMA-BUF is used): every inter-node transfer is staged through host memory, costing a \
         third or more of the bandwidth and CPU time.",
        "`sudo modprobe nvidia_peermem`, and load it at boot: \
         `echo nvidia_peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf`; confirm \
         `GDR 1` in `NCCL_DEBUG=INFO` output.",
    ),
    entry(
        "gpu.clocks",
        "gpu",
        "warn",
        "a GPU is held back by a hardware slowdown, thermal or power-brake clock event reason",
        "A throttled GPU runs slower than its peers, and in a synchronous multi-node job every \
         rank waits for the slowest one.",
        "Check cooling and power (`nvidia-smi -q -i <gpu> -d PERFORMANCE,TEMPERATURE,POWER`): \
         fans, airflow, inlet temperature, power supplies.",
    ),
    entry(
        "gpu.persistence",
        "gpu",
        "warn",
        "persistence mode is off on a GPU",
        "Without persistence the driver tears the GPU down when the last process exits: every \
         job start pays seconds of initialisation, and error state can be lost between runs.",
        "`sudo nvidia-smi -pm 1`, or run the persistence daemon at boot: \
         `sudo systemctl enable --now nvidia-persistenced`.",
    ),
    entry(
        "gpu.bandwidth",
        "gpu",
        "warn / skip",
        "a GPU's host-device copy bandwidth (pinned memory, measured by `preflight check`) is \
         under half of its PCIe link's rate",
        "Slow copies mean a degraded link, a GPU far from its CPU socket, or IOMMU/ACS settings \
         in the way: data loading and NCCL through the host slow the whole job. `skip` when no \
         CUDA driver is present or nothing was measured.",
        "Look at `gpu.pcie-link`, `nvidia-smi topo -m` and `nvidia-smi -q -i <gpu> -d PCIE`; \
         fix the link or placement and rerun `preflight check`.",
    ),
    entry(
        "gpu.compute-slow",
        "gpu",
        "fail / warn / skip",
        "a GPU multiplies (BF16/FP16/TF32 through cuBLAS) below 85% of its model's reference \
         (the upper quartile of the same model's GPUs on the node, or across the cluster), or \
         below half of the model's published dense rate; or could not run the test",
        "One slow GPU holds every step of a data-parallel job to its pace: clocks held back, a \
         lowered power limit, heat or a bad board. The finding names the GPU (index, bus id, \
         UUID, model), the measured and expected TFLOP/s and its clocks, power and temperature \
         read while it ran. `skip` where the test did not run (no GPU, no libcublas).",
        "Compare the GPU's clocks and throttle reasons with a healthy one (`nvidia-smi -q -d \
         PERFORMANCE,CLOCK,POWER`); restore a lowered power limit (`nvidia-smi -pl`), fix \
         cooling, or drain the node and have the GPU replaced; rerun `preflight check --gemm`.",
    ),
    entry(
        "gpu.compute-wrong",
        "gpu",
        "fail / skip",
        "a GPU's product of seeded integer matrices differs from the exact result (every \
         element checked), or its checksum differs from the other GPUs'",
        "The inputs are chosen so the exact product fits FP32: every correct GPU returns the \
         same bits whatever its model or cuBLAS version. A wrong element is silent data \
         corruption, which spoils a training run without any error.",
        "Take the node out of the job now; run the vendor diagnostics (`dcgmi diag -r 3`, \
         `nvidia-smi -q -d ECC,ROW_REMAPPER`) and have the GPU replaced if they confirm it.",
    ),
    entry(
        "gpu.compute-throttle",
        "gpu",
        "fail / warn / skip",
        "under the sustained load (`--burn SECONDS`, `--thorough`) a GPU slowed by more than \
         15% from its own start or ended below its peers, or showed thermal, hardware slowdown \
         or power-brake clock events",
        "A GPU that holds its pace for a second but throttles after a minute (cooling, a power \
         brake) becomes the straggler of every long run. The finding shows its timeline: rate, \
         SM clock, temperature, power and clock events.",
        "Check the GPU's cooling (fans, airflow, the liquid loop) or the node's power; rerun \
         `preflight check --burn 60`.",
    ),
    // ----- pcie -----
    entry(
        "pcie.acs",
        "pcie",
        "warn / skip",
        "ACS Source Validation is enabled on PCIe bridges above the GPUs or RDMA NICs of a bare \
         metal node (skipped in VMs)",
        "With ACS on, peer-to-peer traffic between GPUs and GPUDirect RDMA between GPU and NIC \
         are forced up to the root complex: bandwidth collapses or NCCL hangs. Reading ACS needs \
         root (`skip` otherwise).",
        "Disable ACS on each bridge listed: `sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000` (lost \
         at reboot: add it to a boot script, or turn ACS off in the BIOS); check with \
         `sudo lspci -vvv | grep -i acsctl`.",
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
    entry(
        "sys.listen-backlog",
        "sys",
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
    ),
    entry(
        "sys.nofile",
        "sys",
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
    ),
    entry(
        "sys.port-range",
        "sys",
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
    ),
    entry(
        "sys.neigh-table",
        "sys",
        "warn",
        "`gc_thresh3` (IPv4, and IPv6 when used) below the peers on the node's on-link subnets (nodes × this node's addresses there)",
        "The kernel keeps one neighbour (ARP/NDP) entry per on-link peer address; past \
         `gc_thresh3` it logs `neighbour table overflow` and new connections fail at random, \
         which at a few hundred nodes with several NICs on one flat subnet is the default 1024. \
         Skipped in a network namespace, which has no gc_thresh3 of its own.",
        "Raise the thresholds above the peer count (twice, for headroom), now and at boot: \
         `sysctl -w net.ipv4.neigh.default.gc_thresh3=<n>` (and gc_thresh1/2 at n/4 and n/2; \
         `net.ipv6.neigh.default.*` for IPv6) and the same lines under /etc/sysctl.d/.",
    ),
    entry(
        "sys.stale-nccl",
        "sys",
        "warn",
        "NCCL shared-memory segments (`/dev/shm/nccl-*`) whose owning processes are gone (sizes in the evidence)",
        "A crashed or killed job leaves its NCCL segments in /dev/shm; no process maps or holds \
         them (read from /proc/<pid>/maps and fd), but they keep their tmpfs memory, so the next \
         job's NCCL fails with `posix_fallocate failed: No space left on device` or bus errors \
         in a small /dev/shm.",
        "Remove the segments no process holds, after checking with `fuser -v /dev/shm/nccl-*` \
         that no job is starting: `rm -f /dev/shm/nccl-<name> ...` as the finding lists.",
    ),
    entry(
        "sys.pids",
        "sys",
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
         another preflight version, a rank already taken, an address not in the host list, \
         facts over the limits, or a data listener that is not its own (kind `listener`)",
        "A refused node is not missing: it is running with a different idea of the job. \
         torchrun would either never let it join (another secret or node count: a 900 s \
         timeout) or, with a rank claimed twice, start two processes as one rank.",
        "Start every node with the same flags: the same --token / PREFLIGHT_TOKEN / \
         --token-file (or --rdzv-id), the same --nnodes and its own --node-rank, the same \
         preflight release; the finding names the address, the rank it claimed and what \
         differs.",
    ),
    entry(
        "cluster.nat",
        "cluster",
        "fail",
        "a node's join reached rank 0 from an address none of its interfaces hold: it sits \
         behind NAT (a container on a bridge network, a VM with a private address of another \
         VPC), so the address NCCL and gloo advertise for it cannot be reached",
        "Outgoing connections from a node behind NAT work (rendezvous included), so every node \
         joins; then NCCL and gloo advertise the node's own, private address and its peers \
         cannot connect to it: `Connection timed out` / `No route to host` in the bootstrap, \
         gloo's `Timed out waiting ... for recv`, a watchdog timeout. Publishing only the \
         master port (`-p 29500:29500`) is not enough: NCCL and gloo listen on random ports.",
        "Run the job in the host's network namespace: Docker `--network=host`, Kubernetes \
         `hostNetwork: true` (with `dnsPolicy: ClusterFirstWithHostNet`), or give the node an \
         address the other nodes reach directly (same VPC, peering without NAT). The finding \
         names the address rank 0 saw and the addresses the node holds (`ip -br addr`).",
    ),
    entry(
        "cluster.healthy-set",
        "cluster",
        "fail",
        "the cluster fails, and even its healthy set (the nodes that joined, pass their own \
         checks and connect with each other) is smaller than --min-nodes (the MIN of an \
         elastic --nnodes=MIN:MAX) or rounds to nothing under --nodes-multiple-of",
        "Without its failing nodes the cluster could still train, but not at the size the job \
         needs: starting it would fail again at the rendezvous (too few nodes) or with a \
         parallel layout that does not divide the node count.",
        "Fix the findings the summary names as costing the most nodes (each excluded node \
         lists its finding ids in recommendation.healthy_set.excluded), or lower --min-nodes \
         / --nodes-multiple-of, then rerun preflight on every node.",
    ),
    entry(
        "cluster.master-resolution",
        "cluster",
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
    ),
    entry(
        "cluster.fqdn",
        "cluster",
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
    ),
    entry(
        "cluster.master-elsewhere",
        "cluster",
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
    ),
    entry(
        "cluster.master-late",
        "cluster",
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
    ),
    entry(
        "cluster.launcher-master",
        "cluster",
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
    entry(
        "cluster.gpu-health",
        "cluster",
        "warn",
        "a node's GPU health differs from the other nodes with the same GPU model (PCIe width, \
         NVLinks, peermem, copy bandwidth)",
        "The job runs at the pace of its slowest rank: one node with a GPU at x8, a link down, \
         no GPUDirect RDMA or half the copy bandwidth slows every node. Nodes of different GPU \
         models are compared only with their own model.",
        "Fix the named node (see its gpu.* findings), or leave it out of the job with \
         `srun --exclude=<node>` or a host list without it.",
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
        "link.intercepted",
        "link",
        "fail",
        "connections were accepted but never authenticated as the peer they dialled: a nat \
         REDIRECT/DNAT rule of a node (named), or something between the nodes, answers in the \
         peer's place (a service-mesh sidecar, a transparent proxy)",
        "A sidecar or transparent proxy that takes the job's TCP connections lets the connect \
         succeed and then cannot carry NCCL's or gloo's protocol: the bootstrap hangs or \
         fails (`Connection reset by peer`, `Socket Timeout`, gloo's `Connection closed by \
         peer`) although no firewall drops anything. Told apart from a slow peer: the same \
         listener completed the other nodes' handshakes in time, or what answered is not \
         preflight.",
        "Exclude the job's traffic from the mesh: Istio's pod annotations \
         `traffic.sidecar.istio.io/excludeOutboundIPRanges: <cluster subnet>` (or \
         `excludeOutboundPorts` / `excludeInboundPorts`), or no sidecar for the job's pods \
         (`sidecar.istio.io/inject: \"false\"`); or delete the node's rule the finding names \
         (`iptables -t nat -D ...`, `iptables-save -t nat` to see them).",
    ),
    entry(
        "link.idle-timeout",
        "link",
        "fail",
        "connections between two nodes carried data when opened and no longer after a silence \
         (`--idle-test`): a stateful firewall or NAT between them, or a node's own short \
         conntrack timeout, forgets idle connections",
        "NCCL keeps its sockets open and silent between collectives and sends no keepalives, so \
         a device that expires idle connections (a firewall's or NAT's established timeout, \
         `nf_conntrack_tcp_timeout_established` set short) breaks them while the job computes, \
         checkpoints or evaluates: the next collective hangs until the watchdog fires \
         (`Call to recv ... failed : Connection timed out`, `Connection reset by peer`, \
         nccl#1619). Every connect and the bandwidth tests pass: only a pause shows it.",
        "Raise the established-connection (idle) timeout of the firewall or NAT between the \
         nodes above the job's longest pause, or keep the job's traffic out of its connection \
         tracking; on a Linux box in between (or a node whose own timeout the finding names): \
         `sysctl -w net.netfilter.nf_conntrack_tcp_timeout_established=432000` (the kernel's \
         default), made permanent in /etc/sysctl.d.",
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
        "a node (sending, receiving or both), a pair, one direction, a cut between two groups (a rack uplink) or the whole link is far below the cluster's reference throughput or its rated speed",
        "A ring or tree all-reduce runs at the pace of its slowest link. Each pair is judged \
         against a reference the slow part cannot move (the upper quartile of the measured \
         pairs), half the rated speed of a NIC one TCP stream can fill (up to 25 Gbit/s) and \
         `--min-link-gbit`; suspects are measured again against known-fast partners before \
         they are named, and the smallest part that explains the slow pairs is named: a node \
         slow with every healthy partner, two groups slow only between each other (a rack \
         uplink, a spine port, a routed hop), a pair, or one direction of a path. With two \
         nodes there is no third partner: the link is judged against the rated speed and the \
         other networks measured.",
        "Check the named part: a node's NIC (`ethtool <if>`, `ethtool -S <if>`, `tc qdisc show \
         dev <if>`), a pair's path (`tracepath -n <addr>` from both ends), a cut's uplink \
         (the switch ports between the groups, `ip route get <addr>`); rerun with `--thorough` \
         to confirm.",
    ),
    entry(
        "link.latency",
        "link",
        "warn",
        "a node (or the path between two groups) whose round-trip times stand far above the cluster's",
        "NCCL's small messages and every step's synchronisation wait on round trips: a node \
         whose median RTT to its partners is above 2.1 times the cluster's reference (the \
         lower quartile of the pairs' RTTs) and at least 1 ms above it holds every collective \
         back. Its causes are the node's own: CPU power states or load, interrupt moderation, \
         a queue in its path.",
        "Check the node's load and CPU governor, `ethtool -c <if>` (interrupt coalescing) and \
         `tc qdisc show dev <if>`; for a cut, trace the route between the groups.",
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
        "launch.tcpstore",
        "launch",
        "warn",
        "a world above 1,024 ranks with the legacy TCPStore (torch < 2.4, or `USE_LIBUV=0`), judged on the master",
        "The legacy TCPStore server serves every rank from one thread and times out above about \
         1,000 ranks at init; the libuv backend does not and is the default from torch 2.4 \
         (PyTorch's libuv TCPStore tutorial, pytorch/pytorch PR #118944). `USE_LIBUV=0` turns it \
         back off.",
        "Use the libuv store: `unset USE_LIBUV` where it is 0, `export USE_LIBUV=1` on torch \
         2.3, or upgrade: `pip install -U 'torch>=2.4'`.",
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
    entry(
        "launch.tasks-per-node",
        "launch",
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

/// The finding-id table of README and the guide (docs/src/findings.md): header and one `| \`id\` | fires | meaning |` row per entry.
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
        let gpu = closest("gpu", 20);
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
