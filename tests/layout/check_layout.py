#!/usr/bin/env python3
"""The house rules that a folder listing cannot show, checked on the source tree.

  check_layout.py ROOT cycles   no include cycle between folders: the graph of
                                "a file in folder A includes a header of folder
                                B" has no cycle (a room depends downward only)
  check_layout.py ROOT lengths  no source file of the rooms over 400 lines
  check_layout.py ROOT readme   README.md's folder table names every top-level
                                folder and every room of supervisor/ and
                                worker/, and nothing that does not exist

Each failure names the files that make it, so the fix is obvious.
"""
import os
import re
import sys

ROOMS = ("supervisor", "worker", "audio", "shm", "config")
CODE = (".h", ".cc")
MAX_LINES = 400
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def source_files(root, tops):
    for top in tops:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith(CODE):
                    yield os.path.relpath(os.path.join(folder, name), root)


def include_graph(root):
    """{folder: {included folder: [(file, line no, header)]}} over our own headers."""
    graph = {}
    for path in source_files(root, ROOMS + ("tools", "models", "bench")):
        here = os.path.dirname(path)
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m or not os.path.exists(os.path.join(root, m.group(1))):
                    continue  # generated (protoc) or not ours
                there = os.path.dirname(m.group(1))
                if there != here:
                    graph.setdefault(here, {}).setdefault(there, []).append((path, number, m.group(1)))
    return graph


def find_cycle(graph):
    """One cycle as a list of folders [a, b, ..., a], or None."""
    state = {}  # folder -> 1 on the stack, 2 done
    stack = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def check_cycles(root):
    graph = include_graph(root)
    cycle = find_cycle(graph)
    if not cycle:
        print(f"no include cycle between {len(graph)} folders")
        return 0
    print("include cycle between folders: " + " -> ".join(cycle))
    for a, b in zip(cycle, cycle[1:]):
        path, number, header = graph[a][b][0]
        print(f"  {a} -> {b}: {path}:{number} includes {header} ({len(graph[a][b])} include(s) in all)")
    return 1


def check_lengths(root):
    long_files = []
    for path in source_files(root, ROOMS):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_LINES:
            long_files.append((lines, path))
    for lines, path in sorted(long_files, reverse=True):
        print(f"{path}: {lines} lines (at most {MAX_LINES}: split it by concern)")
    if not long_files:
        print(f"every source file of {', '.join(ROOMS)} has at most {MAX_LINES} lines")
    return 1 if long_files else 0


TABLE_ROW = re.compile(r"^\| `([A-Za-z0-9_./-]+/)` \|")
NESTED = ("supervisor", "worker")  # their sub-folders are rooms of their own


def tree_folders(root):
    """The folders the table must name: top-level ones and the rooms of NESTED."""
    found = set()
    for name in os.listdir(root):
        if name.startswith(".") or name.startswith("build") or not os.path.isdir(os.path.join(root, name)):
            continue
        found.add(name + "/")
        if name in NESTED:
            for sub in os.listdir(os.path.join(root, name)):
                if os.path.isdir(os.path.join(root, name, sub)):
                    found.add(f"{name}/{sub}/")
    return found


def check_readme(root):
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        named = {m.group(1) for m in map(TABLE_ROW.match, f) if m}
    folders = tree_folders(root)
    missing = sorted(folders - named)
    stale = sorted(f for f in named if not os.path.isdir(os.path.join(root, f)))
    for folder in missing:
        print(f"README.md's folder table does not name {folder}")
    for folder in stale:
        print(f"README.md's folder table names {folder}, which does not exist")
    if not missing and not stale:
        print(f"README.md's folder table names all {len(folders)} folders")
    return 1 if missing or stale else 0


CHECKS = {"cycles": check_cycles, "lengths": check_lengths, "readme": check_readme}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in CHECKS:
        print(__doc__)
        return 2
    return CHECKS[sys.argv[2]](sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
