#!/usr/bin/python3
"""Whether Silero VAD's lanes could be made exact or cheaper: three studies on
one long 16 kHz mono WAV, with Debian's python3-torch and the .jit itself (no
corepool code), each against the module run chunk by chunk from the start.

1. Warm-up from a fresh state: lanes starting every 5 s from a zero state (or,
   with --mean-from, from the mean state the module reaches on another file);
   after each warm-up length, how far the state and the probability are from
   the sequential run's.
2. Repair: lanes of L s with a W s warm-up, then each lane after the first
   re-run from the previous lane's end state until its probabilities agree
   with the lane's own within TOL for M chunks in a row (then the rest of the
   lane is kept); how far the result still is from the sequential run, and
   what the repair cost.
3. With --clips PARTS (the joined files in order, path and length in samples
   per line: silero-lanes-real.sh's games.wav.parts): chunks at or over 0.5 inside clips of a
   speech package (klettres, ktuberling, freedroidrpg) and inside the others,
   sequential against lanes.

Prints figures; passes or fails on nothing.
  /usr/bin/python3 bench/silero_lane_study.py --model build/models/silero-vad/model.pt \\
      [--mean-from OTHER.wav] [--clips games.wav.parts] games.wav
"""
import argparse
import wave

import numpy as np
import torch

CHUNK, CONTEXT, RATE = 512, 64, 16000


def chunks_of(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != RATE or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit(f"{path}: 16 kHz mono 16-bit WAV expected")
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
    n = len(pcm) // CHUNK
    x = torch.from_numpy(pcm[: n * CHUNK].copy()).view(n, CHUNK)
    context = torch.cat([torch.zeros(1, CONTEXT), x[:-1, -CONTEXT:]], 0)
    return torch.cat([context, x], 1)  # [n, 64 + 512]: what the inner network takes per chunk


def sequential(net, inp, start, stop, state):
    probs, states = [], []
    with torch.no_grad():
        for i in range(start, stop):
            p, state = net(inp[i : i + 1], state)
            probs.append(p.item())
            states.append(state[:, 0].clone())
    return np.array(probs), torch.stack(states), state


def seconds(s):
    return int(round(s * RATE / CHUNK))


def warmup_study(net, inp, exact_p, exact_s, start_state, name):
    n = len(exact_p)
    starts = [s for s in range(seconds(5), n, seconds(5)) if s + seconds(30) < n]
    marks = {seconds(t): t for t in (0.5, 1, 2, 5, 10, 20, 30)}
    state = start_state.unsqueeze(1).repeat(1, len(starts), 1).contiguous()
    print(f"warm-up from {name}, {len(starts)} lanes (one every 5 s)")
    # state: each lane's largest element difference, the median over lanes; prob: over lanes
    print(f"{'warm-up s':>10} {'state, median lane':>18} {'prob median':>12} {'p99':>8} {'max':>8} {'lanes >0.05':>12}")
    with torch.no_grad():
        for j in range(max(marks) + 1):
            idx = torch.tensor([s + j for s in starts])
            p, state = net(inp[idx], state)
            if j + 1 in marks:
                ds = (state.permute(1, 0, 2) - exact_s[idx]).abs().amax(dim=(1, 2)).numpy()
                dp = np.abs(p[:, 0].numpy() - exact_p[idx.numpy()])
                print(f"{marks[j + 1]:>10} {np.median(ds):>18.3g} {np.median(dp):>12.2e} "
                      f"{np.percentile(dp, 99):>8.3f} {dp.max():>8.3f} {(dp > 0.05).sum():>12}")


def lanes(net, inp, n, lane, warm):
    spans = [(max(0, k - warm), k, min(n, k + lane)) for k in range(0, n, lane)]
    probs, ends = np.zeros(n), []
    for w, k, e in spans:
        p, _, end = sequential(net, inp, w, e, torch.zeros(2, 1, 128))
        probs[k:e] = p[k - w :]
        ends.append(end)
    return spans, probs, ends


def repair(net, inp, spans, probs, ends, tol, agree):
    out, cost, unconverged, end = probs.copy(), 0, 0, ends[0]
    with torch.no_grad():
        for li in range(1, len(spans)):
            _, k, e = spans[li]
            state, run, c, converged = end, 0, k, False
            while c < e and not converged:
                p, state = net(inp[c : c + 1], state)
                cost += 1
                run = run + 1 if abs(p.item() - probs[c]) < tol else 0
                out[c] = p.item()
                c += 1
                converged = run >= agree
            end = ends[li] if converged else state
            unconverged += not converged
    return out, cost, unconverged


def clip_kinds(parts, n):
    """Per chunk: True inside a clip of a speech package (PARTS: path, samples per line)."""
    speech = np.zeros(n, bool)
    at = 0
    for line in open(parts):
        path, samples = line.rstrip("\n").split("\t")
        if any(k in path for k in ("klettres", "ktuberling", "freedroid")):
            speech[at // CHUNK : (at + int(samples)) // CHUNK] = True
        at += int(samples)
    return speech


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="build/models/silero-vad/model.pt")
    ap.add_argument("--mean-from", help="another WAV: also warm up from the mean state the module reaches on it")
    ap.add_argument("--clips", help="the joined files and their lengths in samples (speech package or not, by path)")
    ap.add_argument("--lanes", default="30:0,30:5", help="L:W pairs in seconds for the repair study")
    ap.add_argument("wav")
    a = ap.parse_args()
    torch.set_num_threads(1)
    net = torch.jit.load(a.model).eval()._model
    inp = chunks_of(a.wav)
    n = len(inp)
    exact_p, exact_s, _ = sequential(net, inp, 0, n, torch.zeros(2, 1, 128))
    print(f"{a.wav}: {n * CHUNK / RATE:.1f} s, {n} chunks")
    warmup_study(net, inp, exact_p, exact_s, torch.zeros(2, 128), "a zero state")
    if a.mean_from:
        other = chunks_of(a.mean_from)
        _, states, _ = sequential(net, other, 0, min(len(other), 5000), torch.zeros(2, 1, 128))
        warmup_study(net, inp, exact_p, exact_s, states[seconds(10) :].mean(0), f"the mean state on {a.mean_from}")
    speech = clip_kinds(a.clips, n) if a.clips else None
    for pair in a.lanes.split(","):
        lane_s, warm_s = (float(v) for v in pair.split(":"))
        spans, probs, ends = lanes(net, inp, n, seconds(lane_s), seconds(warm_s))
        d = np.abs(probs - exact_p)
        print(f"lanes of {lane_s:g} s, warm-up {warm_s:g} s: max|diff| {d.max():.3f}, chunks >0.01 {(d > 0.01).sum()}")
        if speech is not None:
            for name, p in (("sequential", exact_p), ("lanes", probs)):
                print(f"  {name:>10}: chunks >= 0.5 in speech clips {(p[speech] >= 0.5).sum()} of {speech.sum()}, "
                      f"in the others {(p[~speech] >= 0.5).sum()} of {(~speech).sum()}")
        for tol, agree in ((1e-3, seconds(1)), (1e-3, seconds(3)), (1e-4, seconds(1)), (1e-4, seconds(3))):
            out, cost, unconverged = repair(net, inp, spans, probs, ends, tol, agree)
            r = np.abs(out - exact_p)
            print(f"  repair until within {tol:g} for {agree * CHUNK / RATE:.1f} s: max|diff| {r.max():.3f}, "
                  f"chunks >0.01 {(r > 0.01).sum()}, re-run {100 * cost / n:.1f} % of the audio, "
                  f"lanes never agreeing {unconverged} of {len(spans) - 1}")


if __name__ == "__main__":
    main()
