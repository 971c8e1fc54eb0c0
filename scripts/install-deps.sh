#!/usr/bin/env bash
# Installs, from Debian's archive, everything corepool's build, tests and demo
# need. Idempotent: a second run with everything present does nothing but check.
# Works as root, or through sudo for a normal user. Called by `make deps`.
set -euo pipefail

PACKAGES=(
  build-essential cmake make pkg-config
  libtorch-dev libdnnl-dev libopenblas-dev libopenblas0-pthread
  libboost-dev libuv1-dev libjemalloc-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsndfile1-dev libsoxr-dev libfftw3-dev
  libavformat-dev libavcodec-dev libavutil-dev libavdevice-dev ffmpeg
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libsystemd-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3-grpcio python3-grpc-tools python3-websockets libssl-dev
  gnuplot-nox procps
  curl wrk systemd
  espeak-ng alsa-utils
  slurmctld slurmd slurm-client munge python3-yaml
  clang libclang-rt-14-dev
  dpkg-dev fakeroot lintian debootstrap systemd-container help2man
)
# What one benchmark alone needs (`make bench-silero`: python3-torch), never
# `make test`: EXTRA_PACKAGES="a b" adds them to this run's list.
read -r -a extra <<<"${EXTRA_PACKAGES:-}"
PACKAGES+=("${extra[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  # Refresh the package lists once if they are absent or older than a day.
  if [[ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]]; then
    $SUDO apt-get update -q
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Debian's libtorch calls BLAS through libblas.so.3; make sure the optimized
# OpenBLAS (pthread flavour) is the selected alternative, never the reference BLAS.
if command -v update-alternatives >/dev/null; then
  arch_dir="/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)"
  target="$arch_dir/openblas-pthread/libblas.so.3"
  if [[ -e "$target" ]]; then
    current="$(readlink -f "$arch_dir/libblas.so.3" || true)"
    if [[ "$current" != "$(readlink -f "$target")" ]]; then
      ${SUDO:-} update-alternatives --set "libblas.so.3-$(basename "$arch_dir")" "$target" || true
      ${SUDO:-} update-alternatives --set "liblapack.so.3-$(basename "$arch_dir")" "$arch_dir/openblas-pthread/liblapack.so.3" || true
    fi
  fi
fi
