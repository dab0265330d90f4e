#!/usr/bin/env python3
"""Rewrite KNOWN / KNOWN_LOCAL / KNOWN_CYCLES in <checkout>/tests/unit/test_imports.py from that tree
(the debts as they are now). Use it only after reading what test_imports.py lists: a new edge should
be fixed, not recorded. `python3 docs/floorplan/known.py <checkout>`"""
import re, sys
from pathlib import Path
repo = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(repo / "tests/unit"))
import test_imports as t  # noqa: E402

def up():
    out = set()
    for a, b, _, _ in t.internal():
        other = (a.count(".") > 1 and b.count(".") > 1 and a.startswith("rlaunch.backends.") and b.startswith("rlaunch.backends.")
                 and a.split(".")[2] != b.split(".")[2] and "base" not in (a.split(".")[2], b.split(".")[2]))
        if t.layer(b) > t.layer(a) or other:
            out.add((a, b))
    return sorted(out)

def local():
    return sorted({(a, b) for a, b, _, f in t.imports() if f and (b.split(".")[0] == "rlaunch" or (
        b.split(".")[0] not in t.HEAVY and b.split(".")[0] not in t.STDLIB_OK))})

def cycles():
    graph = {}
    for a, b, _, _ in t.internal():
        graph.setdefault(a, set()).add(b)
    sys.setrecursionlimit(10000)
    index, low, stack, on, comps = {}, {}, [], set(), []
    def visit(v):
        index[v] = low[v] = len(index); stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop(); on.discard(w); c.append(w)
                if w == v:
                    break
            if len(c) > 1:
                comps.append(tuple(sorted(c)))
    for v in list(graph):
        if v not in index:
            visit(v)
    return sorted(comps)

def fmt(items):
    return "{\n" + "".join(f"    {i!r},\n" for i in items) + "}"

p = repo / "tests/unit/test_imports.py"
s = p.read_text()
for name, items in (("KNOWN", up()), ("KNOWN_LOCAL", local()), ("KNOWN_CYCLES", cycles())):
    s, n = re.subn(rf"^({name}: set\[[^\n]*\]\] = )(?:set\(\)|\{{\n.*?^\}})", lambda m: m.group(1) + fmt(items), s,
                   count=1, flags=re.S | re.M)
    assert n == 1, name
    print(f"{name}: {len(items)}")
p.write_text(s)
