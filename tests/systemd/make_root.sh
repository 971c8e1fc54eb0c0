#!/usr/bin/env bash
# make test-systemd's container root: a bookworm minbase (debootstrap) with
# systemd as PID 1, dbus and curl, apt pointed at the Debian mirrors this
# host's apt uses (read from apt at run time, never written down here).
# Cached as one tarball (OUT) under build/: only the first run pays (~2 min).
# Usage: make_root.sh OUT.tar
set -euo pipefail
out=$1
if [[ -s "$out" ]]; then
  echo "make_root: cached $out"
  exit 0
fi

# apt's own view of its sources: "URI RELEASE" for every Debian bookworm suite.
sources=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' |
          awk '$2 ~ /^bookworm(-updates|-security)?$/' | sort -u)
mirror=$(awk '$2 == "bookworm" { print $1; exit }' <<<"$sources")
if [[ -z "$mirror" ]]; then
  echo "make_root: FAIL: apt has no bookworm source (apt-get indextargets)" >&2
  exit 1
fi

tmp=$(mktemp -d "$(dirname "$out")/systemd-root.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "make_root: debootstrap bookworm from $mirror"
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl \
  bookworm "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
  { tail -20 "$tmp/debootstrap.log" >&2; echo "make_root: FAIL: debootstrap" >&2; exit 1; }
# The same suites as the host (updates and security included): the .deb was
# linked against the host's libraries, whose versions dpkg-shlibdeps records.
awk '{ print "deb " $1 " " $2 " main" }' <<<"$sources" >"$tmp/root/etc/apt/sources.list"
# A fixed hostname for readable console logs.
echo corepool-ci >"$tmp/root/etc/hostname"
tar -C "$tmp/root" -cf "$tmp/root.tar" .
mv "$tmp/root.tar" "$out"
echo "make_root: wrote $out ($(du -h "$out" | cut -f1))"
