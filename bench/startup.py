#!/usr/bin/env python3
"""Start-up of `corepool batch` on 1 s of audio, phase by phase, with and
without the plan cache (worker/plan_cache.h).

Each run's stderr (info log) is timestamped as it arrives: "libtorch up" is
the first log line (exec, the allocator re-exec, loading LibTorch), "planned"
the engine plan line (load, optimize, calibrate: or read the cached plan),
"done" the summary line (fork or threads, warm-up, the 1 s file), "exit" the
process's end. Cold runs pass --replan (the plan measured as on a first
start); warm runs reuse what the cold ones kept. Prints medians of --runs.

    python3 bench/startup.py --corepool build/supervisor/corepool \
        --model build/models/cnn10 --runs 5
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed_run(cmd, env):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    marks = {}
    for line in p.stderr:
        now = time.monotonic() - t0
        marks.setdefault("libtorch up", now)
        if "engine plan:" in line:
            marks["planned"] = now
        if "file(s) done" in line:
            marks["done"] = now
    p.wait()
    marks["exit"] = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}")
    return marks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corepool", default="build/supervisor/corepool")
    ap.add_argument("--gen-audio", default="build/tools/corepool-gen-audio")
    ap.add_argument("--model", default="build/models/cnn10")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wav = os.path.join(tmp, "one.wav")
        subprocess.run([a.gen_audio, "--sections", "noise:1", "--out", wav], check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ)
        cache = os.path.join(tmp, "plans")
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
        print(f"# {cpu}, {os.cpu_count()} cpus, model {a.model}, 1 s of audio, medians of {a.runs} runs (s)")
        print("| mode | plan | libtorch up | planned | done | exit |")
        print("| --- | --- | --- | --- | --- | --- |")
        for mode in ("thread", "process"):
            for kind, extra in (("measured (--replan)", ["--replan"]), ("cached", [])):
                runs = []
                for _ in range(a.runs):
                    cmd = [a.corepool, "--log-level", "info", "batch", "--model", a.model, "--mode", mode,
                           "--plan-cache", cache, "--force", "--no-progress", "--out", os.path.join(tmp, "out")]
                    runs.append(timed_run(cmd + extra + [wav], env))
                cells = [f"{statistics.median(r[k] for r in runs):.2f}" for k in ("libtorch up", "planned", "done", "exit")]
                print(f"| {mode} | {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
