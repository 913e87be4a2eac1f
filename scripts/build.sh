#!/usr/bin/env bash
# Configures and builds keel. Usage: scripts/build.sh [release|asan]   (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}
case "$kind" in
  release) dir=build; type=RelWithDebInfo ;;
  asan) dir=build-asan; type=Asan ;;
  *) echo "usage: $0 [release|asan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" >/dev/null
cmake --build "$dir" -j"$(nproc)"
