#!/usr/bin/env bash
# Every libFuzzer harness (fuzz/) run long: RUNS executions each (default 1,100,000), at most MAX_S
# seconds each (default 1800), from its seed corpus into a scratch corpus. Prints executions, speed,
# the corpus it grew, coverage features and findings (crashes, leaks, timeouts, out-of-memory inputs:
# kept under build-fuzz/fuzz/artifacts/) per harness, and the totals.
#   bench/fuzz.sh [HARNESS ...]        (default: every harness)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-1100000}
max_s=${MAX_S:-1800}
bash scripts/build.sh fuzz >/dev/null
mapfile -t all < <(cd fuzz/corpus && ls)
harnesses=("$@")
[[ ${#harnesses[@]} -eq 0 ]] && harnesses=("${all[@]}")
work=$(mktemp -d /tmp/keel-fuzz-bench.XXXXXX)
export LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"  # hwloc's own leak
trap 'rm -rf "$work"' EXIT

printf '| harness | execs | seconds | execs/s | corpus (seeds -> grown) | features | findings |\n'
printf '|---|---|---|---|---|---|---|\n'
total=0 findings_total=0
for h in "${harnesses[@]}"; do
  bin=build-fuzz/fuzz/keel_fuzz_$h
  art=build-fuzz/fuzz/artifacts/keel_fuzz_$h/
  mkdir -p "$work/$h" "$art"
  before=$(find "$art" -type f | wc -l)
  seeds=$(ls "fuzz/corpus/$h" | wc -l)
  t0=$(date +%s.%N)
  "$bin" -runs="$runs" -max_total_time="$max_s" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
    -artifact_prefix="$art" -print_final_stats=1 "$work/$h" "fuzz/corpus/$h" >"$work/$h.log" 2>&1 || true
  t1=$(date +%s.%N)
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$work/$h.log")
  feats=$(grep -o 'ft: [0-9]*' "$work/$h.log" | tail -1 | awk '{print $2}')
  grown=$(ls "$work/$h" | wc -l)
  after=$(find "$art" -type f | wc -l)
  found=$((after - before))
  secs=$(python3 -c "print(f'{$t1 - $t0:.0f}')")
  printf '| %s | %s | %s | %s | %s -> %s | %s | %s |\n' "$h" "${execs:-0}" "$secs" \
    "$(python3 -c "print(int(${execs:-0} / max($t1 - $t0, 1e-3)))")" "$seeds" "$((seeds + grown))" "${feats:-?}" "$found"
  total=$((total + ${execs:-0}))
  findings_total=$((findings_total + found))
  if [[ $found -gt 0 ]]; then grep -E "ERROR|SUMMARY|deadly|leak" "$work/$h.log" | head -5 >&2; fi
done
printf '\ntotal: %s executions, %s findings\n' "$total" "$findings_total"
