#!/usr/bin/env python3
"""Rewrites real Flight Recorder dumps (dump version 2.10, as torch 2.9-2.11 write them for gloo)
into the shape of dump version 2.3, the oldest the reader takes, as ProcessGroupNCCL wrote it.

Version 2.3's writer (pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp, NCCLTraceBuffer::dump
and getCollectiveTrace, torch 2.5) writes: version, pg_config {name: {name, desc, ranks}},
pg_status {pg_id: {last_enqueued_collective, last_started_collective,
last_completed_collective}}, entries (record_id, pg_id, process_group, collective_seq_id,
p2p_seq_id, op_id, profiling_name, time_created_ns, duration_ms when timed, input_sizes,
input_dtypes, output_sizes, output_dtypes, state, time_discovered_started_ns,
time_discovered_completed_ns, retired, timeout_ms, is_p2p, frames) and nccl_comm_state when
NCCL gave one. Version 2.10 adds comm_lib_version and each entry's thread_name and thread_id.
So a 2.3 dump is a 2.10 dump without those, its version "2.3", and its operations named by the
NCCL backend ("nccl:all_reduce"). Pickles are written with protocol 2, as c10d's pickler does.

    python3 tests/tools/fr_downgrade.py SRC_SCENARIO_DIR DST_SCENARIO_DIR

SRC holds pickle/ and json/ as tests/tools/fr_scenarios.py writes them.
"""
import json
import os
import pickle
import sys

ADDED_AFTER_2_3 = ("comm_lib_version",)
ENTRY_ADDED_AFTER_2_3 = ("thread_name", "thread_id")


def downgrade(d):
    d = {k: v for k, v in d.items() if k not in ADDED_AFTER_2_3}
    d["version"] = "2.3"
    entries = []
    for e in d.get("entries", []):
        e = {k: v for k, v in e.items() if k not in ENTRY_ADDED_AFTER_2_3}
        name = e.get("profiling_name", "")
        if name.startswith("gloo:"):
            e["profiling_name"] = "nccl:" + name[len("gloo:"):]
        entries.append(e)
    d["entries"] = entries
    return d


def main():
    src, dst = sys.argv[1], sys.argv[2]
    for form in ("pickle", "json"):
        os.makedirs(os.path.join(dst, form), exist_ok=True)
        for name in sorted(os.listdir(os.path.join(src, form))):
            with open(os.path.join(src, form, name), "rb") as f:
                raw = f.read()
            if form == "pickle":
                out = pickle.dumps(downgrade(pickle.loads(raw)), protocol=2)
            else:
                out = json.dumps(downgrade(json.loads(raw)), sort_keys=True).encode()
            with open(os.path.join(dst, form, name), "wb") as f:
                f.write(out)


if __name__ == "__main__":
    main()
