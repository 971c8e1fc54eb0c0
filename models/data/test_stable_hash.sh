#!/usr/bin/env bash
# Checks that judge.py's stable_hash (which picks the trainer's real validation
# files for `judge.py --split validation`) is the trainer's: compiles the very
# function text of models/train/real_clips.cc and compares both hashes on every
# path of DEST/manifest.tsv (or, without DEST, on a few fixed strings).
# Usage: models/data/test_stable_hash.sh [DEST]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo '#include <cstdint>'
  echo '#include <iostream>'
  echo '#include <string>'
  sed -n '/^uint64_t stable_hash(const std::string& s) {$/,/^}$/p' "$here/../train/real_clips.cc"
  echo 'int main() { std::string line; while (std::getline(std::cin, line)) std::cout << stable_hash(line) << "\n"; }'
} >"$tmp/hash.cc"
grep -q 'stable_hash' "$tmp/hash.cc" && grep -q '^}$' "$tmp/hash.cc" || { echo "test_stable_hash: stable_hash not found in real_clips.cc" >&2; exit 1; }
${CXX:-c++} -O1 -o "$tmp/hash" "$tmp/hash.cc"
if [[ $# -ge 1 ]]; then cut -f1 "$1/manifest.tsv" >"$tmp/paths"; else printf '%s\n' '' a pkgs/x/usr/share/a.wav 'é' >"$tmp/paths"; fi
"$tmp/hash" <"$tmp/paths" >"$tmp/cc"
python3 -c '
import importlib.util, sys
spec = importlib.util.spec_from_file_location("judge", sys.argv[1])
judge = importlib.util.module_from_spec(spec); spec.loader.exec_module(judge)
for line in open(sys.argv[2], encoding="utf-8"):
    print(judge.stable_hash(line.rstrip("\n")))' "$here/judge.py" "$tmp/paths" >"$tmp/py"
if ! cmp -s "$tmp/cc" "$tmp/py"; then
  echo "test_stable_hash: judge.py and real_clips.cc differ:" >&2
  diff "$tmp/cc" "$tmp/py" | head >&2
  exit 1
fi
n=$(wc -l <"$tmp/paths")
v=$(python3 -c 'import sys; print(sum(int(x) % 10 == 0 for x in open(sys.argv[1])))' "$tmp/py")  # awk's doubles would round
echo "test_stable_hash: the same hash for all $n paths ($v of them 0 modulo 10)"
