#!/usr/bin/env bash
# The one list of Debian packages keel needs, in three sets, and installs whichever are missing:
#   build  to compile keel (compilers, headers, bpftool for the skeletons, clang-format, ccache and the
#          mold linker that scripts/build.sh uses where installed)
#   run    to run the built binary (shared libraries only: what the Debian package depends on)
#   test   what the test suite and benchmarks drive: workloads, peers, Prometheus, GoogleTest, systemd's
#          analyzer, docker, Node.js (the offline Kubernetes schema check), python3-fusepy (a FUSE file system
#          whose writes fail: the journal's I/O-error test), clang's libFuzzer runtime (the fuzz harnesses),
#          and what builds and boots the cgroup v2 guest (qemu, mmdebstrap, e2fsprogs: scripts/vm-test.sh)
#   guest  not installed here: what scripts/vm-test.sh puts into the Debian 12 guest image (systemd, the
#          cloud kernel, the run set and the privileged tests' tools); --list guest prints it
# Usage: scripts/deps.sh [build|run|test|all]... [--check] | --list SET
#   (default: all; --check only prints what is missing and exits 1 if anything is)
# scripts/start.sh installs build + run; scripts/test.sh all three.
set -euo pipefail

BUILD_PACKAGES=(
  build-essential cmake pkg-config g++ dpkg-dev
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev linux-libc-dev
  libhwloc-dev prometheus-cpp-dev libtomlplusplus-dev nlohmann-json3-dev libsystemd-dev clang-format
  ccache mold
)
RUN_PACKAGES=(
  libbpf1 libelf1 libhwloc15 libprometheus-cpp-core1.0 libcivetweb1
  libtomlplusplus3 libsystemd0 libstdc++6
)
TEST_PACKAGES=(
  googletest libgtest-dev libgmock-dev hwloc
  stress-ng linux-perf rt-tests redis-server redis-tools libbpf-tools prometheus procps
  systemd man-db util-linux docker.io nodejs python3-fusepy libclang-rt-14-dev
  qemu-system-x86 qemu-utils mmdebstrap e2fsprogs
)
# The v2 guest: systemd as PID 1 on Debian's cloud kernel, keel's run set, and what the privileged tests
# drive (the same tools as the test set, less the build, fuzz and offline-schema ones). The package tests
# run cpack in the build tree, and cpack runs make, which checks every target against its inputs before
# anything is packaged: the CMake package files, headers and libraries the build read (GoogleTest,
# prometheus-cpp, civetweb, toml++, nlohmann-json, libbpf, hwloc, libstdc++ and libc) must be there with
# their mtimes, or make re-configures or recompiles, which needs a compiler the guest does not have; and
# cpack -G DEB needs `file` and dpkg-dev (dpkg-shlibdeps) for the runtime dependencies.
# scripts/vm-test.sh warns when the build reads a package's files that this list lacks.
GUEST_PACKAGES=(
  systemd systemd-sysv udev dbus linux-image-cloud-amd64 iproute2 procps kmod util-linux
  "${RUN_PACKAGES[@]}"
  cmake bpftool hwloc stress-ng linux-perf rt-tests redis-server redis-tools libbpf-tools prometheus
  docker.io apparmor python3 python3-fusepy fuse3 dpkg-dev file man-db make
  libgtest-dev libgmock-dev prometheus-cpp-dev libcivetweb-dev libtomlplusplus-dev nlohmann-json3-dev
  libbpf-dev libhwloc-dev libsystemd-dev libstdc++-12-dev libc6-dev libgcc-12-dev linux-libc-dev
)

if [[ ${1:-} == --list ]]; then
  case "${2:-}" in
    build) echo "${BUILD_PACKAGES[*]}" ;;
    run) echo "${RUN_PACKAGES[*]}" ;;
    test) echo "${TEST_PACKAGES[*]}" ;;
    guest) echo "${GUEST_PACKAGES[*]}" ;;
    *) echo "usage: $0 --list build|run|test|guest" >&2; exit 2 ;;
  esac
  exit 0
fi

sets=()
check=0
for a in "$@"; do
  case "$a" in
    build | run | test) sets+=("$a") ;;
    all) sets+=(build run test) ;;
    --check) check=1 ;;
    *) echo "usage: $0 [build|run|test|all]... [--check]" >&2; exit 2 ;;
  esac
done
[[ ${#sets[@]} -eq 0 ]] && sets=(build run test)

wanted=()
for s in "${sets[@]}"; do
  case "$s" in
    build) wanted+=("${BUILD_PACKAGES[@]}") ;;
    run) wanted+=("${RUN_PACKAGES[@]}") ;;
    test) wanted+=("${TEST_PACKAGES[@]}") ;;
  esac
done

# npm comes with NodeSource's nodejs, and is its own package with Debian's.
if [[ " ${wanted[*]} " == *" nodejs "* ]] && ! command -v npm >/dev/null; then
  wanted+=(npm)
fi

missing=()
for p in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all ${#wanted[@]} packages (${sets[*]}) are installed"
  exit 0
fi
echo "deps: missing (${sets[*]}): ${missing[*]}"
[[ $check -eq 1 ]] && exit 1

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps: not root and no sudo; install the packages above" >&2; exit 1; }
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
# Installing redis-server/prometheus must not leave services running that tests did not start:
# a temporary policy-rc.d tells the maintainer scripts not to start them (removed afterwards).
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
  "${SUDO[@]}" chmod +x "$policy"
  created_policy=1
  trap '[[ $created_policy -eq 1 ]] && "${SUDO[@]}" rm -f "$policy"' EXIT
fi
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "deps: installed ${#missing[@]} packages"
