#!/usr/bin/env python3
"""Writes real PyTorch Flight Recorder dumps (gloo, CPU, 127.0.0.1 only) for the hang scenarios
`preflight explain --dumps` is tested on, as pickle (`<scenario>/pickle/trace_<rank>`) and JSON
(`<scenario>/json/trace_<rank>.json`), then runs torch's own analyzer on each pickle set and
keeps what it printed (`<scenario>/fr_trace.txt`).

    python3 tests/tools/fr_scenarios.py OUT_DIR [SCENARIO ...]

Scenarios: healthy, skip (a rank skips an all_reduce and calls barrier), straggler (a rank is
still busy when the others time out), dead (a rank exits without a dump), mismatch (another dtype
of the same size), subgroup (a hang inside one of two subgroups; file names carry host names).
Every torch process runs under its own timeout (torch can hang at exit).
"""

import datetime
import os
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 3  # the process groups' timeout: a hang ends in seconds
WORLD = {"healthy": 3, "skip": 3, "straggler": 3, "dead": 3, "mismatch": 2, "subgroup": 4}
HOSTS = {"subgroup": ["nodeA", "nodeA", "nodeB", "nodeB"]}


def dump(out, scenario, rank):
    import torch._C._distributed_c10d as c10d

    host = HOSTS.get(scenario)
    name = f"trace_{host[rank]}_{rank}" if host else f"trace_{rank}"
    for sub, data, ext in (("pickle", c10d._dump_fr_trace(), ""), ("json", c10d._dump_fr_trace_json(), ".json")):
        os.makedirs(os.path.join(out, scenario, sub), exist_ok=True)
        with open(os.path.join(out, scenario, sub, name + ext), "wb") as f:
            f.write(data)


def steps(dist, torch):
    """Three collectives every scenario starts with: all_reduce, broadcast, all_gather."""
    t = torch.ones(4)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    out = [torch.zeros(4) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)


def rank_main(scenario, rank, out, store_path):
    os.environ["TORCH_FR_BUFFER_SIZE"] = "200"
    import torch
    import torch.distributed as dist

    world = WORLD[scenario]
    store = dist.FileStore(store_path, world)
    timeout = datetime.timedelta(seconds=TIMEOUT_S)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)

    def timed_out(e):
        print(f"rank {rank}: {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)
        store.set(f"timedout_{rank}", "1")
        dump(out, scenario, rank)

    def wait_for_others():
        """A rank still busy: it dumps once another rank has timed out (as the watchdog's
        dump-on-timeout makes every rank do), without entering the collective."""
        deadline = time.time() + 30
        while time.time() < deadline:
            if any(store.check([f"timedout_{r}"]) for r in range(world) if r != rank):
                break
            time.sleep(0.1)
        dump(out, scenario, rank)

    sub = None
    if scenario == "subgroup":
        a = dist.new_group([0, 1], timeout=timeout, group_desc="pairA")
        b = dist.new_group([2, 3], timeout=timeout, group_desc="pairB")
        sub = a if rank < 2 else b
    steps(dist, torch)
    t = torch.ones(4)
    try:
        if scenario == "healthy":
            dist.all_reduce(t)
            dist.barrier()
            dump(out, scenario, rank)
        elif scenario == "skip":
            if rank == 2:
                dist.barrier()  # skipped the all_reduce the others are in
            else:
                dist.all_reduce(t)
            dump(out, scenario, rank)
        elif scenario == "straggler":
            if rank == 1:
                wait_for_others()
            else:
                dist.all_reduce(t)
                dump(out, scenario, rank)
        elif scenario == "dead":
            if rank == 1:
                os._exit(1)  # no dump: killed, out of memory
            dist.all_reduce(t)
            dump(out, scenario, rank)
        elif scenario == "mismatch":
            # Same bytes, other dtype: gloo cannot tell, the sum is garbage and nothing hangs.
            dist.all_reduce(torch.ones(4, dtype=torch.int32 if rank == 1 else torch.float32))
            dump(out, scenario, rank)
        elif scenario == "subgroup":
            if rank == 3:
                wait_for_others()
            else:
                dist.all_reduce(t, group=sub)
                dist.all_reduce(t)
                dump(out, scenario, rank)
    except Exception as e:  # the collective timed out or a peer left: what the watchdog sees
        timed_out(e)
    sys.stdout.flush()
    os._exit(0)  # skip torch's teardown, which can hang with a peer gone


def run_scenario(scenario, out):
    world = WORLD[scenario]
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1", PYTHONWARNINGS="ignore")
        procs = [
            subprocess.Popen([sys.executable, __file__, "--rank", scenario, str(r), out, store], env=env)
            for r in range(world)
        ]
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    pickles = os.path.join(out, scenario, "pickle")
    prefix = "trace_"
    try:
        r = subprocess.run(
            [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", "-p", prefix, pickles],
            capture_output=True, text=True, timeout=120,
        )
        text = f"$ python -m torch.distributed.flight_recorder.fr_trace -p {prefix} {scenario}/pickle\n"
        tail = (r.stdout + r.stderr).strip().splitlines()
        text += "\n".join(line.replace(out, "OUT") for line in tail[-40:]) + f"\n(exit {r.returncode})\n"
    except subprocess.TimeoutExpired:
        text = "torch's analyzer did not finish in 120 s\n"
    with open(os.path.join(out, scenario, "fr_trace.txt"), "w") as f:
        f.write(text)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    out = os.path.abspath(sys.argv[1])
    for scenario in sys.argv[2:] or list(WORLD):
        run_scenario(scenario, out)
        print(f"{scenario}: written", flush=True)


if __name__ == "__main__":
    main()
