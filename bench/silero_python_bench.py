#!/usr/bin/python3
"""The Python baseline of bench/silero-bench.sh: Silero VAD as a Python user
batches it. One process per core (torch.set_num_threads(1) in each), each
takes every Nth group of 64 files and runs the TOP-LEVEL module on the
group's next 512-sample chunks, [64, 512] per call (shorter files padded with
zeros, the module keeping the 64 streams' state), until the group's longest
file ends. Prints audio seconds, wall seconds (from the pool's start; the
processes' import of torch and load of the .jit included, as the CLI's start
is in its own figure) and x real time. Needs Debian's python3-torch.

  /usr/bin/python3 bench/silero_python_bench.py JIT FILE.wav...
"""
import multiprocessing as mp
import os
import sys
import time
import wave

import numpy as np

GROUP = 64
CHUNK = 512


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            sys.exit(f"{path}: needs 16 kHz mono PCM16 WAV")
        data = w.readframes(w.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def run_groups(args):
    jit, groups = args
    import torch
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    model = torch.jit.load(jit)
    model.eval()
    chunks = 0
    with torch.inference_mode():
        for files in groups:
            audio = [read_wav(f) for f in files]
            longest = max(len(a) for a in audio)
            n = (longest + CHUNK - 1) // CHUNK
            batch = np.zeros((len(audio), n * CHUNK), dtype=np.float32)
            for i, a in enumerate(audio):
                batch[i, : len(a)] = a
            x = torch.from_numpy(batch)
            model.reset_states()
            for c in range(n):
                model(x[:, c * CHUNK : (c + 1) * CHUNK], 16000)
            chunks += n * len(audio)
    return chunks


def main():
    jit, files = sys.argv[1], sys.argv[2:]
    cores = len(os.sched_getaffinity(0))
    groups = [files[i : i + GROUP] for i in range(0, len(files), GROUP)]
    shares = [(jit, groups[p::cores]) for p in range(cores)]
    audio_seconds = sum(len(read_wav(f)) for f in files) / 16000.0
    start = time.monotonic()
    with mp.get_context("fork").Pool(cores) as pool:
        chunks = sum(pool.map(run_groups, shares))
    wall = time.monotonic() - start
    print(f"python: {len(files)} file(s), {audio_seconds:.1f} s of audio, {cores} process(es), "
          f"{chunks} chunks (items of calls), {wall:.2f} s, {audio_seconds / wall:.0f}x real time")


if __name__ == "__main__":
    main()
