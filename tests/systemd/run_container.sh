#!/usr/bin/env bash
# make test-systemd: the .deb under a real systemd. A bookworm root (cached by
# make_root.sh), the package installed with apt-get, systemd booted with
# systemd-nspawn (own loopback only), then steps a-h of issue 17 driven from
# inside through nsenter. Each step prints PASS/FAIL with its name; every wait
# has a deadline; the container is always torn down. Run as root.
# Usage: run_container.sh BUILD_DIR
set -uo pipefail
build=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
deb=$(ls "$build"/corepool_*_amd64.deb 2>/dev/null | tail -1)
[[ -n "$deb" ]] || { echo "FAIL  setup: no $build/corepool_*_amd64.deb (make deb)"; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "FAIL  setup: needs root (debootstrap, systemd-nspawn, nsenter)"; exit 1; }
work=$build/systemd-run
root=$work/root
failed=()
ns_pid="" leader=""

teardown() {
  # nspawn turns SIGTERM into a clean halt of the container's systemd.
  if [[ -n "$ns_pid" ]] && kill -0 "$ns_pid" 2>/dev/null; then
    kill -TERM "$ns_pid"
    for _ in $(seq 60); do kill -0 "$ns_pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$ns_pid" 2>/dev/null && kill -KILL "$ns_pid"
    wait "$ns_pid" 2>/dev/null
  fi
  rm -rf "$root"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# --- the root: cached base + this .deb ---------------------------------------
rm -rf "$work" && mkdir -p "$work/share" "$build/systemd-apt-cache/partial"
bash "$here/make_root.sh" "$build/systemd-root.tar" || { echo "FAIL  setup: no container root"; exit 1; }
mkdir -p "$root" && tar -C "$root" -xf "$build/systemd-root.tar"
# Test-only files (the shipped /etc/corepool/corepool.toml stays as it is):
# process mode with 2 workers (steps d-f look for workers), a heartbeat
# deadline above step f's pause, and a 5 s watchdog instead of 30 s (step d).
cp "$here/ci.toml" "$root/etc/corepool-ci.toml"
mkdir -p "$root/etc/systemd/system/corepool.service.d"
cp "$here/ci-dropin.conf" "$root/etc/systemd/system/corepool.service.d/ci.conf"
"$build/tools/corepool-gen-audio" --out "$work/share/short.wav" --sections tone:2 >/dev/null &&
  "$build/tools/corepool-gen-audio" --out "$work/share/long.wav" --sections noise:20,tone:20 >/dev/null ||
  { echo "FAIL  setup: corepool-gen-audio"; exit 1; }
mkdir -p "$root/srv/ci" && cp "$work/share/"*.wav "$root/srv/ci/"
cp "$deb" "$root/srv/"
t0=$(date +%s)
# Not booted yet: the postinst creates the user and skips daemon-reload.
if ! systemd-nspawn -q -D "$root" --register=no --keep-unit --bind="$build/systemd-apt-cache:/var/cache/apt/archives" \
     sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q /srv/$(basename "$deb") &&
            useradd -M -G corepool ci-member && useradd -M ci-other" >"$work/install.log" 2>&1; then
  tail -20 "$work/install.log"
  echo "FAIL  install: apt-get install ./$(basename "$deb") in bookworm (log: $work/install.log)"
  exit 1
fi
echo "PASS  install: $(basename "$deb") and $(grep -c '^Unpacking' "$work/install.log") packages from Debian in $(( $(date +%s) - t0 )) s"

# --- boot ----------------------------------------------------------------------
# The host is not systemd and mounts cgroup v1 (+ v2 "unified"); this makes
# nspawn give the container a pure cgroup v2 tree (no controllers: the host
# binds them to v1), which is what the service's cgroup checks below read.
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 systemd-nspawn -q -D "$root" --register=no --keep-unit --private-network \
  --boot </dev/null >"$work/console.log" 2>&1 &
ns_pid=$!
for _ in $(seq 100); do
  # The container's PID 1 once it is systemd (before that, nspawn's own child).
  for p in $(ps -o pid= --ppid "$ns_pid"); do
    grep -qE '^NSpid:.*\s1$' "/proc/$p/status" 2>/dev/null && [[ "$(cat "/proc/$p/comm")" == systemd ]] && leader=$p
  done
  [[ -n "$leader" ]] && break
  sleep 0.2
done
[[ -n "$leader" ]] || { echo "FAIL  boot: no container PID 1 (log: $work/console.log)"; exit 1; }

# A command inside the container (every namespace of its PID 1, its root).
ct() { nsenter -t "$leader" -m -u -i -n -p -C -r -w env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
# Until PID 1 has its private bus socket, systemctl fails at once: retry that
# until it reports a state, 90 s in all.
state="" deadline=$(( SECONDS + 90 ))
while (( SECONDS < deadline )); do
  state=$(ct timeout 90 systemctl is-system-running --wait 2>&1)
  [[ "$state" =~ ^(running|degraded|maintenance|stopping)$ ]] && break
  sleep 0.2
done
if [[ "$state" != running ]]; then
  ct systemctl --failed --no-pager
  echo "FAIL  boot: system is '$state' (log: $work/console.log)"
  exit 1
fi
echo "PASS  boot: systemd $(ct systemctl --version | awk 'NR==1 {print $2}') running, cgroup $(ct stat -fc %T /sys/fs/cgroup)"

source "$here/steps.sh"

run_step() {
  local name=$1 out
  out=$("step_$name" 2>&1)
  local rc=$?
  [[ -n "$out" ]] && sed 's/^/      /' <<<"$out"
  if [[ $rc -eq 0 ]]; then echo "PASS  $name"; else echo "FAIL  $name"; failed+=("$name"); fi
}
for s in a_socket_activation b_start_waits_for_ready c_reload_under_load d_watchdog_restart \
         e_sigkill_restart f_stop_drains_inflight g_sandbox h_journal_priorities i_shipped_config; do
  run_step "$s"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test-systemd: FAILED steps: ${failed[*]} (logs in $work)"
  ct journalctl -u corepool --no-pager -n 40 >"$work/journal-tail.log" 2>&1
  exit 1
fi
echo "test-systemd: all steps passed"
