#!/usr/bin/env python3
"""Judges a tagger on real recordings: the share of files whose dominant label
(the label whose events cover most of the file's time, as corepool batch wrote
them) is the file's label in DEST/manifest.tsv, per label and per package.

Usage: models/data/judge.py --corepool build/supervisor/corepool --model models/default
                            [--split held-out|validation|train] [--new-packages P,Q] [--work DIR] DEST
DEST is what models/data/fetch-sources.sh made. Runs `corepool batch` once on
every file of the split (--manifest, --root DEST) and reads its JSON Lines.

--split validation is the trainer's real validation: the train rows whose path
hashes to 0 modulo 10 (stable_hash in models/train/real_clips.cc, never
trained on), so that training recipes are compared on files they did not learn
and the held-out split is left for the one recipe kept. --new-packages names
packages just added to packages.tsv: their files are counted apart from the
others, so that two models are compared on the same older files."""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import warnings

with warnings.catch_warnings():  # deprecated in 3.11, there until 3.13; a C-fast RMS
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop


def stable_hash(path):
    """FNV-1a, 64 bits, over the path's bytes: models/train/real_clips.cc's
    stable_hash, which puts a train file in the trainer's validation when it is
    0 modulo 10 (models/data/test_stable_hash.sh checks the two agree)."""
    h = 1469598103934665603
    for byte in path.encode():
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def read_manifest(dest, split):
    rows = []
    with open(os.path.join(dest, "manifest.tsv")) as f:
        for line in f:
            path, label, file_split, package = line.rstrip("\n").split("\t")
            if split == "validation":
                if file_split == "train" and stable_hash(path) % 10 == 0:
                    rows.append((path, label, package))
            elif file_split == split:
                rows.append((path, label, package))
    return rows


def mostly_silent(path):
    """True if most of the file's segments (1 s every 0.5 s, as the tagger
    cuts it) are below -62 dBFS RMS, the tagger's silence: such a file's right
    dominant label is silence, whatever its sound is (two held-out music tracks
    end in a minute of digital silence). Decoded by the ffmpeg tool, not by
    corepool."""
    pcm = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", path, "-ac", "1", "-ar", "16000", "-f", "s16le",
                          "-"], capture_output=True).stdout
    rate, width = 16000, 2
    starts = range(0, max(len(pcm) - rate * width, 0) + 1, rate // 2 * width)
    quiet = sum(20 * math.log10(max(audioop.rms(pcm[at:at + rate * width], width), 1e-6) / 32768) < -62
                for at in starts)
    return quiet * 2 > len(starts)


def dominant_label(result_file):
    """The label covering most time in one result; None if no event at all."""
    cover = collections.Counter()
    if not os.path.exists(result_file):
        return "unreadable"
    with open(result_file) as f:
        for line in f:
            record = json.loads(line)
            if "label" in record:
                cover[record["label"]] += record["end"] - record["start"]
    return max(sorted(cover), key=lambda label: cover[label]) if cover else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corepool", default="build/supervisor/corepool")
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--split", default="held-out", choices=["held-out", "validation", "train"],
                    help="validation: the train rows the trainer keeps out as its real validation")
    ap.add_argument("--new-packages", default="",
                    help="comma-separated packages whose files are also totalled apart, as new")
    ap.add_argument("--work", help="where the results go (default DEST/judge-SPLIT)")
    ap.add_argument("--errors", type=int, default=0, help="print up to N wrong files per label")
    ap.add_argument("dest")
    args = ap.parse_args()

    rows = read_manifest(args.dest, args.split)
    new_packages = set(filter(None, args.new_packages.split(",")))
    if not rows:
        sys.exit(f"judge: no {args.split} files in {args.dest}/manifest.tsv")
    work = args.work or os.path.join(args.dest, "judge-" + args.split)
    os.makedirs(work, exist_ok=True)
    listing = os.path.join(work, "inputs.txt")
    with open(listing, "w") as f:
        f.writelines(os.path.join(args.dest, path) + "\n" for path, _, _ in rows)
    out = os.path.join(work, "results")
    # Exit 1 means some inputs failed (each named on stderr): they count as wrong.
    run = subprocess.run([args.corepool, "batch", "--model", args.model, "--force", "--no-progress", "--out", out,
                          "--manifest", listing, "--root", args.dest], stderr=subprocess.PIPE, text=True)
    if run.returncode not in (0, 1):
        sys.exit(f"judge: corepool batch exited {run.returncode}:\n{run.stderr[-2000:]}")
    for line in run.stderr.splitlines():
        if line.startswith("error:"):
            print(line)

    right = collections.Counter()
    total = collections.Counter()
    said = collections.defaultdict(collections.Counter)
    wrong = collections.defaultdict(list)
    for path, label, package in rows:
        if label != "silence" and mostly_silent(os.path.join(args.dest, path)):
            print(f"judge: {path} is mostly silence: its right label is silence")
            label = "silence"
        got = dominant_label(os.path.join(out, path + ".jsonl"))
        group = "(new packages)" if package in new_packages else "(older packages)"
        for key in (label, (label, package)) + (((label, group),) if new_packages else ()):
            total[key] += 1
            right[key] += got == label
        said[label][got or "nothing"] += 1
        if got != label:
            wrong[label].append((path, got))

    print(f"{'label':8} {'package':28} {'files':>6} {'right':>6}  share")
    for label in ("speech", "music", "noise", "silence"):
        if not total[label]:
            continue
        # Packages first, then the "(new packages)" / "(older packages)" totals.
        keys = [k for k in total if isinstance(k, tuple) and k[0] == label]
        for key in sorted(keys, key=lambda k: (k[1].startswith("("), k[1])):
            print(f"{label:8} {key[1]:28} {total[key]:6} {right[key]:6}  {right[key] / total[key]:.3f}")
        labels_said = ", ".join(f"{k} {v}" for k, v in said[label].most_common())
        print(f"{label:8} {'(all)':28} {total[label]:6} {right[label]:6}  {right[label] / total[label]:.3f}"
              f"   said: {labels_said}")
        for path, got in wrong[label][: args.errors]:
            print(f"    wrong: {path} -> {got}")


if __name__ == "__main__":
    main()
