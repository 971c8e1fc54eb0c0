#!/usr/bin/env bash
# Fetches the Debian packages of models/data/packages.tsv (apt-get download: no
# root needed, nothing installed), checks each .deb's sha256, unpacks it under
# DEST/pkgs/<package>, and writes DEST/manifest.tsv from models/data/sources.tsv:
# one line per audio file, "path<TAB>label<TAB>split<TAB>package", path relative
# to DEST, sorted, so that the same packages always give the same manifest.
# Usage: models/data/fetch-sources.sh [DEST]   (default build/real-audio)
# PACKAGES_TSV and SOURCES_TSV name other lists (test_fetch_sources.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
packages_tsv=${PACKAGES_TSV:-$here/packages.tsv}
sources_tsv=${SOURCES_TSV:-$here/sources.tsv}
dest=${1:-build/real-audio}
mkdir -p "$dest/debs" "$dest/pkgs"
dest=$(cd "$dest" && pwd)

# Recordings only: the packages also hold pictures, texts and tracker modules.
audio_ext='\.(wav|ogg|oga|opus|mp3|flac|wv)$'

fetch() {  # package version sha256
  local pkg=$1 ver=$2 sum=$3 deb
  deb=$(ls "$dest/debs/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
  if [[ -z $deb ]] || ! echo "$sum  $deb" | sha256sum --check --status; then
    rm -f "$dest/debs/${pkg}_"*.deb
    (cd "$dest/debs" && apt-get download -q "$pkg=$ver" >/dev/null 2>&1) || {
      echo "fetch-sources: apt-get download $pkg=$ver failed (is bookworm in the apt sources? run apt-get update)" >&2
      exit 1
    }
    deb=$(ls "$dest/debs/${pkg}_"*.deb)
    echo "$sum  $deb" | sha256sum --check --status || {
      echo "fetch-sources: $deb: sha256 differs from models/data/packages.tsv" >&2
      exit 1
    }
  fi
  if [[ ! -e $dest/pkgs/$pkg/.unpacked ]]; then
    rm -rf "$dest/pkgs/$pkg" && mkdir -p "$dest/pkgs/$pkg"
    dpkg-deb -x "$deb" "$dest/pkgs/$pkg" && touch "$dest/pkgs/$pkg/.unpacked"
  fi
}

while IFS=$'\t' read -r pkg ver sum; do
  [[ -z $pkg || $pkg == \#* ]] && continue
  fetch "$pkg" "$ver" "$sum"
done <"$packages_tsv"

manifest=$dest/manifest.tsv.tmp
: >"$manifest"
while IFS=$'\t' read -r pkg label split pattern exclude; do
  [[ -z $pkg || $pkg == \#* ]] && continue
  [[ -d $dest/pkgs/$pkg ]] || { echo "fetch-sources: sources.tsv names $pkg, which packages.tsv does not" >&2; exit 1; }
  [[ $exclude == - ]] && exclude='^$'
  (cd "$dest/pkgs/$pkg" && find usr -type f -path "$pattern" | grep -Ei "$audio_ext" | grep -Ev "$exclude" || true) |
    awk -v p="$pkg" -v l="$label" -v s="$split" '{printf "pkgs/%s/%s\t%s\t%s\t%s\n", p, $0, l, s, p}' >>"$manifest"
done <"$sources_tsv"
LC_ALL=C sort -u "$manifest" >"$manifest.sorted" && rm -f "$manifest"

# A file listed under two labels or in both splits would train on what judges it.
# Checked before the manifest goes into place: a refused one never replaces the last good one.
dups=$(cut -f1 "$manifest.sorted" | sort | uniq -d | head -n3)
[[ -z $dups ]] || { rm -f "$manifest.sorted"; echo "fetch-sources: listed twice in sources.tsv: $dups" >&2; exit 1; }
mv "$manifest.sorted" "$dest/manifest.tsv"
awk -F'\t' '{n[$2 "\t" $3]++} END {for (k in n) print "  " k "\t" n[k] " files"}' "$dest/manifest.tsv" | sort
echo "fetch-sources: $(wc -l <"$dest/manifest.tsv") files in $dest/manifest.tsv"
