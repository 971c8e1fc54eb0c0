#!/bin/bash
# Silero VAD through `corepool batch` (thread and process mode) on 10 minutes
# of audio as 1 file and as 200 files of 3 s, beside the Python baseline
# (bench/silero_python_bench.py: 64 files per call, one process per core), all
# in one run on this machine. Prints figures; passes or fails on nothing.
# The audio is the demo (espeak-ng speech, music, noise, silence) repeated.
#   [ROUNDS=N] [BASELINE=DIR] bash bench/silero-bench.sh [BUILD]   # needs build/models/silero-vad/model.pt, ffmpeg and
#                                                  # Debian's python3-torch (`make bench-silero` installs it)
set -euo pipefail
BUILD=${1:-build}
MODEL=$BUILD/models/silero-vad
[ -f "$MODEL/model.pt" ] || { echo "silero-bench: $MODEL/model.pt not found (see models/README.md)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/long" "$WORK/short"
"$BUILD/tools/corepool-gen-audio" --demo --out "$WORK/demo.wav" >/dev/null
ffmpeg -loglevel error -stream_loop 25 -i "$WORK/demo.wav" -t 600 -c:a pcm_s16le "$WORK/long/long.wav"
# 200 files of 3 s, cut from the long file at 3 s steps.
/usr/bin/python3 - "$WORK/long/long.wav" "$WORK/short" <<'PY'
import sys, wave
src, out = sys.argv[1], sys.argv[2]
with wave.open(src, "rb") as w:
    params, frames = w.getparams(), w.readframes(w.getnframes())
step = 3 * 16000 * 2
for i in range(200):
    with wave.open(f"{out}/s{i:03d}.wav", "wb") as o:
        o.setparams(params)
        o.writeframes(frames[i * step:(i + 1) * step])
PY
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cpus), commit $(git rev-parse --short HEAD)," \
     "$(date -u +%H:%M) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# The bare ceiling: one thread, a tight forward() loop of the inner network
# (bench/silero_ceiling.cc), as loaded / frozen / optimized, per batch size.
"$BUILD/bench/corepool-silero-ceiling" --model "$MODEL" --batches 16,32,64,128,256 --seconds 1.5 2>/dev/null
# The supervisor's side, without the model: opening and decoding the same
# audio as 1 file and as 200, one thread (the best of 3 passes).
for set in long short; do
  echo "$set: $("$BUILD/bench/corepool-decode-bench" --reps 3 "$WORK/$set"/*.wav | tail -n 1)"
done
# What a page fault costs here against mapping pages in one call: process
# mode's workers and the supervisor after fork() pay faults thread mode does not.
"$BUILD/bench/corepool-fault-bench" --reps 3
# ROUNDS (default 1) repeats corepool's four runs and the script's two, in
# turn, so that a machine shared with other work is seen by all of them alike.
# BASELINE=DIR (a copy of an older build's corepool and corepool-engine) runs
# that one too, in the same rounds: before and after in one run.
for round in $(seq "${ROUNDS:-1}"); do
  for bin in ${BASELINE:+"$BASELINE/corepool"} "$BUILD/supervisor/corepool"; do
    name=corepool
    [ "$bin" = "$BUILD/supervisor/corepool" ] || name="baseline"
    for mode in thread process; do
      # "short, stdout": the same 200 files with their events on standard output
      # (--out -), no result files: what the filesystem's file creation costs.
      # "chunkwise": --lane-seconds 30, the method chunk by chunk as before the
      # split ([stateful.split]), the long file in lanes of 30 s (an
      # approximation), for comparison in the same run.
      for run in long long-chunkwise short short-chunkwise short-stdout; do
        set=${run%%-*}
        out="$WORK/out-$mode-$set"
        [ "$run" = short-stdout ] && out=-
        lanes=()
        [ "${run#*-}" = chunkwise ] && lanes=(--lane-seconds 30)
        start=$(date +%s.%N)
        line=$("$bin" batch --model "$MODEL" --mode "$mode" --force --no-progress "${lanes[@]}" \
                 --out "$out" "$WORK/$set" 2>&1 >/dev/null | grep 'real time' | tail -n 1)
        end=$(date +%s.%N)
        echo "$name $mode, ${run/-/, }: ${line#*] } (process start to exit: $(awk "BEGIN{printf \"%.2f\", $end - $start}") s)"
      done
    done
  done
  for set in long short; do
    echo -n "$set: "
    /usr/bin/python3 "$(dirname "$0")/silero_python_bench.py" "$MODEL/model.pt" "$WORK/$set"/*.wav
  done
done
