#!/usr/bin/env python3
"""check-layers.py — the include arrows between src/ folders against the declared layer order.

Contract: LAYERS below lists every folder of src/ from the bottom up (the
map docs/ARCHITECTURE.md draws). A file in folder A may include (`#include
"X/..."`, or a bare name found beside it) headers of A itself and of folders
listed BELOW A, never of one above: so no two folders include each other, in
a loop of any length. include/ (the public headers) sits under everything.
Also, inside each folder, the units (a .c file with the .h of the same name)
must not include each other in a circle. Prints each offending arrow with the
file and line, or a summary; exit 0 when all arrows point down, 1 otherwise,
2 when a folder of src/ is missing from LAYERS (or LAYERS names one that is
gone) — a new folder must be given its place. --graph prints the folder graph.
Also docs/ARCHITECTURE.md's map (the table rows that begin with a folder of
src/) must list the same folders as LAYERS, top down: exit 1 otherwise.
Run by `make test` (ctest: test_layers).
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")

# bottom first; one folder a layer or a service (docs/ARCHITECTURE.md)
LAYERS = [
    "util",        # buffers, errors, files, UTF-8, fp16: no knowledge of models
    "package",     # L1: GGUF, block formats, quantization
    "convert",     # L1: Hugging Face safetensors + tokenizer.json -> GGUF (edgellm pack)
    "backend",     # L3: the backend interface, the CPU and OpenCL backends and their kernels
    "sched",       # L4: device table, roofline placement, the speculative-decoding controller
    "memory",      # L5: capacity plan and admission, the session block layout, load strategies
    "runtime",     # L2: model, session, executor, batching, tokenizer, chat templates, sampler, grammar
    "structured",  # structured output a service offers: JSON Schema -> grammar, tool calls
    "deploy",      # L6: signed packages (manifest, verification library) and the A/B store
    "gate",        # L6: the proposal gate and its policy
    "route",       # L6: routing policy, router, cloud client, thermal, telemetry, audit (its log records gate events)
    "server",      # L6: HTTP transport, routes, OpenAI / llama-server API, streaming, slots, LoRA registry
    "fleet",       # L6: staged rollout over a simulated fleet of serve processes, its gates and log replay
    "cli",         # the edgellm command
]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    rel = os.path.relpath(path, SRC)
    return rel.split(os.sep)[0]


def target_folder(src_file, inc):
    """The src/ folder (or 'include') a quoted include names; None for anything else."""
    here = os.path.dirname(src_file)
    if os.path.exists(os.path.join(here, inc)):
        return folder_of(os.path.normpath(os.path.join(here, inc)))
    if os.path.exists(os.path.join(SRC, inc)):
        return inc.split("/")[0]
    if os.path.exists(os.path.join(ROOT, "include", inc)):
        return "include"
    return None


def sources():
    out = []
    for ext in ("c", "h", "cl"):
        out += glob.glob(os.path.join(SRC, "**", "*." + ext), recursive=True)
    return sorted(out)


def unit_of(path):
    return os.path.splitext(path)[0]


def unit_cycles(files):
    """Circles among units (x.c + x.h) of one folder, from their includes."""
    graph = {}
    for f in files:
        u = unit_of(f)
        for line in open(f, encoding="utf-8", errors="replace"):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            here = os.path.dirname(f)
            for cand in (os.path.join(here, m.group(1)), os.path.join(SRC, m.group(1))):
                if os.path.exists(cand):
                    v = unit_of(os.path.normpath(cand))
                    if v != u and os.path.dirname(v) == os.path.dirname(u) and os.path.exists(v + ".c"):
                        graph.setdefault(u, set()).add(v)
                    break
    cycles, state = [], {}

    def visit(u, stack):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                cycles.append(stack[stack.index(v):] + [v])
            elif not state.get(v):
                visit(v, stack)
        stack.pop()
        state[u] = 2

    for u in sorted(graph):
        if not state.get(u):
            visit(u, [])
    return cycles


def doc_order():
    """The folders of docs/ARCHITECTURE.md's map, in its order (top down)."""
    path = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
    if not os.path.isfile(path):
        return None
    return [m.group(1) for m in re.finditer(r"^\| `src/([a-z_]+)/` \|", open(path, encoding="utf-8").read(), re.M)]


def main(argv):
    present = sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))
    rank = {name: i for i, name in enumerate(LAYERS)}
    unknown = [d for d in present if d not in rank]
    gone = [d for d in LAYERS if d not in present]
    if unknown or gone:
        for d in unknown:
            print(f"src/{d}/ has no place in tools/check-layers.py LAYERS (nor in docs/ARCHITECTURE.md)")
        for d in gone:
            print(f"LAYERS names src/{d}/, which does not exist")
        return 2
    bad, arrows, graph = [], 0, {}
    files = sources()
    for f in files:
        a = folder_of(f)
        for no, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            b = target_folder(f, m.group(1))
            if b is None or b == a or b == "include":
                continue
            arrows += 1
            graph.setdefault(a, set()).add(b)
            if rank[b] > rank[a]:
                bad.append(f"{os.path.relpath(f, ROOT)}:{no}: {a} -> {b} (\"{m.group(1)}\"): "
                           f"{b} is above {a} in the layer order")
    by_folder = {}
    for f in files:
        if f.endswith((".c", ".h")):
            by_folder.setdefault(os.path.dirname(f), []).append(f)
    circles = []
    for d, fs in sorted(by_folder.items()):
        for c in unit_cycles(fs):
            circles.append(" -> ".join(os.path.relpath(u, ROOT) for u in c))
    if "--graph" in argv:
        for a in LAYERS:
            print(f"{a:11s} -> {', '.join(sorted(graph.get(a, ()), key=lambda x: -rank[x])) or '(nothing)'}")
    doc = doc_order()
    if doc != list(reversed(LAYERS)):
        bad.append(f"docs/ARCHITECTURE.md's map lists {doc}, not LAYERS top down {list(reversed(LAYERS))}")
    for b in bad:
        print(b)
    for c in circles:
        print(f"circle of units: {c}")
    print(f"{len(LAYERS)} layers, {len(files)} files, {arrows} include arrows between folders: "
          f"{len(bad)} pointing up, {len(circles)} circles of units inside a folder")
    return 1 if bad or circles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
