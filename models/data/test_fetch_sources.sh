#!/usr/bin/env bash
# fetch-sources.sh's manifest from sources.tsv's rules, on a fake asterisk
# voice (no download: the .deb is already there with the sha256 listed, and
# the package is already unpacked). The rows are sources.tsv's own for
# asterisk-core-sounds-en-wav, so this checks the real rules: the voice's
# recordings are speech, its silence/ is silence and not also speech, a text
# file is no recording. Then a file listed under two labels must stop the
# script (it would train on what judges it) and leave the last good manifest
# in place. Expected manifest written by hand.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pkg=asterisk-core-sounds-en-wav
voice=$work/dest/pkgs/$pkg/usr/share/asterisk/sounds/en_US_f_Allison
mkdir -p "$work/dest/debs" "$voice/silence" "$voice/digits"
for f in hello goodbye silence/1 silence/10 digits/1; do printf 'RIFF' >"$voice/$f.wav"; done
printf 'not audio' >"$voice/readme.txt"
touch "$work/dest/pkgs/$pkg/.unpacked"
printf 'fake deb' >"$work/dest/debs/${pkg}_1_all.deb"
printf '%s\t1\t%s\n' "$pkg" "$(sha256sum "$work/dest/debs/${pkg}_1_all.deb" | cut -d' ' -f1)" >"$work/packages.tsv"
grep "^$pkg	" "$here/sources.tsv" >"$work/sources.tsv"

PACKAGES_TSV=$work/packages.tsv SOURCES_TSV=$work/sources.tsv \
  bash "$here/fetch-sources.sh" "$work/dest" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }

d=pkgs/$pkg/usr/share/asterisk/sounds/en_US_f_Allison
cat >"$work/expected" <<EOF2
$d/digits/1.wav	speech	train	$pkg
$d/goodbye.wav	speech	train	$pkg
$d/hello.wav	speech	train	$pkg
$d/silence/1.wav	silence	train	$pkg
$d/silence/10.wav	silence	train	$pkg
EOF2
if ! diff -u "$work/expected" "$work/dest/manifest.tsv"; then
  echo "test_fetch_sources: the manifest differs from the expected one (above)" >&2
  exit 1
fi

# The same voice's files also as noise: refused, naming a file.
printf '%s\tnoise\ttrain\tusr/share/asterisk/sounds/*/hello.wav\t-\n' "$pkg" >>"$work/sources.tsv"
if PACKAGES_TSV=$work/packages.tsv SOURCES_TSV=$work/sources.tsv \
     bash "$here/fetch-sources.sh" "$work/dest" >"$work/log" 2>&1; then
  echo "test_fetch_sources: a file listed under two labels was accepted" >&2
  exit 1
fi
grep -q "listed twice in sources.tsv: $d/hello.wav" "$work/log" || { cat "$work/log"; exit 1; }
diff -u "$work/expected" "$work/dest/manifest.tsv" ||
  { echo "test_fetch_sources: the refused run replaced the last good manifest" >&2; exit 1; }
echo "test_fetch_sources: the manifest is the expected one, and a file under two labels is refused"
