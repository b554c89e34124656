//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        NVML,
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
    )
    .node(Action::DrainAndRepair),
    entry(
        COUNT,
        "fail",
        "fewer visible GPUs than `--nproc-per-node` / `--expect-gpus`",
        "torchrun starts `--nproc-per-node` processes and each takes `cuda:LOCAL_RANK`; with \
         fewer visible GPUs the extra ranks die with `CUDA error: invalid device ordinal`, or \
         two ranks share a GPU and NCCL aborts with `Duplicate GPU detected`. `error` when the \
         GPUs cannot be counted (NVML unavailable).",
        "Start one process per visible GPU (`torchrun --nproc-per-node=<visible> ...`), list \
         enough GPUs in `CUDA_VISIBLE_DEVICES` (`export CUDA_VISIBLE_DEVICES=0,1,2,3`), or run on \
         a node with more GPUs.",
    )
    .user(Action::FixConfig),
    entry(
        VISIBLE_DEVICES,
        "fail / warn",
        "`CUDA_VISIBLE_DEVICES` malformed, duplicated, naming missing GPUs, or hiding all",
        "CUDA stops reading `CUDA_VISIBLE_DEVICES` at the first invalid entry and hides \
         everything after it; a repeated or out-of-range index or an unknown UUID leaves ranks \
         with `invalid device ordinal` or `Duplicate GPU detected`. Warns when the value hides \
         every GPU on the node.",
        "List each GPU once, by an index below the GPU count or by a UUID from `nvidia-smi -L`, \
         or unset it to use every GPU: `unset CUDA_VISIBLE_DEVICES` or \
         `export CUDA_VISIBLE_DEVICES=0,1,2,3`.",
    )
    .user(Action::FixConfig),
    entry(
        IN_USE,
        "warn",
        "other processes hold GPU memory",
        "A process left over from a crashed run (or another user's job) holds the GPU: the new \
         job runs out of memory (`CUDA out of memory`), runs slower, or an exclusive-process \
         GPU refuses it (`CUDA-capable device(s) is/are busy or unavailable`). Fires when a \
         compute process is listed or more than 5% of the GPU's memory is used.",
        "Stop the processes holding the GPU, or pick other GPUs: \
         `nvidia-smi --query-compute-apps=pid,used_memory --format=csv`, then `kill <pid>`.",
    )
    .user(Action::RestartJob),
    entry(
        MIG,
        "warn",
        "MIG is enabled on a GPU",
        "A MIG-partitioned GPU exposes instances that NCCL cannot use for communication between \
         processes, so a multi-process job on them fails in NCCL init or falls back to slow \
         paths.",
        "Disable MIG on the GPUs the job uses (root, idle GPU, may need a reset): \
         `sudo nvidia-smi -i <gpus> -mig 0`.",
    )
    .node(Action::ResetGpu),
    entry(
        PCIE_LINK,
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
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        PCIE_REPLAY,
        "warn",
        "a GPU's PCIe replay counter is above DCGM's threshold (80)",
        "Replays are link-level retransmissions: a marginal PCIe link slows every copy and often \
         ends in XID 79 (the GPU falls off the bus) mid-job.",
        "Reseat the GPU and its riser or cable; if the counter keeps rising after a reboot \
         (`nvidia-smi -q -i <gpu> -d PCIE`), have the slot or GPU replaced.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        XID,
        "fail / warn / pass",
        "a critical NVIDIA XID error (48, 56-58, 62-65, 68, 69, 73, 74, 79-81, 92, 119, 120) in \
         the kernel log within the window (--xid-window, default 2 h), its action NVIDIA's \
         (79: reboot, 48/62/64/74/119/120: reset the GPU); warn when only 63/92 (NVIDIA: \
         ignore); others are information",
        "These XIDs mean the GPU or its memory is in a bad state (79: fallen off the bus, 48: \
         uncorrectable ECC, 64: row remap failure, 74: NVLink error, 119/120: GSP): a job on the \
         GPU crashes, hangs in NCCL or computes wrong values until the GPU is reset. Application \
         XIDs (13, 31, 43, 45) are reported for information only. `skip` when the kernel log \
         cannot be read.",
        "Drain the node, reset the GPU (`sudo nvidia-smi -r -i <gpu>`) or reboot, then run \
         `dcgmi diag -r 1`; replace a GPU that logs the XID again. See the lines with \
         `sudo dmesg -T | grep -i xid`.",
    )
    // The kernel's own words, and where they were read: the summary names only the XID.
    .terminal_evidence(&["lines", "source"])
    .node(Action::ResetGpu)
    .hardware(),
    entry(
        ECC,
        "fail / warn",
        "uncorrectable ECC errors since the driver loaded (fail), or correctable ones above 1000 \
         (warn)",
        "An uncorrectable ECC error corrupted data in GPU memory: the process using it is killed \
         (XID 48) or computes wrong values; many correctable errors mean the memory is \
         degrading.",
        "Drain the node and reset the GPU (`sudo nvidia-smi -r -i <gpu>`) or reboot so the rows \
         are remapped; replace the GPU if errors return \
         (`nvidia-smi -q -i <gpu> -d ECC`).",
    )
    .node(Action::ResetGpu)
    .hardware(),
    entry(
        ROW_REMAP,
        "fail",
        "a GPU has a row remap pending (needs a reset) or failed (no spare rows left)",
        "On Ampere and newer, a bad memory row is replaced by a spare only at the next GPU reset; \
         until then the bad row stays in use and the next job can hit XID 48/63. A failed remap \
         means the GPU ran out of spare rows.",
        "Reset the GPU with no process on it (`sudo nvidia-smi -r -i <gpu>`) or reboot the node; \
         a failed remap needs the GPU replaced \
         (`nvidia-smi -q -i <gpu> -d ROW_REMAPPER`).",
    )
    .node(Action::ResetGpu)
    .hardware(),
    entry(
        RETIRED_PAGES,
        "fail",
        "a pre-Ampere GPU (V100, T4) has memory pages waiting to be retired",
        "Pages marked for retirement after ECC errors stay in use until the driver reloads, so \
         the next job can hit the same bad memory.",
        "Reboot the node or reset the GPU (`sudo nvidia-smi -r -i <gpu>`); check with \
         `nvidia-smi -q -i <gpu> -d PAGE_RETIREMENT`.",
    )
    .node(Action::ResetGpu)
    .hardware(),
    entry(
        NVLINK,
        "fail",
        "an NVLink that should be up is down (fewer active links than the node's other GPUs of \
         the same model)",
        "NCCL builds its rings over NVLink; with a link down it routes that GPU through PCIe \
         (intra-node all-reduce several times slower) or fails to set up its channels.",
        "Check `nvidia-smi nvlink --status -i <gpu>` and `nvidia-smi nvlink --errorcounters`; \
         reset the GPU or reboot, and have the baseboard serviced if the link stays down.",
    )
    .node(Action::ResetGpu)
    .hardware(),
    entry(
        FABRIC_MANAGER,
        "fail / warn",
        "an NVSwitch system whose fabric manager is not running, or GPUs whose fabric \
         registration is not complete (or degraded)",
        "On HGX/DGX A100/H100 the NVSwitches are configured by nvidia-fabricmanager; without it \
         CUDA init fails with cudaErrorSystemNotReady or hangs, and NCCL cannot use NVLink. On \
         GB200 the GPU's fabric state must be Completed.",
        "`sudo systemctl enable --now nvidia-fabricmanager` (its version must equal the \
         driver's); check `systemctl status nvidia-fabricmanager` and \
         `nvidia-smi -q | grep -A3 -i fabric`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        PEERMEM,
        "warn",
        "InfiniBand/RoCE and GPUs on the node but no GPUDirect RDMA module (nvidia_peermem or \
         nv_peer_mem) loaded",
        "Without it NCCL cannot register GPU memory with the NIC (its log says `GDR 0`, unless \
         DMA-BUF is used): every inter-node transfer is staged through host memory, costing a \
         third or more of the bandwidth and CPU time.",
        "`sudo modprobe nvidia_peermem`, and load it at boot: \
         `echo nvidia_peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf`; confirm \
         `GDR 1` in `NCCL_DEBUG=INFO` output.",
    )
    .node(Action::DrainAndRepair),
    entry(
        CLOCKS,
        "warn",
        "a GPU is held back by a hardware slowdown, thermal or power-brake clock event reason",
        "A throttled GPU runs slower than its peers, and in a synchronous multi-node job every \
         rank waits for the slowest one.",
        "Check cooling and power (`nvidia-smi -q -i <gpu> -d PERFORMANCE,TEMPERATURE,POWER`): \
         fans, airflow, inlet temperature, power supplies.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        PERSISTENCE,
        "warn",
        "persistence mode is off on a GPU",
        "Without persistence the driver tears the GPU down when the last process exits: every \
         job start pays seconds of initialisation, and error state can be lost between runs.",
        "`sudo nvidia-smi -pm 1`, or run the persistence daemon at boot: \
         `sudo systemctl enable --now nvidia-persistenced`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        BANDWIDTH,
        "warn / skip",
        "a GPU's host-device copy bandwidth (pinned memory, measured by `preflight check`) is \
         under half of its PCIe link's rate",
        "Slow copies mean a degraded link, a GPU far from its CPU socket, or IOMMU/ACS settings \
         in the way: data loading and NCCL through the host slow the whole job. `skip` when no \
         CUDA driver is present or nothing was measured.",
        "Look at `gpu.pcie-link`, `nvidia-smi topo -m` and `nvidia-smi -q -i <gpu> -d PCIE`; \
         fix the link or placement and rerun `preflight check`.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        COMPUTE_SLOW,
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
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        COMPUTE_WRONG,
        "fail / skip",
        "a GPU's product of seeded integer matrices differs from the exact result (every \
         element checked), or its checksum differs from the other GPUs'",
        "The inputs are chosen so the exact product fits FP32: every correct GPU returns the \
         same bits whatever its model or cuBLAS version. A wrong element is silent data \
         corruption, which spoils a training run without any error.",
        "Take the node out of the job now; run the vendor diagnostics (`dcgmi diag -r 3`, \
         `nvidia-smi -q -d ECC,ROW_REMAPPER`) and have the GPU replaced if they confirm it.",
    )
    .node(Action::Replace)
    .hardware(),
    entry(
        COMPUTE_THROTTLE,
        "fail / warn / skip",
        "under the sustained load (`--burn SECONDS`, `--thorough`) a GPU slowed by more than \
         15% from its own start or ended below its peers, or showed thermal, hardware slowdown \
         or power-brake clock events",
        "A GPU that holds its pace for a second but throttles after a minute (cooling, a power \
         brake) becomes the straggler of every long run. The finding shows its timeline: rate, \
         SM clock, temperature, power and clock events.",
        "Check the GPU's cooling (fans, airflow, the liquid loop) or the node's power; rerun \
         `preflight check --burn 60`.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        PCIE_ACS,
        "warn / skip",
        "ACS Source Validation is enabled on PCIe bridges above the GPUs or RDMA NICs of a bare \
         metal node (skipped in VMs)",
        "With ACS on, peer-to-peer traffic between GPUs and GPUDirect RDMA between GPU and NIC \
         are forced up to the root complex: bandwidth collapses or NCCL hangs. Reading ACS needs \
         root (`skip` otherwise).",
        "Disable ACS on each bridge listed: `sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000` (lost \
         at reboot: add it to a boot script, or turn ACS off in the BIOS); check with \
         `sudo lspci -vvv | grep -i acsctl`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        GPUS,
        "warn",
        "GPU count or model differs across nodes",
        "torchrun starts the same `--nproc-per-node` on every node, so a node with fewer GPUs \
         fails with `invalid device ordinal`; with mixed models the whole job runs at the pace \
         of the slowest GPU.",
        "Use at most the smallest GPU count for `--nproc-per-node`, or fix the nodes with fewer \
         GPUs; prefer one GPU model per job. Compare with `nvidia-smi -L` on each node.",
    )
    .node(Action::DrainAndRepair),
    entry(
        GPU_HEALTH,
        "warn",
        "a node's GPU health differs from the other nodes with the same GPU model (PCIe width, \
         NVLinks, peermem, copy bandwidth)",
        "The job runs at the pace of its slowest rank: one node with a GPU at x8, a link down, \
         no GPUDirect RDMA or half the copy bandwidth slows every node. Nodes of different GPU \
         models are compared only with their own model.",
        "Fix the named node (see its gpu.* findings), or leave it out of the job with \
         `srun --exclude=<node>` or a host list without it.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
];
