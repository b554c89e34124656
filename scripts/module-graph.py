#!/usr/bin/env python3
"""Module graph of both crates, read from the code's own paths (production code only).

    python3 scripts/module-graph.py [REPO] [--verbose]

For the checks crate (`checks/src`) and the binary crate (`src`) it reads every production
file (test files and `#[cfg(test)]` modules left out), resolves each path it names
(`crate::a::b`, `super::x`, `self::x`, `use` trees, and the binary's `preflight_checks::a::b`)
to the module file it lands in, and checks two rules:

1. Layers: the top-level modules of each crate are in LAYERS below, lowest first; a module
   may name modules of its own layer or lower ones, never a higher one (an upward import).
2. No cycles inside folders: at every folder, the graph between its child modules (a -> b when
   a file under a names something under b) has no cycle. A parent naming its own children,
   or a child naming its parent, is structure, not an edge between siblings.

Prints the top-level graph, then every upward edge and cycle with the files that make it;
exit 1 when there is any.
"""
import os
import re
import sys

# Lowest first. Modules on one line share a layer (they may name each other, as long as the
# sibling graph stays acyclic).
LAYERS = {
    "checks/src": [
        "infra",
        "core",
        "net",
        "nccl ports firewall gpu",
        "env rdma",
        "sys",
        "rendezvous link collective",
        "launch healthy_set history",
        "collect registry explain testkit",
        "lib",
    ],
    "src": [
        "cleanup shell output slurmd",
        "transport measure advise history",
        "placement launchline",
        "report_compact",
        "report recipe",
        "runtime",
        "cli config argv",
        "render",
        "commands",
        "app",
        "lib main",
    ],
}

USE_RE = re.compile(r"\buse\s+((?:crate|super|self|preflight_checks)\b[^;]*);", re.S)
PATH_RE = re.compile(r"\b((?:crate|super|self|preflight_checks)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")


def production_text(text):
    """The text without `#[cfg(test)]` items (an inline module or a declaration)."""
    text = re.sub(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([a-z]+\))?\s+)?mod\s+\w+\s*;", "", text)
    cut = text.find("#[cfg(test)]")
    return text if cut < 0 else text[:cut]


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases and globs dropped)."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, t):
        depth, parts, cur = 0, [], ""
        for ch in t:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        for p in parts:
            if not p:
                continue
            i = p.find("{")
            if i >= 0 and p.endswith("}"):
                walk(prefix + p[: i].rstrip(":"), p[i + 1 : -1])
            else:
                p = p.split("as")[0] if "as" in p.split("::")[-1] else p
                out.append((prefix + "::" + p if prefix else p).rstrip(":*").rstrip(":"))

    walk("", tree)
    return out


class Crate:
    def __init__(self, repo, rel):
        self.rel = rel
        self.root = os.path.join(repo, rel)
        self.files = {}  # module path tuple -> file path
        self.test_only = set()
        entry = "lib.rs"
        self.scan(os.path.join(self.root, entry), (), False)
        if rel == "src" and os.path.exists(os.path.join(self.root, "main.rs")):
            self.files[("main",)] = os.path.join(self.root, "main.rs")

    def scan(self, path, modpath, test):
        if not os.path.exists(path):
            return
        self.files[modpath] = path
        if test:
            self.test_only.add(modpath)
        text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
        here = os.path.dirname(path)
        base = os.path.basename(path)
        if base in ("mod.rs", "lib.rs", "main.rs"):
            child_dir = here
        else:
            child_dir = os.path.join(here, base[:-3])
        for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)\s*;", text):
            attrs, name = m.group(1), m.group(2)
            is_test = test or "cfg(test)" in attrs
            pm = re.search(r'#\[path\s*=\s*"([^"]+)"\]', attrs)
            if pm:
                child = os.path.join(child_dir, pm.group(1))
            elif os.path.exists(os.path.join(child_dir, name + ".rs")):
                child = os.path.join(child_dir, name + ".rs")
            else:
                child = os.path.join(child_dir, name, "mod.rs")
            self.scan(child, modpath + (name,), is_test)
        # Inline modules (`mod x { ... }`) stay part of their file.

    def resolve(self, segments, modpath):
        """Absolute module path of the longest module prefix `segments` names, from `modpath`."""
        if not segments:
            return None
        head, rest = segments[0], list(segments[1:])
        if head == "crate":
            base = ()
        elif head == "self":
            base = modpath
        elif head == "super":
            base = modpath[:-1]
            while rest and rest[0] == "super":
                base = base[:-1]
                rest = rest[1:]
        else:
            return None
        path = base + tuple(rest)
        while path and path not in self.files:
            path = path[:-1]
        return path if path else None


def references(crate, modpath, text, other=None):
    """(crate, module path) named by the production text of the file at `modpath`."""
    found = []
    paths = []
    for m in USE_RE.finditer(text):
        paths += expand_use(m.group(1))
    text_wo_use = USE_RE.sub("", text)
    paths += [m.group(1) for m in PATH_RE.finditer(text_wo_use)]
    for p in paths:
        segs = [s for s in p.split("::") if s]
        if not segs:
            continue
        if segs[0] == "preflight_checks":
            if other is not None:
                r = other.resolve(["crate"] + segs[1:], ())
                if r:
                    found.append((other, r))
            continue
        r = crate.resolve(segs, modpath)
        if r is not None:
            found.append((crate, r))
    return found


def layer_of(crate_rel, top):
    for i, line in enumerate(LAYERS[crate_rel]):
        if top in line.split():
            return i
    return None


def sccs(nodes, edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    verbose = "--verbose" in sys.argv
    repo = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    checks = Crate(repo, "checks/src")
    binary = Crate(repo, "src")
    problems = []
    for crate, other in ((checks, None), (binary, checks)):
        # file-level edges
        edges = {}  # modpath -> {modpath: [file]}
        top_edges = {}
        for modpath, path in crate.files.items():
            if modpath in crate.test_only:
                continue
            name = os.path.basename(path)
            if name == "tests.rs" or name.endswith("_tests.rs"):
                continue
            text = production_text(strip_comments(open(path, encoding="utf-8", errors="replace").read()))
            for target_crate, target in references(crate, modpath, text, other):
                if target_crate is not crate or target in crate.test_only:
                    continue
                edges.setdefault(modpath, {}).setdefault(target, set()).add(os.path.relpath(path, repo))
        # 1. layers of the top-level modules
        for a, targets in edges.items():
            top_a = a[0] if a else "lib"
            for b, files in targets.items():
                top_b = b[0] if b else "lib"
                if top_a == top_b:
                    continue
                top_edges.setdefault(top_a, set()).add(top_b)
                la, lb = layer_of(crate.rel, top_a), layer_of(crate.rel, top_b)
                if la is None or lb is None:
                    missing = top_a if la is None else top_b
                    problems.append(f"{crate.rel}: module {missing} is in no layer of scripts/module-graph.py")
                elif lb > la:
                    problems.append(f"{crate.rel}: upward import {top_a} -> {top_b} ({', '.join(sorted(files)[:3])})")
        # 2. sibling cycles at every folder
        folders = {m[:-1] for m in crate.files if m} | {()}
        for folder in sorted(folders):
            children = {m[len(folder)] for m in crate.files if len(m) > len(folder) and m[: len(folder)] == folder}
            sib = {}
            why = {}
            for a, targets in edges.items():
                if len(a) <= len(folder) or a[: len(folder)] != folder:
                    continue
                for b, files in targets.items():
                    if len(b) <= len(folder) or b[: len(folder)] != folder:
                        continue
                    ca, cb = a[len(folder)], b[len(folder)]
                    if ca != cb:
                        sib.setdefault(ca, set()).add(cb)
                        why.setdefault((ca, cb), set()).update(files)
            for comp in sccs(children, sib):
                prefix = "::".join(folder) or "crate"
                links = [f"{x}->{y} ({sorted(why[(x, y)])[0]})" for x in comp for y in comp if (x, y) in why]
                problems.append(f"{crate.rel}: cycle in {prefix}: {' <-> '.join(comp)}: {'; '.join(links[:6])}")
        print(f"{crate.rel}: {len(crate.files)} modules, {sum(len(t) for t in edges.values())} file edges")
        if verbose:
            for m in sorted(top_edges):
                print(f"  {m:16} -> {', '.join(sorted(top_edges[m]))}")
    for p in problems:
        print(p)
    print("no upward import and no cycle" if not problems else f"{len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
