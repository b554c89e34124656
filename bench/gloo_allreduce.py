#!/usr/bin/env python3
"""torch.distributed gloo all-reduce busbw, nccl-tests style, for bench/allreduce.sh.

Run one process per rank (the script starts them inside network namespaces). Rank 0 prints one
JSON line per size: {"bytes", "time_us", "algbw_gb_s", "busbw_gb_s", "wrong"}, where time_us is
the slowest rank's mean time per iteration.
"""
import argparse
import json
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--sizes", required=True, help="comma-separated byte counts")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iters", type=int, default=5)
    a = p.parse_args()
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{a.master}:{a.port}",
        rank=a.rank,
        world_size=a.world,
        timeout=__import__("datetime").timedelta(seconds=120),
    )
    n = a.world
    for nbytes in [int(s) for s in a.sizes.split(",")]:
        count = nbytes // 4
        idx = torch.arange(count, dtype=torch.int64)
        mine = ((idx * 7 + a.rank * 13) % 61).to(torch.float32)
        expected = sum(((idx * 7 + r * 13) % 61) for r in range(n)).to(torch.float32)
        buf = mine.clone()
        for _ in range(a.warmup):
            buf.copy_(mine)
            dist.all_reduce(buf)
        dist.barrier()
        total = 0.0
        wrong = 0
        for i in range(a.iters):
            buf.copy_(mine)
            t = time.perf_counter()
            dist.all_reduce(buf)
            total += time.perf_counter() - t
            if i == 0:
                wrong = int((buf != expected).sum())
        t_us = torch.tensor([total / a.iters * 1e6], dtype=torch.float64)
        dist.all_reduce(t_us, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(w)
        if a.rank == 0:
            time_us = float(t_us[0])
            algbw = nbytes / time_us / 1e3
            print(json.dumps({
                "bytes": nbytes,
                "time_us": round(time_us, 2),
                "algbw_gb_s": round(algbw, 3),
                "busbw_gb_s": round(algbw * 2 * (n - 1) / n, 3),
                "wrong": int(w[0]),
            }), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
