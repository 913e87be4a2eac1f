#!/usr/bin/env bash
# keel's sensing overhead against no tracing and against libbpf-tools runqlat, in one run.
# Interleaved rounds of (none | keel | runqlat) so drift hits all modes alike; medians; ratios to
# the no-tracing baseline; keel's ns per BPF event from BPF run-time stats. Needs root.
# Usage: bench/overhead.sh [ROUNDS] [KEEL_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
keel=${2:-build/cli/keel}
[[ $(id -u) -eq 0 ]] || { echo "needs root (loads BPF)" >&2; exit 1; }
for t in perf hackbench runqlat bpftool; do command -v $t >/dev/null || { echo "missing $t (scripts/deps.sh)" >&2; exit 1; }; done
[[ -x $keel ]] || { echo "build keel first: scripts/build.sh release" >&2; exit 1; }

tmp=$(mktemp -d)
tracer=0
cleanup() { [[ $tracer -ne 0 ]] && kill -INT $tracer 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

start_tracer() {
  case $1 in
    none) tracer=0 ;;
    keel) "$keel" top --interval 3600 --count 1 >/dev/null & tracer=$! ;;
    runqlat) runqlat 3600 1 >/dev/null & tracer=$! ;;
  esac
  sleep 1.5  # attach
}
stop_tracer() {
  if [[ $tracer -ne 0 ]]; then kill -INT $tracer; wait $tracer 2>/dev/null || true; tracer=0; fi
}
keel_cost() {  # "run_time_ns run_cnt" summed over keel's programs (stats are on while keel runs)
  bpftool prog show 2>/dev/null | awk '/name keel_/ {k=1} k && /run_time_ns/ {for (i=1;i<=NF;i++) {if ($i=="run_time_ns") t+=$(i+1); if ($i=="run_cnt") c+=$(i+1)}; k=0} END {print t+0, c+0}'
}

for ((r = 1; r <= rounds; r++)); do
  for mode in none keel runqlat; do
    start_tracer $mode
    ops=$(perf bench sched pipe -l 100000 2>/dev/null | awk '/ops\/sec/ {print $1}')
    hb=$(hackbench -g 4 -l 200 2>/dev/null | awk '/Time:/ {print $2}')
    [[ $mode == keel ]] && keel_cost >> "$tmp/cost"
    stop_tracer
    echo "$ops" >> "$tmp/pipe.$mode"
    echo "$hb" >> "$tmp/hack.$mode"
    echo "round $r $mode: pipe ${ops} ops/s, hackbench ${hb} s" >&2
  done
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
base_pipe=$(median "$tmp/pipe.none")
base_hack=$(median "$tmp/hack.none")
printf '\n| mode | pipe ops/s (median) | pipe ratio | hackbench s (median) | hackbench ratio (baseline/mode) |\n|---|---|---|---|---|\n'
for mode in none keel runqlat; do
  p=$(median "$tmp/pipe.$mode"); h=$(median "$tmp/hack.$mode")
  awk -v m=$mode -v p="$p" -v h="$h" -v bp="$base_pipe" -v bh="$base_hack" \
    'BEGIN {printf "| %s | %.0f | %.3fx | %.3f | %.3fx |\n", m, p, p/bp, h, bh/h}'
done
awk '{t+=$1; c+=$2} END {if (c) printf "\nkeel BPF cost: %.0f ns per event over %d events (BPF run-time stats)\n", t/c, c}' "$tmp/cost"
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
