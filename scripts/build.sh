#!/usr/bin/env bash
# Configures and builds keel. Usage: scripts/build.sh [release|asan|fuzz]   (default: release)
#   release  everything, in build
#   asan     AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan: what scripts/test.sh runs there
#            (no end-to-end scenarios, benchmarks or other-architecture BPF objects: the release build
#            has them)
#   fuzz     the libFuzzer harnesses only (fuzz/), in build-fuzz
# KEEL_JOBS sets the parallel jobs (default: every CPU).
#
# With ccache (Debian's; scripts/deps.sh build installs it) every compile goes through it, its cache
# outside the checkout ($KEEL_CCACHE_DIR, default /var/cache/keel-ccache) with the checkout as base
# directory: a fresh clone in another folder hits what an earlier build of the same sources compiled, so
# a build after a session's own builds compiles only what changed. Where a faster linker is installed
# (mold, else lld) it links.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}
options=()
case "$kind" in
  release) dir=build; type=RelWithDebInfo ;;
  asan) dir=build-asan; type=Asan; options=(-DKEEL_E2E_TESTS=OFF -DKEEL_BENCH=OFF -DKEEL_BPF_OTHER_ARCH=OFF) ;;
  fuzz) dir=build-fuzz; type=Fuzz ;;
  *) echo "usage: $0 [release|asan|fuzz]" >&2; exit 2 ;;
esac
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${KEEL_CCACHE_DIR:-/var/cache/keel-ccache}
  mkdir -p "$CCACHE_DIR"
  # Paths under the checkout are hashed relative to it, the compile directory is not hashed (the debug
  # info of a hit names the folder it was first compiled in), and precompiled headers are cacheable.
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_MAXSIZE=${KEEL_CCACHE_SIZE:-8G}
  options+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
linker=
for ld in mold lld; do
  if command -v "ld.$ld" >/dev/null || command -v "$ld" >/dev/null; then
    linker=$ld
    break
  fi
done
if [[ -n $linker ]]; then
  options+=("-DCMAKE_EXE_LINKER_FLAGS_INIT=-fuse-ld=$linker" "-DCMAKE_SHARED_LINKER_FLAGS_INIT=-fuse-ld=$linker")
fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" "${options[@]}" >/dev/null
jobs=${KEEL_JOBS:-$(nproc)}
# ccache's counts before and after (another build may run beside this one: the difference is not all ours).
ccache_counts() {
  command -v ccache >/dev/null || return 0
  ccache --print-stats 2>/dev/null | awk -F'\t' '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hit += $2 }
    $1 == "cache_miss" { miss = $2 } END { print hit + 0, miss + 0 }'
}
read -r hits0 misses0 <<<"$(ccache_counts)"
if [[ $kind == fuzz ]]; then
  cmake --build "$dir" -j"$jobs" --target keel_fuzzers
else
  cmake --build "$dir" -j"$jobs"
fi
if command -v ccache >/dev/null; then
  read -r hits1 misses1 <<<"$(ccache_counts)"
  echo "build.sh: ccache ($kind): $((hits1 - hits0)) hits, $((misses1 - misses0)) misses"
fi
