#!/usr/bin/env bash
# One harness over its seed corpus: `run.sh BIN CORPUS 0` replays every seed once; `run.sh BIN CORPUS N`
# then fuzzes for N seconds (new inputs go to a scratch directory, never into the tree). A crash, a leak,
# a timeout or an out-of-memory input fails it; the input is kept under the build's fuzz/artifacts/.
set -euo pipefail
bin=$1 corpus=$2 seconds=$3
artifacts=$(dirname "$bin")/artifacts/$(basename "$bin")/
export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mkdir -p "$artifacts"
common=(-artifact_prefix="$artifacts" -rss_limit_mb=2048 -timeout=10 -malloc_limit_mb=1024 -print_final_stats=1)
if [[ $seconds -eq 0 ]]; then
  exec "$bin" "${common[@]}" -runs=0 "$corpus"
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$bin" "${common[@]}" -max_total_time="$seconds" "$scratch" "$corpus"
