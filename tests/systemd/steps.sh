# Steps a-h of make test-systemd (issue 17) and i (the shipped config),
# sourced by run_container.sh once the container runs (ct = a command inside
# it). Each step prints what it saw and returns nonzero naming the reason;
# `MEASURED` lines are the figures that systemd/README.md reports. Every wait
# has a deadline (wait_for). Pipes into grep use -c, not -q: under pipefail,
# -q's early exit fails the writer (SIGPIPE).

unit=corepool.service
url=http://127.0.0.1:8080
prop() { ct systemctl show -p "$1" --value "$unit"; }
now_ms() { date +%s%3N; }
ready_code() { ct curl -s -o /dev/null -m 10 -w '%{http_code}' "$url/v2/health/ready"; }
# wait_for SECONDS COMMAND...: polls every 0.1 s until COMMAND succeeds.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.1
  done
}
# The unit's processes, from its own cgroup (v2: cgroup.procs).
unit_pids() { ct cat "/sys/fs/cgroup$(prop ControlGroup)/cgroup.procs" 2>/dev/null | sort -n; }
alive() { ct kill -0 "$1" 2>/dev/null; }
is_ready() { [[ "$(ready_code)" == 200 ]]; }
is_state() { [[ "$(prop ActiveState)" == "$1" ]]; }
restarted_from() { local m; m=$(prop MainPID); [[ "$m" != 0 && "$m" != "$1" && "$(prop ActiveState)" == active ]]; }
# Every process of a former main PID's instance is gone, from the cgroup and from the system.
none_left() {
  local p now; now=$(unit_pids)
  for p in "$@"; do
    if grep -qx "$p" <<<"$now" || alive "$p"; then echo "pid $p of the old instance is still alive"; return 1; fi
  done
}

step_a_socket_activation() {
  ct systemctl enable --now corepool.socket corepool-unix.socket corepool-grpc.socket || return 1
  [[ "$(prop ActiveState)" == inactive ]] || { echo "service active before any connection"; return 1; }
  local t0 code; t0=$(now_ms)
  code=$(ct curl -sS -m 60 -o /tmp/ready.json -w '%{http_code}' "$url/v2/health/ready")
  echo "first GET /v2/health/ready: HTTP $code $(ct cat /tmp/ready.json) after $(( $(now_ms) - t0 )) ms"
  [[ "$code" == 200 ]] || { echo "the first request was not answered 200"; return 1; }
  # corepool answers the queued connection as soon as its HTTP loop runs and
  # sends READY=1 a few ms later (after gRPC starts); systemd reads that
  # datagram asynchronously, so "activating" may still show for a moment.
  wait_for 10 is_state active || { echo "corepool.service is not active after it (ActiveState $(prop ActiveState))"; return 1; }
  code=$(ct runuser -u ci-member -- curl -s -m 10 -o /dev/null -w '%{http_code}' \
         --unix-socket /run/corepool/corepool.sock http://localhost/v2/health/live)
  echo "unix socket, member of group corepool: HTTP $code"
  [[ "$code" == 200 ]] || return 1
  local err; err=$(ct runuser -u ci-other -- curl -sS -m 10 --unix-socket /run/corepool/corepool.sock \
                   http://localhost/v2/health/live 2>&1)
  local rc=$?
  local mode; mode=$(ct stat -c '%U:%G %a' /run/corepool/corepool.sock)
  echo "unix socket, not a member: curl exit $rc: $err (socket $mode)"
  # curl says "Couldn't connect" for connect()'s EACCES too; the socket's group
  # and mode, and the member's success just before, say why. (Its owner is
  # corepool, not root: RuntimeDirectory= chowns /run/corepool's contents.)
  [[ $rc -eq 7 && "$mode" == *":corepool 660" ]] || { echo "a non-member was not refused"; return 1; }
}

step_b_start_waits_for_ready() {
  ct systemctl stop "$unit" || return 1
  local t0 ms code status; t0=$(now_ms)
  ct timeout 120 systemctl start "$unit" || { echo "systemctl start failed"; return 1; }
  ms=$(( $(now_ms) - t0 ))
  code=$(ready_code)  # no retry: start returned, so every worker must be up
  status=$(prop StatusText)
  echo "systemctl start returned after $ms ms; then /v2/health/ready: HTTP $code; StatusText: $status"
  echo "MEASURED start-to-READY ${ms} ms (systemctl start, process mode, 2 workers)"
  [[ "$code" == 200 ]] || { echo "not ready when systemctl start returned"; return 1; }
  [[ "$status" =~ ^generation\ [0-9]+,.*\ 2/2\ workers\ ready,\ [0-9.]+\ req/s$ ]] ||
    { echo "StatusText lacks generation, workers or request rate"; return 1; }
}

step_c_reload_under_load() {
  local gen0 t0 ms
  gen0=$(prop StatusText | sed -n 's/^generation \([0-9]*\),.*/\1/p')
  # Requests back to back until told to stop, at most 60 s.
  ct sh -c 'rm -f /run/ci-stop; ok=0; bad=0; end=$(( $(date +%s) + 60 ))
    while [ ! -e /run/ci-stop ] && [ "$(date +%s)" -lt "$end" ]; do
      c=$(curl -s -o /dev/null -m 10 -w "%{http_code}" --data-binary @/srv/ci/short.wav http://127.0.0.1:8080/v1/audio:tag)
      if [ "$c" = 200 ]; then ok=$((ok+1)); else bad=$((bad+1)); echo "failed: HTTP $c"; fi
    done; echo "requests: $ok ok, $bad failed"' >"$work/reload-loop.log" 2>&1 &
  local loop=$!
  sleep 1  # let the loop get going: the reload must land between requests
  t0=$(now_ms)
  ct systemctl reload "$unit" || { echo "systemctl reload failed"; ct touch /run/ci-stop; wait $loop; return 1; }
  gen_is() { [[ "$(prop StatusText)" == "generation $1,"*"2/2 workers ready"* ]]; }
  wait_for 60 gen_is $((gen0 + 1)) || { echo "no generation $((gen0 + 1)) within 60 s"; ct touch /run/ci-stop; wait "$loop"; return 1; }
  ms=$(( $(now_ms) - t0 ))
  wait_for 30 ct sh -c "journalctl -u $unit -o cat | grep -c 'generation $gen0 retired'"
  sleep 1
  ct touch /run/ci-stop
  wait "$loop"
  cat "$work/reload-loop.log"
  ct journalctl -u "$unit" -o cat --no-pager | grep -E "SIGHUP|reload done|generation $gen0 retired"
  echo "MEASURED reload ${ms} ms (systemctl reload to StatusText showing generation $((gen0 + 1)), 2 workers ready)"
  grep -q "requests: [1-9][0-9]* ok, 0 failed" "$work/reload-loop.log" || { echo "failed requests or none"; return 1; }
  ct journalctl -u "$unit" -o cat | grep -c "reload done in .* generation $((gen0 + 1)) " >/dev/null ||
    { echo "the journal does not show the switch to generation $((gen0 + 1))"; return 1; }
}

step_d_watchdog_restart() {
  local main restarts old t0 s; main=$(prop MainPID); restarts=$(prop NRestarts); old=$(unit_pids)
  echo "main $main, unit's processes: $(echo $old), WatchdogUSec $(prop WatchdogUSec)"
  t0=$(now_ms)
  ct kill -STOP "$main"
  wait_for 90 restarted_from "$main" || { echo "not restarted within 90 s of SIGSTOP"; return 1; }
  wait_for 30 is_ready || { echo "the new instance does not answer"; return 1; }
  s=$(( $(now_ms) - t0 ))
  ct journalctl -u "$unit" -o cat --no-pager | grep -iE "watchdog" | tail -3
  echo "MEASURED watchdog: SIGSTOP to answering again ${s} ms (WatchdogSec=5s, RestartSec=2s)"
  [[ "$(prop NRestarts)" == $((restarts + 1)) ]] || { echo "NRestarts did not go up by one"; return 1; }
  ct journalctl -u "$unit" -o cat | grep -c "Watchdog timeout" >/dev/null || { echo "no watchdog timeout in the journal"; return 1; }
  none_left $old
}

step_e_sigkill_restart() {
  local main restarts old shm t0; main=$(prop MainPID); restarts=$(prop NRestarts); old=$(unit_pids)
  shm=$(ct ls /dev/shm | grep -c "^corepool\.$main\.")
  echo "main $main, unit's processes: $(echo $old); /dev/shm names of it before: $shm"
  t0=$(now_ms)
  ct kill -KILL "$main"
  wait_for 60 restarted_from "$main" || { echo "not restarted within 60 s of SIGKILL"; return 1; }
  wait_for 30 is_ready || { echo "the new instance does not answer"; return 1; }
  echo "restarted and answering after $(( $(now_ms) - t0 )) ms, NRestarts $(prop NRestarts)"
  [[ "$(prop NRestarts)" == $((restarts + 1)) ]] || { echo "NRestarts did not go up by one"; return 1; }
  none_left $old || return 1
  shm=$(ct ls /dev/shm | grep "^corepool\.$main\.")
  [[ -z "$shm" ]] || { echo "/dev/shm residue of pid $main: $shm"; return 1; }
}

step_f_stop_drains_inflight() {
  # The default model tags 40 s of audio in a fraction of a second, too short
  # to stop in the middle of: the workers are paused (SIGSTOP) so that the
  # request is surely in flight when the stop begins, and resumed once systemd
  # has sent SIGTERM.
  local main workers t0 stop_pid code s; main=$(prop MainPID); workers=$(unit_pids | grep -vx "$main")
  ct kill -STOP $workers
  ct curl -s -m 90 -o /tmp/long.json -w '%{http_code}' --data-binary @/srv/ci/long.wav "$url/v1/audio:tag" \
    >"$work/stop-request.code" 2>&1 &
  local req=$!
  queued() { ct curl -s -m 5 "$url/metrics" | awk '/^corepool_queue_depth/ { exit !($2 > 0) }'; }
  wait_for 20 queued || { echo "the request never reached the queue"; ct kill -CONT $workers; return 1; }
  t0=$(now_ms)
  ct systemctl stop "$unit" &
  stop_pid=$!
  wait_for 10 is_state deactivating || echo "never saw deactivating"
  ct kill -CONT $workers
  wait_for 40 bash -c "! kill -0 $stop_pid" || { echo "systemctl stop still waiting after 40 s"; return 1; }
  s=$(( $(now_ms) - t0 ))
  wait "$req"; code=$(cat "$work/stop-request.code")
  echo "in-flight POST /v1/audio:tag (40 s of audio): HTTP $code $(ct head -c 120 /tmp/long.json)"
  echo "systemctl stop took $s ms; Result=$(prop Result) ExecMainStatus=$(prop ExecMainStatus)"
  [[ "$code" == 200 ]] || { echo "the in-flight request did not get 200"; return 1; }
  [[ "$(prop ExecMainStatus)" == 0 && "$(prop Result)" == success ]] || { echo "the service did not exit 0"; return 1; }
  (( s < 30000 )) || { echo "stop took longer than TimeoutStopSec=30s"; return 1; }
}

step_g_sandbox() {
  ct timeout 120 systemctl start "$unit" || { echo "systemctl start failed"; return 1; }
  local out score main bad="" d
  out=$(ct systemd-analyze security --no-pager "$unit" 2>&1)
  score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
  echo "systemd-analyze security (booted): ${score:-none}"
  awk -v s="${score:-99}" 'BEGIN { exit !(s <= 1.0) }' || { echo "exposure ${score:-missing} is over 1.0"; return 1; }
  # Writes from inside the service's mount namespace (as root, so only the
  # mounts can refuse): everywhere but its runtime directory and private /tmp.
  main=$(prop MainPID)
  for d in / /etc /etc/corepool /usr /usr/share/corepool /var /var/lib /var/log /var/cache /srv /opt /home /root /run /run/lock; do
    if ct nsenter -t "$main" -m sh -c "touch $d/.ci-write" 2>/dev/null; then bad="$bad $d"; ct nsenter -t "$main" -m rm -f "$d/.ci-write"; fi
  done
  echo "writable in the service's mount namespace (must be none):${bad:- none}"
  ct nsenter -t "$main" -m sh -c 'touch /run/corepool/.ci-write && rm /run/corepool/.ci-write' ||
    { echo "its runtime directory /run/corepool is not writable"; return 1; }
  # Its mount table: the read-write mounts are its runtime directory, its
  # cache directory (CacheDirectory=: the plan cache, worker/plan_cache.h),
  # its private /tmp and /var/tmp, /dev/shm (the weight and channel segments)
  # and kernel API file systems (/proc, /dev/pts, /dev/mqueue, /dev/hugepages).
  local rw extra; rw=$(ct awk '$6 ~ /^rw/ { print $5 }' "/proc/$main/mountinfo" | sort -u)
  # nspawn's own /run/host mounts (the host's os-release, its propagation
  # directory) exist only in a container and stay read-write there: allowed if
  # the service's user cannot write them.
  extra=$(grep -vxE '/run/corepool|/var/cache/corepool|/tmp|/var/tmp|/dev/shm|/proc|/dev/pts|/dev/mqueue|/dev/hugepages|/run/host/.*' <<<"$rw")
  local uid gid; uid=$(ct id -u corepool) gid=$(ct id -g corepool)
  for d in $(grep -xE '/run/host/.*' <<<"$rw"); do
    ct test -d "$d" || d=$(dirname "$d")
    ct nsenter -t "$main" -m -S "$uid" -G "$gid" sh -c "touch $d/.ci-write" 2>/dev/null && extra="$extra $d(by corepool)"
  done
  echo "read-write mounts of pid $main: $(echo $rw)"
  [[ -z "$bad" && -z "$extra" ]] || { echo "writable beyond its own directories:$bad $(echo $extra)"; return 1; }
}

step_h_journal_priorities() {
  # A worker killed from outside is a warning of the supervisor's.
  local main w warn info; main=$(prop MainPID); w=$(unit_pids | grep -vx "$main" | head -1)
  ct kill -KILL "$w"
  has_warning() { ct journalctl -u "$unit" -t corepool -p warning -o cat | grep -c "killed by signal 9"; }
  wait_for 20 has_warning || { echo "no warning about the killed worker at priority <= warning"; return 1; }
  warn=$(ct journalctl -u "$unit" -t corepool -p warning -o cat --no-pager)
  info=$(ct journalctl -u "$unit" -t corepool -p info..info -o cat --no-pager)
  echo "-p warning: $(wc -l <<<"$warn") lines, e.g. $(grep -m1 'killed by signal 9' <<<"$warn")"
  echo "-p info..info: $(wc -l <<<"$info") lines, e.g. $(head -1 <<<"$info")"
  ! grep -q '^\[[ID]\]\|^<' <<<"$warn" || { echo "info/debug lines or raw <N> prefixes at warning priority"; return 1; }
  grep -q '^\[I\]' <<<"$info" || { echo "no info line at priority info"; return 1; }
  ! grep -q '^\[[WEC]\]' <<<"$info" || { echo "warnings or errors stored at priority info"; return 1; }
}

step_i_shipped_config() {
  # Without the test's drop-in: the package's unit and its unmodified config
  # (thread mode, the installed default model) serve too.
  ct rm -r /etc/systemd/system/corepool.service.d && ct systemctl daemon-reload || return 1
  ct systemctl restart "$unit" || { echo "restart with the shipped config failed"; return 1; }
  local changed; changed=$(ct dpkg --verify corepool)
  echo "ExecStart: $(prop ExecStart | grep -o 'argv\[\]=[^;]*'); StatusText: $(prop StatusText)"
  [[ -z "$changed" ]] || { echo "package files changed: $changed"; return 1; }
  is_ready || { echo "not ready"; return 1; }
  [[ "$(prop StatusText)" == *"thread mode"* ]] || { echo "not the shipped config's thread mode"; return 1; }
}
