#!/usr/bin/env python3
"""Runs the documentation's examples as printed (ctest docs.ExamplesRunAsPrinted).

Every ```sh block in README.md and docs/*.md whose fence has the line
`<!-- runnable -->` directly above it is run with `bash -euo pipefail` in a
fresh temporary directory, with the build's programs first in PATH
(BUILD/supervisor: corepool; BUILD/tools: corepool-gen-audio; BUILD/models:
corepool-gen-model). The temporary directory gets `models/default`, a link to
the source tree's bundled model, so that `corepool` without --model finds it
there as it does when run from the source root. A block that fails is named
by file:line with its output; every block is tried, then the run fails.

Usage: run_examples.py BUILD_DIR [FILE.md ...]   (default: README.md docs/*.md)
"""
import os
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = "<!-- runnable -->"
BLOCK_TIMEOUT_S = 120


def runnable_blocks(path):
    """(line of the fence, script) for every marked ```sh block of path."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARK:
            fence = i + 1
            if fence >= len(lines) or lines[fence].strip() != "```sh":
                raise SystemExit(f"{path}:{i + 1}: {MARK} must be directly above a ```sh fence")
            end = fence + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end == len(lines):
                raise SystemExit(f"{path}:{fence + 1}: the ```sh block never closes")
            blocks.append((fence + 1, "\n".join(lines[fence + 1:end]) + "\n"))
            i = end
        i += 1
    return blocks


def run_block(build, script):
    """(exit code, output, seconds) of one block in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="corepool-doc-") as work:
        os.makedirs(os.path.join(work, "models"))
        os.symlink(os.path.join(SOURCE, "models", "default"), os.path.join(work, "models", "default"))
        env = dict(os.environ)
        tools = [os.path.join(build, d) for d in ("supervisor", "tools", "models")]
        env["PATH"] = os.pathsep.join(tools + [env.get("PATH", "/usr/bin:/bin")])
        start = time.monotonic()
        # Its own session, so that a timeout also ends the servers a block started.
        child = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            output, _ = child.communicate(timeout=BLOCK_TIMEOUT_S)
            code = child.returncode
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)
            output, _ = child.communicate()
            code = f"timeout after {BLOCK_TIMEOUT_S} s"
        try:
            os.killpg(child.pid, 9)  # whatever the block left running in the background
        except ProcessLookupError:
            pass
        return code, output.decode(errors="replace"), time.monotonic() - start


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    build = os.path.abspath(sys.argv[1])
    if not os.access(os.path.join(build, "supervisor", "corepool"), os.X_OK):
        raise SystemExit(f"{build}/supervisor/corepool: not built")
    files = sys.argv[2:] or [os.path.join(SOURCE, "README.md")] + sorted(
        os.path.join(SOURCE, "docs", f) for f in os.listdir(os.path.join(SOURCE, "docs"))
        if f.endswith(".md"))
    failed = []
    count = 0
    for path in files:
        name = os.path.relpath(path, SOURCE)
        if name.startswith(".."):
            name = path
        for line, script in runnable_blocks(path):
            count += 1
            code, output, seconds = run_block(build, script)
            print(f"{name}:{line}: {'ok' if code == 0 else 'FAILED'} ({seconds:.1f} s)", flush=True)
            if code != 0:
                failed.append((name, line, code, output))
    for name, line, code, output in failed:
        print(f"\n{name}:{line}: the block exited {code}; its output:\n{output}", end="")
    print(f"\n{count - len(failed)} of {count} runnable blocks ran as printed")
    if count == 0:
        raise SystemExit("no block is marked " + MARK)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
