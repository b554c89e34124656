//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        PORT_DOWN,
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
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        VERBS,
        "warn",
        "RDMA devices exist but libibverbs is not installed",
        "NCCL's InfiniBand transport dlopens libibverbs.so.1; without it NCCL silently falls \
         back to TCP sockets (`NET/Socket` in NCCL_DEBUG=INFO), and the job runs many times \
         slower than the fabric allows.",
        "Install rdma-core's verbs library and the provider for the adapter: \
         `apt-get install -y libibverbs1 ibverbs-providers` or \
         `dnf install -y rdma-core libibverbs`; check with `ibv_devices`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        PARTIAL,
        "warn",
        "InfiniBand usable on some nodes only",
        "NCCL needs the same transport on every node: when some nodes have an ACTIVE IB/RoCE \
         port and others none, ranks disagree on the network and init hangs, or fails with \
         `NET/IB` errors on the nodes that try IB.",
        "Run the job with `NCCL_IB_DISABLE=1` (TCP sockets on every node), or bring up an IB/RoCE \
         port on the nodes without one (`ibstat` there) and rerun preflight.",
    )
    .node(Action::DrainAndRepair),
    entry(
        GID_INDEX,
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
    )
    .user(Action::FixConfig),
    entry(
        RATE,
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
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        RAILS,
        "warn",
        "a node has fewer working rails (ACTIVE HCA ports) than its peers",
        "NCCL builds as many channels as the rails allow on each node; a node with a rail missing \
         (port down, HCA absent) carries its share over fewer links, and every collective waits \
         for it.",
        "Bring the missing rail up (`ibstat`, cable, switch port, subnet manager) or replace the \
         HCA; until then run with `NCCL_IB_HCA` listing the rails every node has (the \
         recommendation gives it).",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        FIRMWARE,
        "warn",
        "HCA firmware (per model) or the RDMA driver stack differs across nodes",
        "Mixed firmware or drivers (MLNX_OFED/DOCA against inbox) change link training, adaptive \
         routing and RDMA features between the two ends of a rail; health checkers (ClusterMAX, \
         sichek) require one version everywhere.",
        "Bring every node to one firmware per HCA model and one driver: `mlxfwmanager --query`, \
         `ibv_devinfo | grep fw_ver`, `modinfo mlx5_core`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        ROCE_GID,
        "warn",
        "the RoCE GID NCCL would pick (v2, IPv4-mapped) is not of one kind on every node",
        "NCCL picks a RoCE v2 IPv4-mapped GID by default; a node whose netdev has no IPv4 address \
         offers only a link-local or IPv6 GID, and the two ends of a queue pair disagree: \
         `NET/IB : Got completion with error 12` or a hang at init.",
        "Give every RoCE netdev its IPv4 address so the IPv4-mapped RoCE v2 GID exists, check with \
         `show_gids`, and set `NCCL_IB_GID_INDEX` only when the index is the same on every node.",
    )
    .node(Action::DrainAndRepair),
    entry(
        COUNTERS,
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
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        COUNTERS_GREW,
        "warn / fail",
        "RDMA error counters grew while preflight measured (a link flap, bit errors, RDMA retries)",
        "Two snapshots of the port counters around the measurement: link_downed, buffer overruns, \
         local link integrity errors or RDMA transport retries exhausted growing during the run \
         (fail) mean a job on that rail fails or stalls the same way; symbol or receive errors \
         growing (warn) mean a link that degrades under load. A counter that saturated is \
         reported as saturated, not differenced.",
        "Reseat or replace the cable or transceiver on that port, check the switch port's log, and \
         leave the rail out with `NCCL_IB_HCA` until it holds.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        CONTAINER,
        "warn",
        "HCAs listed in sysfs have no verbs device in /dev/infiniband (a container started without them)",
        "NCCL opens the HCAs through /dev/infiniband/uverbsN; a container that sees the HCAs in \
         /sys but lacks their device nodes makes NCCL leave them out, or fall back to TCP sockets \
         without an error (`NET/Socket` in NCCL_DEBUG=INFO).",
        "Start the container with the RDMA devices: docker `--device=/dev/infiniband \
         --cap-add=IPC_LOCK`, Kubernetes the RDMA shared device plugin's resource; check with \
         `ls -l /dev/infiniband` and `ibv_devices`.",
    )
    .user(Action::FixConfig),
    entry(
        IOMMU,
        "warn",
        "the IOMMU translates DMA for the HCAs or GPUs (not passthrough) where GPUDirect RDMA runs",
        "GPUDirect RDMA moves data between the HCA and GPU memory peer to peer; with the IOMMU \
         translating (iommu_group type DMA or DMA-FQ) those transfers fail or run far below the \
         link rate. NVIDIA asks for `iommu=pt` on GPU nodes.",
        "Add `iommu=pt` (with `intel_iommu=on` or `amd_iommu=on`) to the kernel command line, \
         update the boot loader and reboot; `cat /sys/bus/pci/devices/*/iommu_group/type` shows \
         the mode.",
    )
    .node(Action::Reboot),
    entry(
        RAIL_FAULT,
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
    )
    .node(Action::DrainAndRepair)
    .hardware(),
];
