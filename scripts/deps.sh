#!/usr/bin/env bash
# The one list of Debian packages keel needs to build and to test; installs whichever are missing.
# Usage: scripts/deps.sh [--check]   (--check: only print what is missing, exit 1 if anything is)
set -euo pipefail

BUILD_PACKAGES=(
  build-essential cmake pkg-config g++
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev linux-libc-dev
  libhwloc-dev hwloc prometheus-cpp-dev libtomlplusplus-dev
  googletest libgtest-dev libgmock-dev nlohmann-json3-dev clang-format
)
# What the tests and benchmarks drive: real workloads, peers to compare against, a real Prometheus.
TEST_PACKAGES=(
  stress-ng linux-perf rt-tests redis-server redis-tools libbpf-tools prometheus procps
)

missing=()
for p in "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all ${#BUILD_PACKAGES[@]} build and ${#TEST_PACKAGES[@]} test packages are installed"
  exit 0
fi
echo "deps: missing: ${missing[*]}"
[[ "${1:-}" == "--check" ]] && exit 1

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
