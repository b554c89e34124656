#!/usr/bin/env python3
"""Regenerates the error-message inventory of `preflight explain --log` from the sources.

Reads every WARN(...) format (and the WARNs that check macros such as SYSCHECK expand to,
with the call's name filled in) and ncclGetErrorString's texts from NVIDIA/nccl's src/ at a
spread of tags; gloo's enforce, throw and IO error messages; every CUDA runtime error string
(cudaGetErrorString and cudaGetErrorName for every code, through the CUDA runtime library)
and the driver's CUDA_ERROR_* names (cuda.h); the exceptions raised in torch.distributed's
rendezvous and elastic rendezvous Python code and the checks and throws of c10d's headers (an
installed torch); c10d's .cpp files (read by hand, one c10d-FILE.tsv each, or a pytorch
checkout); and
strerror for every errno. Each format is mapped by rules.py to a signature of the scanner (and
so to finding ids), to the job itself, or left unmapped with a reason.

Writes checks/src/explain/log/sources/inventory.tsv (every format, one row each),
checks/src/explain/log/generated_signatures.rs (the patterns and the coverage table the scanner and
`preflight explain --coverage` use) and docs/src/explain-coverage.md.

    python3 scripts/explain-sources/extract.py \
        --nccl /path/to/nccl.git --gloo /path/to/gloo.git \
        --torch "$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')" \
        --cuda-lib .../nvidia/cu13/lib/libcudart.so.13 --cuda-include .../nvidia/cu13/include

The git directories are bare clones (`git clone --bare https://github.com/NVIDIA/nccl`).
"""
import argparse
import ast
import ctypes
import errno as errno_mod
import os
import re
import subprocess
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cparse  # noqa: E402
import rules  # noqa: E402

NCCL_TAGS = [
    "v2.4.8-1", "v2.7.8-1", "v2.10.3-1", "v2.12.12-1", "v2.18.3-1",
    "v2.21.5-1", "v2.24.3-1", "v2.27.7-1", "v2.28.9-1", "v2.29.7-1",
]
# The gloo commits torch pins, found by date in the gloo history (torch's third_party/gloo is a
# submodule pointer no file holds): the last commit before the release branch cut of torch 1.13
# (2022-09-29), 2.0 (2023-02-14), 2.4 (2024-06-10); for 2.11 the installed binary holds
# GLOO_LOG_LEVEL (a735743, 2025-10-21) and neither the thread names of b9cac96 (2026-01-13) nor
# allreduce_shm (5994546, 2026-01-08), so the last commit before 2026-01-08; and the newest.
GLOO_REVS = ["e6d509b5", "56b221c0", "c82c8b93", "3135b0b4", "HEAD"]
C_EXT = (".cc", ".cu", ".h", ".cpp", ".c", ".hpp", ".cuh")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git(gitdir, *args):
    return subprocess.run(
        ["git", "-C", gitdir, *args], check=True, capture_output=True
    ).stdout.decode("utf-8", "replace")


class Inventory:
    """Formats by (source, format), each with the versions and places it was read in."""

    def __init__(self):
        self.rows = OrderedDict()
        self.versions = OrderedDict()  # source -> versions read

    def read(self, source, version):
        self.versions.setdefault(source, [])
        if version not in self.versions[source]:
            self.versions[source].append(version)

    def add(self, source, version, where, kind, fmt):
        fmt = " ".join(fmt.split())
        if not fmt or not re.search(r"[A-Za-z]{3}", fmt):
            return
        key = (source, fmt)
        row = self.rows.setdefault(
            key, {"source": source, "format": fmt, "kind": kind, "versions": [], "where": where}
        )
        if version not in row["versions"]:
            row["versions"].append(version)
        row["where"] = where  # the newest version read last


def nccl(inv, gitdir, tags):
    for tag in tags:
        inv.read("nccl", tag)
        files = [f for f in git(gitdir, "ls-tree", "-r", "--name-only", tag, "src").split() if f.endswith(C_EXT)]
        texts = {f: cparse.strip_comments(git(gitdir, "show", f"{tag}:{f}")) for f in files}
        macros = {}
        for t in texts.values():
            macros.update(cparse.warn_macros(t))
        for f, t in texts.items():
            short = f[len("src/"):]
            for _, args, line in cparse.calls(t, ["WARN"]):
                fmt = cparse.printf_format(args[0]) if args else None
                if fmt and "%PARAM%" not in fmt:
                    inv.add("nccl", tag, f"{short}:{line}", "WARN", fmt)
            for name, args, line in cparse.calls(t, list(macros)):
                idx, body = macros[name]
                if idx < len(args):
                    lit = cparse.STR.fullmatch(args[idx].strip())
                    if lit:
                        inv.add("nccl", tag, f"{short}:{line}", f"WARN via {name}",
                                body.replace("%PARAM%", cparse.unescape(lit.group(1))))
            m = re.search(r"ncclGetErrorString\s*\(\s*ncclResult_t[^)]*\)\s*\{", t)
            if m:
                end = t.find("\n}", m.end())
                for lit in cparse.STR.findall(t[m.end():end]):
                    inv.add("nccl", tag, f"{short}:ncclGetErrorString", "error string", cparse.unescape(lit))


GLOO_CALLS = ["GLOO_ENFORCE", "GLOO_ENFORCE_EQ", "GLOO_ENFORCE_NE", "GLOO_ENFORCE_LE",
              "GLOO_ENFORCE_LT", "GLOO_ENFORCE_GE", "GLOO_ENFORCE_GT", "GLOO_THROW",
              "GLOO_THROW_IO_EXCEPTION", "GLOO_THROW_INVALID_OPERATION_EXCEPTION",
              "GLOO_ERROR_MSG", "GLOO_ERROR"]
GLOO_OPS = {"EQ": "==", "NE": "!=", "LE": "<=", "LT": "<", "GE": ">=", "GT": ">"}


def gloo(inv, gitdir, revs):
    for rev in revs:
        gloo_at(inv, gitdir, git(gitdir, "rev-parse", "--short=8", rev).strip())


def gloo_at(inv, gitdir, rev):
    inv.read("gloo", rev)
    files = [f for f in git(gitdir, "ls-tree", "-r", "--name-only", rev, "gloo").split()
             if f.endswith(C_EXT) and "/test" not in f and "benchmark" not in f]
    for f in files:
        t = cparse.strip_comments(git(gitdir, "show", f"{rev}:{f}"))
        for name, args, line in cparse.calls(t, GLOO_CALLS):
            if not args or (name.startswith("GLOO_ERROR") and f.endswith("logging.h")):
                continue
            fmt = gloo_message(name, args)
            if fmt:
                inv.add("gloo", rev, f"{f}:{line}", name, fmt)


def gloo_message(name, args):
    """The message of one gloo enforce or throw, its streamed values as %s."""
    if name == "GLOO_ENFORCE":
        cond = " ".join(args[0].split())
        rest = cparse.stream_format(args[1:]) if len(args) > 1 else None
        return f"[enforce fail at %s] {cond}. " + (rest or "")
    if name.startswith("GLOO_ENFORCE_"):
        if len(args) < 2:
            return None
        op = GLOO_OPS[name.rsplit("_", 1)[1]]
        a, b = " ".join(args[0].split()), " ".join(args[1].split())
        rest = cparse.stream_format(args[2:]) if len(args) > 2 else None
        return f"[enforce fail at %s] {a} {op} {b}. %s vs %s" + (f". {rest}" if rest else "")
    fmt = cparse.stream_format(args)
    return "[%s] " + fmt if fmt else None


def cuda(inv, lib, include):
    cudart = ctypes.CDLL(lib)
    cudart.cudaGetErrorString.restype = ctypes.c_char_p
    cudart.cudaGetErrorName.restype = ctypes.c_char_p
    ver = ctypes.c_int()
    if cudart.cudaRuntimeGetVersion(ctypes.byref(ver)) != 0 or ver.value == 0:
        # CUDA 11's runtime answers cudaErrorInsufficientDriver without a driver: take the
        # version its headers were released with.
        api = os.path.join(include or "", "cuda_runtime_api.h")
        m = re.search(r"#define CUDART_VERSION\s+(\d+)", open(api, encoding="utf-8").read()) if include else None
        if not m:
            sys.exit(f"{lib}: cudaRuntimeGetVersion failed; give its --cuda-include to read CUDART_VERSION")
        ver.value = int(m.group(1))
    v = f"runtime {ver.value // 1000}.{ver.value % 1000 // 10}"
    inv.read("cuda", v)
    for code in range(0, 1000):
        s = cudart.cudaGetErrorString(code).decode()
        if "unrecognized error code" in s:
            continue
        name = cudart.cudaGetErrorName(code).decode()
        inv.add("cuda", v, f"cudaGetErrorString({code}) {name}", "runtime error string", s)
        inv.add("cuda", v, f"cudaGetErrorName({code})", "runtime error name", name)
    if include:
        text = open(os.path.join(include, "cuda.h"), encoding="utf-8", errors="replace").read()
        m = re.search(r"typedef enum cudaError_enum \{(.*?)\}", text, re.S)
        for name, code in re.findall(r"(CUDA_ERROR_\w+)\s*=\s*(\d+)", m.group(1) if m else ""):
            inv.add("cuda", v, f"cuda.h CUresult {code}", "driver error name", name)


def py_format(node):
    """The message of a raise's first argument: str literals, f-strings (values as %s),
    concatenations and .format() calls."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "%s" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = py_format(node.left), py_format(node.right)
        if a is None and b is None:
            return None
        return (a or "%s") + (b or "%s")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        s = py_format(node.func.value)
        return cparse.fmt_to_printf(s) if s else None
    return None


def torch_python(inv, torch_dir, version):
    inv.read("torch-elastic", version)
    paths = []
    rdzv = os.path.join(torch_dir, "distributed", "elastic", "rendezvous")
    paths += [os.path.join(rdzv, f) for f in sorted(os.listdir(rdzv)) if f.endswith(".py")]
    paths.append(os.path.join(torch_dir, "distributed", "rendezvous.py"))
    for p in paths:
        tree = ast.parse(open(p, encoding="utf-8").read())
        rel = os.path.relpath(p, os.path.dirname(torch_dir))
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                fmt = py_format(node.exc.args[0])
                exc = node.exc.func.id if isinstance(node.exc.func, ast.Name) else getattr(node.exc.func, "attr", "?")
                if fmt:
                    inv.add("torch-elastic", version, f"{rel}:{node.lineno}", f"raise {exc}", f"{exc}: {fmt}")


C10D_CALLS = ["TORCH_CHECK", "TORCH_CHECK_WITH", "C10_THROW_ERROR", "C10D_THROW_ERROR",
              "C10D_CHECK_WITH", "TORCH_WARN", "TORCH_WARN_ONCE", "C10D_ERROR", "C10D_WARNING",
              "LOG", "TORCH_INTERNAL_ASSERT"]


def c10d_message(name, args):
    """The message of one c10d check or throw."""
    skip = {"TORCH_CHECK": 1, "TORCH_INTERNAL_ASSERT": 1, "TORCH_CHECK_WITH": 2,
            "C10_THROW_ERROR": 1, "C10D_THROW_ERROR": 1, "C10D_CHECK_WITH": 2}.get(name, 0)
    rest = args[skip:]
    if not rest:
        return None
    joined = ", ".join(rest)
    m = re.search(r"fmt::format\s*\(", joined)
    if m:
        inner, _ = cparse.call_args(joined, m.end() - 1)
        lit = cparse.printf_format(inner[0]) if inner else None
        return cparse.fmt_to_printf(lit) if lit else None
    if name in ("C10D_ERROR", "C10D_WARNING"):
        lit = cparse.printf_format(rest[0])
        return cparse.fmt_to_printf(lit) if lit else None
    m = re.search(r"c10::str\s*\(", joined)
    if m:
        inner, _ = cparse.call_args(joined, m.end() - 1)
        return cparse.stream_format(inner or [])
    return cparse.stream_format(rest)


def torch_cpp(inv, files, version, source="c10d"):
    inv.read(source, version)
    for path, rel in files:
        t = cparse.strip_comments(open(path, encoding="utf-8", errors="replace").read())
        for name, args, line in cparse.calls(t, C10D_CALLS):
            if name == "LOG":
                continue
            fmt = c10d_message(name, args)
            if fmt:
                inv.add(source, version, f"{rel}:{line}", name, fmt)


def c10d_hand_read(inv, tsv):
    """Messages read by hand from c10d files too large to fetch whole here (see the file)."""
    for line in open(tsv, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        version, where, kind, fmt = line.rstrip("\n").split("\t")
        # Each file was read at its own commit: the version names both.
        version = f"{version} {where.split()[0].rsplit('/', 1)[-1]}"
        inv.read("c10d", version)
        inv.add("c10d", version, where, kind, fmt)


def errnos(inv):
    inv.read("errno", "Linux strerror")
    for code in sorted(errno_mod.errorcode):
        inv.add("errno", "Linux strerror", f"{errno_mod.errorcode[code]} ({code})", "strerror", os.strerror(code))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nccl", required=True)
    ap.add_argument("--nccl-tags", default=",".join(NCCL_TAGS))
    ap.add_argument("--gloo", required=True)
    ap.add_argument("--torch", required=True, help="an installed torch package directory")
    ap.add_argument("--gloo-revs", default=",".join(GLOO_REVS))
    ap.add_argument("--cuda-lib", required=True, action="append",
                    help="libcudart.so (repeat it for each CUDA version)")
    ap.add_argument("--cuda-include", action="append", default=[],
                    help="the CUDA include directory holding cuda.h (repeatable: the n-th goes with the n-th --cuda-lib)")
    ap.add_argument("--pytorch", help="a pytorch checkout: its c10d .cpp files are read too")
    a = ap.parse_args()
    inv = Inventory()
    nccl(inv, a.nccl, a.nccl_tags.split(","))
    gloo(inv, a.gloo, a.gloo_revs.split(","))
    for i, lib in enumerate(a.cuda_lib):
        cuda(inv, lib, a.cuda_include[i] if i < len(a.cuda_include) else None)
    import importlib.metadata as md
    torch_version = "torch " + md.version("torch").split("+")[0]
    torch_python(inv, a.torch, torch_version)
    hdr = os.path.join(a.torch, "include", "torch", "csrc", "distributed", "c10d")
    torch_cpp(inv, [(os.path.join(hdr, f), f"c10d/{f}") for f in sorted(os.listdir(hdr)) if f.endswith((".hpp", ".h"))],
              torch_version + " headers")
    if a.pytorch:
        d = os.path.join(a.pytorch, "torch", "csrc", "distributed", "c10d")
        torch_cpp(inv, [(os.path.join(d, f), f"c10d/{f}") for f in sorted(os.listdir(d)) if f.endswith(".cpp")],
                  "pytorch checkout")
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        for tsv in sorted(f for f in os.listdir(here) if f.startswith("c10d-") and f.endswith(".tsv")):
            c10d_hand_read(inv, os.path.join(here, tsv))
    errnos(inv)
    rows = list(inv.rows.values())
    for r in rows:
        r["map"], r["group"], r["why"] = rules.classify(r["source"], r["format"])
    rules.write_outputs(ROOT, rows, inv.versions)


if __name__ == "__main__":
    main()
