#!/usr/bin/env python3
"""An independent second opinion for tests/unit/eval_test.cc: sed_eval's
segment- and event-based metrics (TUT-ARG/sed_eval, sed_eval/sound_event.py,
SegmentBasedMetrics and EventBasedMetrics with event_matching_type='optimal'),
re-implemented in plain Python (no numpy, no sed_eval: no pip here) after the
structure of sed_eval's own code, on this folder's reference/ and results/.

    python3 sed_eval_reference.py > sed_eval_reference.out.json
    python3 sed_eval_reference.py --check   # ctest eval.SedEvalReferenceOutputIsCurrent

The output is committed beside it; the C++ test compares corepool eval's JSON
with it. Rates here divide without sed_eval's eps (1/eps would only show up
where a denominator is 0, and this case has none).
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TIME_RESOLUTION = 1.0
T_COLLAR = 0.2
PERCENTAGE_OF_LENGTH = 0.2


def load_reference():
    """{file key: [(onset, offset, label)]}, read the way the test's lists are written."""
    lists = {}
    # a.wav.txt: onset, offset, label (no filename column)
    with open(os.path.join(HERE, "reference", "a.wav.txt")) as f:
        lists["a"] = [(float(a), float(b), c) for a, b, c in (l.rstrip("\n").split("\t") for l in f if l.strip())]
    # b.tsv: a header, then filename, onset, offset, label
    with open(os.path.join(HERE, "reference", "b.tsv")) as f:
        rows = [l.rstrip("\n").split("\t") for l in f if l.strip()][1:]
        lists["b"] = [(float(r[1]), float(r[2]), r[3]) for r in rows]
    return lists


def load_results():
    lists = {}
    with open(os.path.join(HERE, "results", "a.wav.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
        lists["a"] = [(l["start"], l["end"], l["label"]) for l in lines if "summary" not in l]
    with open(os.path.join(HERE, "results", "b.wav.tsv")) as f:
        rows = [l.rstrip("\n").split("\t") for l in f if l.strip()][1:]
        lists["b"] = [(float(r[1]), float(r[2]), r[3]) for r in rows]
    return lists


def event_roll(events, labels):
    # sed_eval.util.event_roll.event_list_to_event_roll
    length = int(math.ceil(max([e[1] for e in events] + [0]) / TIME_RESOLUTION))
    roll = [[0] * len(labels) for _ in range(length)]
    for onset, offset, label in events:
        for k in range(int(math.floor(onset / TIME_RESOLUTION)), int(math.ceil(offset / TIME_RESOLUTION))):
            roll[k][labels.index(label)] = 1
    return roll


def segment_based(pairs, labels):
    overall = dict(Ntp=0, Nref=0, Nsys=0, S=0, D=0, I=0)
    cw = {l: dict(Ntp=0, Nfp=0, Nfn=0, Nref=0, Nsys=0) for l in labels}
    for ref, est in pairs:
        r, s = event_roll(ref, labels), event_roll(est, labels)
        n = max(len(r), len(s))  # match_event_roll_lengths: pad with zeros
        r += [[0] * len(labels) for _ in range(n - len(r))]
        s += [[0] * len(labels) for _ in range(n - len(s))]
        for k in range(n):
            ntp = sum(1 for c in range(len(labels)) if r[k][c] + s[k][c] > 1)
            nref, nsys = sum(r[k]), sum(s[k])
            overall["Ntp"] += ntp
            overall["Nref"] += nref
            overall["Nsys"] += nsys
            overall["S"] += min(nref, nsys) - ntp
            overall["D"] += max(0, nref - nsys)
            overall["I"] += max(0, nsys - nref)
        for c, label in enumerate(labels):
            col_r = [row[c] for row in r]
            col_s = [row[c] for row in s]
            cw[label]["Ntp"] += sum(1 for a, b in zip(col_r, col_s) if a + b > 1)
            cw[label]["Nfp"] += sum(1 for a, b in zip(col_r, col_s) if b - a > 0)
            cw[label]["Nfn"] += sum(1 for a, b in zip(col_r, col_s) if a - b > 0)
            cw[label]["Nref"] += sum(col_r)
            cw[label]["Nsys"] += sum(col_s)
    return overall, cw


def validate_onset(ref, est):
    return math.fabs(ref[0] - est[0]) <= T_COLLAR


def validate_offset(ref, est):
    return math.fabs(ref[1] - est[1]) <= max(T_COLLAR, PERCENTAGE_OF_LENGTH * (ref[1] - ref[0]))


def bipartite_match(graph):
    """Maximum matching, {v: u}, by simple augmenting paths (sed_eval uses Hopcroft-Karp)."""
    matching = {}

    def augment(u, seen):
        for v in graph[u]:
            if v in seen:
                continue
            seen.add(v)
            if v not in matching or augment(matching[v], seen):
                matching[v] = u
                return True
        return False

    for u in graph:
        augment(u, set())
    return matching


def event_based(pairs, labels):
    overall = dict(Nref=0, Nsys=0, Ntp=0, Nsubs=0, Nfp=0, Nfn=0)
    cw = {l: dict(Nref=0, Nsys=0, Ntp=0, Nfp=0, Nfn=0) for l in labels}
    for ref, est in pairs:
        graph = {}
        for j, r in enumerate(ref):
            for i, e in enumerate(est):
                if r[2] == e[2] and validate_onset(r, e) and validate_offset(r, e):
                    graph.setdefault(i, []).append(j)
        matching = bipartite_match(graph)  # {ref j: est i}
        ref_correct = set(matching.keys())
        sys_correct = set(matching.values())
        ntp = len(matching)
        nsubs = 0
        sys_counted = set()
        for j in [j for j in range(len(ref)) if j not in ref_correct]:
            for i in [i for i in range(len(est)) if i not in sys_correct]:
                if i not in sys_counted and validate_onset(ref[j], est[i]) and validate_offset(ref[j], est[i]):
                    sys_counted.add(i)
                    nsubs += 1
                    break
        overall["Nref"] += len(ref)
        overall["Nsys"] += len(est)
        overall["Ntp"] += ntp
        overall["Nsubs"] += nsubs
        overall["Nfp"] += len(est) - ntp - nsubs
        overall["Nfn"] += len(ref) - ntp - nsubs
        for label in labels:
            nref = sum(1 for r in ref if r[2] == label)
            nsys = sum(1 for e in est if e[2] == label)
            ntp = sum(1 for j, i in matching.items() if ref[j][2] == label)
            cw[label]["Nref"] += nref
            cw[label]["Nsys"] += nsys
            cw[label]["Ntp"] += ntp
            cw[label]["Nfp"] += nsys - ntp
            cw[label]["Nfn"] += nref - ntp
    return overall, cw


def rates(ntp, nref, nsys, s, d, i):
    p, r = ntp / nsys, ntp / nref
    return {"f_measure": 2 * p * r / (p + r) if p + r else 0.0, "precision": p, "recall": r,
            "error_rate": (s + d + i) / nref}


def main():
    reference, results = load_reference(), load_results()
    labels = sorted({e[2] for k in reference for e in reference[k] + results[k]})
    pairs = [(reference[k], results[k]) for k in sorted(reference)]
    seg_overall, seg_cw = segment_based(pairs, labels)
    ev_overall, ev_cw = event_based(pairs, labels)
    out = {
        "segment_based": {
            "overall": rates(seg_overall["Ntp"], seg_overall["Nref"], seg_overall["Nsys"], seg_overall["S"],
                             seg_overall["D"], seg_overall["I"]),
            "class_wise": {l: rates(c["Ntp"], c["Nref"], c["Nsys"], 0, c["Nfn"], c["Nfp"]) for l, c in seg_cw.items()},
        },
        "event_based": {
            "overall": rates(ev_overall["Ntp"], ev_overall["Nref"], ev_overall["Nsys"], ev_overall["Nsubs"],
                             ev_overall["Nfn"], ev_overall["Nfp"]),
            "class_wise": {l: rates(c["Ntp"], c["Nref"], c["Nsys"], 0, c["Nfn"], c["Nfp"]) for l, c in ev_cw.items()},
        },
    }
    text = json.dumps(out, indent=1, sort_keys=True) + "\n"
    if sys.argv[1:] == ["--check"]:
        committed = os.path.join(HERE, "sed_eval_reference.out.json")
        if open(committed).read() != text:
            sys.exit(f"{committed} is not this script's output: regenerate it (see the docstring)")
        print("sed_eval_reference.out.json is current")
        return
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
