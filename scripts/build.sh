#!/usr/bin/env bash
# Configures and builds keel. Usage: scripts/build.sh [release|asan|fuzz]   (default: release)
# fuzz: the libFuzzer harnesses only (fuzz/), in build-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}
case "$kind" in
  release) dir=build; type=RelWithDebInfo ;;
  asan) dir=build-asan; type=Asan ;;
  fuzz) dir=build-fuzz; type=Fuzz ;;
  *) echo "usage: $0 [release|asan|fuzz]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" >/dev/null
if [[ $kind == fuzz ]]; then
  cmake --build "$dir" -j"$(nproc)" --target keel_fuzzers
else
  cmake --build "$dir" -j"$(nproc)"
fi
