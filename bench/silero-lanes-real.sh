#!/bin/bash
# What lanes cost Silero VAD in accuracy on long real recordings, and give in
# speed: corepool-lanes-bench (one exact stream against the lanes) on two long
# files made by joining real recordings from the Debian packages that
# models/data/fetch-sources.sh unpacked, for several lane and warm-up lengths.
# Prints figures; passes or fails on nothing.
#   [KEEP=DIR] [LANES="30:5 60:20"] bash bench/silero-lanes-real.sh REAL_AUDIO [BUILD]
# The files (16 kHz mono WAV, in a temporary directory):
#   asterisk.wav  150 English prompts of asterisk-core-sounds-en-wav with three
#                 music-on-hold tracks in the middle (22 minutes);
#   games.wav     60 spoken letters (klettres), 60 effects (colobot), 8 music
#                 tracks (naev), 60 exclamations (ktuberling), 40 lines
#                 (freedroidrpg), shuffled (74 minutes); games.wav.parts
#                 lists them in order with their lengths.
# Chosen by sorted path and a fixed seed, so every run joins the same files.
# KEEP=DIR writes them (and the lists) to DIR and leaves them there
# (bench/silero_lane_study.py reads them).
set -euo pipefail
REAL=${1:?usage: bash bench/silero-lanes-real.sh REAL_AUDIO [BUILD]}
BUILD=${2:-build}
MODEL=$BUILD/models/silero-vad
[ -f "$MODEL/model.pt" ] || { echo "silero-lanes-real: $MODEL/model.pt not found (see models/README.md)" >&2; exit 1; }
[ -d "$REAL/pkgs" ] || { echo "silero-lanes-real: $REAL/pkgs not found (models/data/fetch-sources.sh $REAL)" >&2; exit 1; }
if [ -n "${KEEP:-}" ]; then
  WORK=$KEEP && mkdir -p "$WORK"
else
  WORK=$(mktemp -d) && trap 'rm -rf "$WORK"' EXIT
fi
P=$REAL/pkgs

# pick N SEED: N of the sorted paths on stdin, the same N for the same seed.
pick() { sort | shuf -n "$1" --random-source=<(yes "$2"); }
# join LIST OUT: each file of LIST decoded to 16 kHz mono, one after the other;
# OUT.parts lists each file and its decoded length in samples, in order.
join_files() {
  local i=0 part
  : >"$2.parts"
  while read -r f; do
    part=$WORK/part-$(printf %04d $i).raw
    ffmpeg -loglevel error -nostdin -i "$f" -ac 1 -ar 16000 -f s16le "$part"
    printf '%s\t%d\n' "$f" $(($(stat -c %s "$part") / 2)) >>"$2.parts"
    i=$((i + 1))
  done <"$1"
  cat "$WORK"/part-*.raw >"$WORK/joined.raw" && rm -f "$WORK"/part-*.raw
  ffmpeg -loglevel error -nostdin -f s16le -ar 16000 -ac 1 -i "$WORK/joined.raw" "$2" && rm -f "$WORK/joined.raw"
}

find "$P/asterisk-core-sounds-en-wav" -name '*.wav' | pick 150 1 >"$WORK/en.txt"
{ head -75 "$WORK/en.txt"; find "$P/asterisk-moh-opsound-wav" -name '*.wav' | sort | head -3; tail -75 "$WORK/en.txt"; } \
  >"$WORK/asterisk.txt"
{
  find "$P/klettres-data" -name '*.ogg' | pick 60 1
  find "$P/colobot-common-sounds" -type f \( -name '*.wav' -o -name '*.ogg' \) | pick 60 2
  find "$P" -path '*naev*' -name '*.ogg' | pick 8 3
  find "$P/ktuberling-data" \( -name '*.ogg' -o -name '*.wav' \) | pick 60 4
  find "$P/freedroidrpg-data" -name '*.ogg' | pick 40 5
} | pick 1000 6 >"$WORK/games.txt"
join_files "$WORK/asterisk.txt" "$WORK/asterisk.wav"
join_files "$WORK/games.txt" "$WORK/games.wav"

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cpus), commit $(git rev-parse --short HEAD)," \
     "$(date -u +%H:%M) UTC"
# LANES: "lane_seconds:warmup_seconds" pairs; 30:5 (the model.toml's lanes
# before its split turned them off) first.
for lw in ${LANES:-30:5 30:10 30:20 60:20 60:30 120:30}; do
  "$BUILD/bench/corepool-lanes-bench" --model "$MODEL" --workers "$(nproc)" \
    --lane-seconds "${lw%%:*}" --warmup-seconds "${lw##*:}" "$WORK/asterisk.wav" "$WORK/games.wav"
done
