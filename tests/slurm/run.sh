#!/usr/bin/env bash
# `make test-slurm`: the Slurm recipe for real, on this one machine. Starts
# munged (its own key), slurmctld and slurmd on localhost with a minimal config
# written here (no systemd, no cgroups: proctrack/linuxproc, task/none),
# submits deploy/slurm/corepool-array.sbatch as a 3-task job array over
# generated audio with `sbatch --wait`, and checks that the shards' results
# equal one unsharded `corepool batch` run file for file and that
# `corepool merge` counts them all. Every daemon is stopped on exit; every wait
# is bounded. If Slurm cannot start here the test fails, saying why.
# Usage: tests/slurm/run.sh BUILD_DIR   (as root; needs slurmctld slurmd slurm-client munge)
set -euo pipefail

BUILD="$(cd "${1:-build}" && pwd)"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
COREPOOL="$BUILD/supervisor/corepool"
GEN_AUDIO="$BUILD/tools/corepool-gen-audio"
SHARDS=3

fail() { echo "test-slurm: FAIL: $*" >&2; exit 1; }
step() { echo "test-slurm: $*" >&2; }

if [[ "$(id -u)" -ne 0 ]] && command -v sudo >/dev/null; then
  exec sudo -n --preserve-env=KEEP_SLURM_TEST bash "$0" "$@"
fi
[[ "$(id -u)" -eq 0 ]] || fail "must run as root or with sudo (the test starts slurmd, SlurmdUser=root)"
for tool in munged munge slurmctld slurmd sbatch sinfo scontrol scancel; do
  command -v "$tool" >/dev/null || fail "$tool not found: install slurmctld slurmd slurm-client munge (make deps)"
done
[[ -x "$COREPOOL" && -x "$GEN_AUDIO" ]] || fail "build first: $COREPOOL, $GEN_AUDIO"

WORK="$(mktemp -d /tmp/corepool-slurm.XXXXXX)"
chmod 755 "$WORK"
mkdir -p "$WORK"/{munge,state,spool,log,data,shared,ref,joblogs}
chmod 711 "$WORK/munge"
PIDS=()

dump_logs() {
  for f in "$WORK"/log/*.log "$WORK"/joblogs/*; do
    [[ -f "$f" ]] || continue
    echo "----- $f (last 25 lines)" >&2
    tail -n 25 "$f" >&2
  done
}

cleanup() {
  local rc=$?
  set +e
  if [[ -f "$WORK/slurm.conf" ]]; then
    SLURM_CONF="$WORK/slurm.conf" timeout 10 scancel --quiet --user=root >/dev/null 2>&1
    SLURM_CONF="$WORK/slurm.conf" timeout 10 scontrol shutdown >/dev/null 2>&1
  fi
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${PIDS[@]}"; do  # at most 10 s each, then SIGKILL
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  [[ $rc -ne 0 ]] && dump_logs
  if [[ -n "${KEEP_SLURM_TEST:-}" ]]; then echo "test-slurm: kept $WORK" >&2; else rm -rf "$WORK"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A TCP port nothing listens on, from a random start (other tests may run),
# below the kernel's ephemeral range: a port in that range may be the local
# end of some client's connection, which nothing listens on but bind() still
# refuses (seen: slurmd "Unable to bind listen port (44512)" during a CI run).
free_port() {
  local port low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  ((low > 10000)) || low=32768
  for _ in $(seq 200); do
    port=$((low - 12000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ "$port" != "${1:-}" ]]; then
      echo "$port"
      return
    fi
  done
  fail "no free TCP port found"
}

start_munge() {
  head -c 1024 /dev/urandom > "$WORK/munge/munge.key"
  chmod 400 "$WORK/munge/munge.key"
  munged --force --socket="$WORK/munge/munge.sock" --key-file="$WORK/munge/munge.key" \
    --log-file="$WORK/log/munged.log" --pid-file="$WORK/munge/munged.pid" --seed-file="$WORK/munge/seed" \
    || fail "munged did not start (see $WORK/log/munged.log)"
  PIDS+=("$(cat "$WORK/munge/munged.pid")")
  timeout 10 munge -S "$WORK/munge/munge.sock" -n | timeout 10 unmunge -S "$WORK/munge/munge.sock" >/dev/null \
    || fail "munge cannot encode/decode a credential with its own key"
}

write_slurm_conf() {
  local ctld_port slurmd_port
  ctld_port="$(free_port)"
  slurmd_port="$(free_port "$ctld_port")"
  cat > "$WORK/slurm.conf" <<CONF
# Written by tests/slurm/run.sh: one node (this machine), root daemons, no
# systemd or cgroup delegation needed.
ClusterName=corepooltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=localhost Default=YES MaxTime=30 State=UP
CONF
  export SLURM_CONF="$WORK/slurm.conf"
}

start_slurm() {
  slurmctld -D -f "$SLURM_CONF" > "$WORK/log/slurmctld.out.log" 2>&1 &
  PIDS+=("$!")
  slurmd -D -N localhost -f "$SLURM_CONF" > "$WORK/log/slurmd.out.log" 2>&1 &
  PIDS+=("$!")
  local state=""
  for _ in $(seq 300); do  # at most 60 s
    state="$(timeout 5 sinfo -h -n localhost -o %T 2>/dev/null || true)"
    [[ "$state" == "idle" ]] && return
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || fail "a Slurm daemon exited at start (pid $pid)"; done
    sleep 0.2
  done
  fail "the node did not become idle within 60 s (state: '${state:-no answer from slurmctld}')"
}

# Seven files of different lengths, rates and formats in nested directories.
make_audio() {
  mkdir -p "$WORK/data/a/b" "$WORK/data/c"
  local i=0
  for f in one.wav a/two.flac a/three.wav a/b/four.ogg a/b/five.wav c/six.wav c/seven.flac; do
    i=$((i + 1))
    local fmt="${f##*.}"
    "$GEN_AUDIO" --out "$WORK/data/$f" --format "$fmt" --seed "$i" --rate $((i % 2 ? 16000 : 22050)) \
      --sections "tone:$((i % 3 + 1)),noise:1.5,silence:1,chord:$((i % 4 + 1))@220,clicks:1" >/dev/null
  done
  find "$WORK/data" -type f | sort > "$WORK/files.txt"
}

# Each result without its timing (wall_seconds, x_realtime differ run to run).
untimed() { sed -E 's/"wall_seconds":[^,}]*,?//; s/"x_realtime":[^,}]*,?//; s/,}/}/' "$1"; }

compare_results() {
  local ref_list shared_list
  ref_list="$(cd "$WORK/ref" && find . -name '*.jsonl' -type f | sort)"
  shared_list="$(cd "$WORK/shared" && find . -name '*.jsonl' -type f -not -path './.corepool-shards/*' | sort)"
  [[ "$ref_list" == "$shared_list" ]] || fail "result files differ: unsharded [$ref_list] vs shards [$shared_list]"
  [[ "$(echo "$ref_list" | wc -l)" -eq 7 ]] || fail "expected 7 results, got: $ref_list"
  while read -r f; do
    diff <(untimed "$WORK/ref/$f") <(untimed "$WORK/shared/$f") >&2 || fail "$f differs between the shards and the unsharded run"
  done <<< "$ref_list"
  local leftovers
  leftovers="$(find "$WORK/shared" -name '*.tmp.*')"
  [[ -z "$leftovers" ]] || fail "temp files left: $leftovers"
}

# Every task ran as its own shard on the whole node, and the shards did each
# file once between them (an unsharded task would do all 7 itself).
check_tasks() {
  local done_total=0 report
  for i in $(seq 0 $((SHARDS - 1))); do
    report="$WORK/shared/.corepool-shards/$i-of-$SHARDS.json"
    [[ -f "$report" ]] || fail "no report of shard $i/$SHARDS"
    done_total=$((done_total + $(sed -E 's/.*"done":([0-9]+).*/\1/' "$report")))
    grep -q "task $i of $SHARDS on .*, $(nproc) cpus" "$WORK"/joblogs/*_"$i".log \
      || fail "task $i's log does not show shard $i of $SHARDS on $(nproc) cpus"
  done
  [[ "$done_total" -eq 7 ]] || fail "the shards tagged $done_total files between them, not 7 once each"
}

step "starting munged, slurmctld, slurmd in $WORK"
start_munge
write_slurm_conf
start_slurm
step "node idle; generating audio"
make_audio

step "unsharded reference run"
timeout 300 "$COREPOOL" --log-level warn batch --no-progress --out "$WORK/ref" "$WORK/data" \
  || fail "the unsharded corepool batch run failed"

step "sbatch --wait --array=0-$((SHARDS - 1)) deploy/slurm/corepool-array.sbatch"
SECONDS=0
timeout 600 sbatch --wait --array=0-$((SHARDS - 1)) --output="$WORK/joblogs/%A_%a.log" \
  --export="ALL,COREPOOL_BIN=$COREPOOL,COREPOOL_MANIFEST=$WORK/files.txt,COREPOOL_ROOT=$WORK/data,COREPOOL_OUT=$WORK/shared,COREPOOL_MODEL=$SRC/models/default" \
  "$SRC/deploy/slurm/corepool-array.sbatch" >&2 || fail "the array job failed (sbatch --wait exit $?)"
step "array job done in ${SECONDS} s"

check_tasks
compare_results
merged="$(timeout 60 "$COREPOOL" merge --out "$WORK/shared" --manifest "$WORK/files.txt" --root "$WORK/data")" \
  || fail "corepool merge reported missing results: $merged"
echo "$merged"
[[ "$merged" == *'"complete":7'* && "$merged" == *'"inputs":7'* && "$merged" == *'"shard_reports":3'* ]] \
  || fail "corepool merge does not count 7 complete inputs from 3 shards: $merged"
step "PASS: $SHARDS Slurm array tasks wrote exactly the unsharded results; merge counts all 7"
