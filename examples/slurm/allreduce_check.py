"""A one-step training stand-in: a Gloo (CPU) or NCCL (GPU) all-reduce every rank checks.

    torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=node1:29500 \
        examples/slurm/allreduce_check.py
"""

import os
import socket

import torch
import torch.distributed as dist

backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)
rank, world = dist.get_rank(), dist.get_world_size()
device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if backend == "nccl" else "cpu"
t = torch.full((1 << 20,), float(rank + 1), device=device)
dist.all_reduce(t)
want = world * (world + 1) / 2
assert t[0].item() == want and t[-1].item() == want, (t[0].item(), want)
print(
    f"allreduce ok: rank {rank} of {world} on {socket.gethostname()} ({backend}, "
    f"GLOO_SOCKET_IFNAME={os.environ.get('GLOO_SOCKET_IFNAME')}, "
    f"NCCL_SOCKET_IFNAME={os.environ.get('NCCL_SOCKET_IFNAME')}, "
    f"NCCL_IB_DISABLE={os.environ.get('NCCL_IB_DISABLE')})",
    flush=True,
)
dist.destroy_process_group()
