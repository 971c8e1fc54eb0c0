#!/usr/bin/python3
"""How many concurrent real-time streams `corepool serve` sustains on this
machine (the WebSocket endpoint, /v2/models/NAME/audio/stream), in thread and
process mode, and the time from a segment's last sample to its event.

For each stream count N, N clients (asyncio, Debian's python3-websockets, in
this one process on the same machine: their cost is part of the figure) each
stream the demo (corepool-gen-audio --demo, 16 kHz mono s16le) at real time
in 0.1 s messages, offsets staggered over the first second, then {"end": true}.
An event whose audio ends at E seconds closes when the server has the next
hop's segment, so its latency is counted from the moment the client sent the
last sample of the segment that closes it (E + hop): latency = received -
(start + E + hop), lag includes the 0.1 s message granularity. A count is
sustained when every stream got all its events, none was closed early (1008:
queue full) or dropped frames, and the p99 latency stays under --p99-bound.

Usage: stream_bench.py --corepool BIN --gen-audio BIN --model DIR
         [--modes thread,process] [--counts 1,4,16,...] [--seconds 20]
"""
import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import wave

import websockets

HOP = 0.5
PIECE_S = 0.1  # --piece-s
READ_TIMEOUT_S = 120  # after the end is sent: the summary and close must come by then


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def start_server(args, mode, workdir):
    config = os.path.join(workdir, "bench-%s.toml" % mode)
    with open(config, "w") as f:
        f.write("[serve]\nmax_streams = 10000\nstream_idle_s = 60\n")
    log_path = config + ".log"
    log = open(log_path, "w")
    proc = subprocess.Popen([args.corepool, "--log-level", "info", "--config", config, "serve", "--mode", mode,
                             "--listen", "127.0.0.1:0", "--grpc-listen", "", "--model", args.model],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with open(log_path) as f:
            m = re.search(r"on http://127\.0\.0\.1:(\d+) \((\w+) mode, (\d+) workers\)", f.read())
        if m:
            return proc, int(m.group(1)), int(m.group(3))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise SystemExit("serve did not start:\n" + open(log_path).read())


async def one_stream(url, pcm, rate, delay, result):
    await asyncio.sleep(delay)
    piece = int(rate * PIECE_S) * 2
    latencies, events, summary = [], [], None
    async with websockets.connect(url, max_size=2 ** 20) as ws:
        t0 = time.monotonic()

        async def receive():
            nonlocal summary
            async for message in ws:
                item = json.loads(message)
                if "summary" in item:
                    summary = item["summary"]
                    continue
                events.append(item)
                closing_sample_sent = t0 + min(item["end"] + HOP, len(pcm) / 2 / rate)
                latencies.append(time.monotonic() - closing_sample_sent)

        reader = asyncio.ensure_future(receive())
        for i, at in enumerate(range(0, len(pcm), piece)):
            # A piece leaves once its last sample exists in real time (t0 + its end),
            # against the clock, not sleep by sleep: a late wake-up is caught up.
            ahead = t0 + (i + 1) * PIECE_S - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
            await ws.send(pcm[at:at + piece])
        end_sent = time.monotonic()
        await ws.send(json.dumps({"end": True}))
        await asyncio.wait_for(reader, READ_TIMEOUT_S)
        result.append({"latencies": latencies, "events": len(events), "summary": summary,
                       "code": ws.close_code, "reason": ws.close_reason,
                       "tail": time.monotonic() - end_sent,
                       "send_late": end_sent - (t0 + (len(pcm) / 2 / rate))})


async def run_count(port, n, pcm, rate):
    url = "ws://127.0.0.1:%d/v2/models/default/audio/stream?sample_rate=%d&channels=1&format=s16le" % (port, rate)
    results = []
    outcomes = await asyncio.gather(*(one_stream(url, pcm, rate, i / max(1, n), results) for i in range(n)),
                                    return_exceptions=True)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    if failed:
        print("  %d of %d streams failed, e.g. %r" % (len(failed), n, failed[0]), flush=True)
    return results, len(failed)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--corepool", required=True)
    p.add_argument("--gen-audio", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--modes", default="thread,process")
    p.add_argument("--counts", default="1,4,16,32,64,128")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--p99-bound", type=float, default=1.0, help="seconds")
    p.add_argument("--piece-s", type=float, default=0.1, help="seconds of audio per message")
    args = p.parse_args()
    global PIECE_S
    PIECE_S = args.piece_s
    work = tempfile.mkdtemp(prefix="corepool-stream-bench-")
    wav = os.path.join(work, "demo.wav")
    subprocess.run([args.gen_audio, "--demo", "--out", wav], check=True, stdout=subprocess.DEVNULL)
    with wave.open(wav) as w:
        rate = w.getframerate()
        pcm = w.readframes(int(args.seconds * rate))
    print("stream_bench: %.0f s of the demo per stream at real time (%d Hz mono s16le), %.1f s messages; "
          "sustained = all events, no early close or drop, p99 latency < %.2f s" % (
              len(pcm) / 2 / rate, rate, PIECE_S, args.p99_bound))
    print("load average before: %s" % open("/proc/loadavg").read().split(" ", 3)[:3])
    print("| mode | workers | streams | events | p50 latency s | p99 latency s | max latency s | "
          "max tail s | max send lag s | sustained |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in args.modes.split(","):
        proc, port, workers = start_server(args, mode, work)
        try:
            for n in (int(c) for c in args.counts.split(",")):
                results, failed = asyncio.run(run_count(port, n, pcm, rate))
                lat = [x for r in results for x in r["latencies"]] or [float("nan")]
                want = min([r["events"] for r in results] or [0])
                ok = (failed == 0 and all(r["code"] == 1000 and r["summary"] and r["summary"]["dropped"] == 0 for r in results)
                      and len(set(r["events"] for r in results)) == 1 and want > 0
                      and percentile(lat, 99) < args.p99_bound
                      and max([r["send_late"] for r in results] or [1]) < 0.5)  # else the client fell behind real time
                print("| %s | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %s |" % (
                    mode, workers, n, sum(r["events"] for r in results), percentile(lat, 50), percentile(lat, 99),
                    max(lat), max([r["tail"] for r in results] or [float("nan")]),
                    max([r["send_late"] for r in results] or [float("nan")]), "yes" if ok else "NO"), flush=True)
                if not ok:
                    break
        finally:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
