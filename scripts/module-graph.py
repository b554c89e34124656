#!/usr/bin/env python3
"""Module graph of the binary crate, read from its own `crate::` paths (production code only).

    python3 scripts/module-graph.py [REPO]   prints each top-level module of src/ and the
                                            modules it names, then any cycle; exit 1 on a cycle.
"""
import os
import re
import sys

repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
root = os.path.join(repo, "src")
edges = {}
for d, _, files in os.walk(root):
    for f in files:
        if not f.endswith(".rs") or f == "tests.rs":
            continue
        path = os.path.join(d, f)
        top = os.path.relpath(path, root).split(os.sep)[0].removesuffix(".rs")
        if top in ("main", "lib"):
            continue
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"#\[cfg\(test\)\]\s*mod \w+;", "", text)
        cut = text.find("#[cfg(test)]")
        text = text if cut < 0 else text[:cut]
        for dep in set(re.findall(r"crate::([a-z_]+)", text)):
            if dep != top:
                edges.setdefault(top, set()).add(dep)
            edges.setdefault(dep, set())

for m in sorted(edges):
    print(f"{m:12} -> {', '.join(sorted(edges[m])) or '(nothing)'}")


def reaches(a, b, seen=None):
    seen = seen or set()
    for n in edges.get(a, ()):
        if n == b:
            return True
        if n not in seen:
            seen.add(n)
            if reaches(n, b, seen):
                return True
    return False


cycles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if reaches(b, a)})
for a, b in cycles:
    print(f"cycle: {a} <-> {b}")
print("no cycle" if not cycles else f"{len(cycles)} edges in cycles")
sys.exit(1 if cycles else 0)
