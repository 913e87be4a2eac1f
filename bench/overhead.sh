#!/usr/bin/env bash
# keel's sensing overhead against no tracing and against libbpf-tools runqlat, in one run.
# Interleaved rounds of (none | keel | runqlat) so drift hits all modes alike; medians; ratios to
# the no-tracing baseline; keel's ns per BPF event from BPF run-time stats. Needs root.
# `perf bench sched pipe` runs twice per round: free (the two tasks on either CPU, bimodal on small
# VMs) and pinned to CPU 0 (every message is two switches on one CPU: the per-switch cost, steadier).
# keel runs as `keel top` does by default (BPF stats sampled: off in a one-interval run); keel-stats
# holds BPF run-time stats on throughout, which is where keel's ns/event comes from. MODES=... picks.
# Usage: bench/overhead.sh [ROUNDS] [KEEL_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
modes=${MODES:-none keel keel-stats runqlat}
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
    keel) "$keel" top --interval 3600 --count 1 >/dev/null & tracer=$! ;;  # stats sampled: first interval only
    keel-stats) "$keel" top --bpf-stats always --interval 3600 --count 1 >/dev/null & tracer=$! ;;
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
  for mode in $modes; do
    start_tracer $mode
    ops=$(perf bench sched pipe -l 100000 2>/dev/null | awk '/ops\/sec/ {print $1}')
    pin=$(taskset -c 0 perf bench sched pipe -l 100000 2>/dev/null | awk '/ops\/sec/ {print $1}')
    hb=$(hackbench -g 4 -l 200 2>/dev/null | awk '/Time:/ {print $2}')
    [[ $mode == keel-stats ]] && keel_cost >> "$tmp/cost"
    stop_tracer
    echo "$ops" >> "$tmp/pipe.$mode"
    echo "$pin" >> "$tmp/pin.$mode"
    echo "$hb" >> "$tmp/hack.$mode"
    echo "round $r $mode: pipe ${ops} ops/s, pinned ${pin} ops/s, hackbench ${hb} s" >&2
  done
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
base_pipe=$(median "$tmp/pipe.none")
base_pin=$(median "$tmp/pin.none")
base_hack=$(median "$tmp/hack.none")
printf '\n| mode | pipe ops/s | pipe ratio | pinned pipe ops/s | pinned ratio | hackbench s | hackbench ratio |\n|---|---|---|---|---|---|---|\n'
for mode in $modes; do
  p=$(median "$tmp/pipe.$mode"); q=$(median "$tmp/pin.$mode"); h=$(median "$tmp/hack.$mode")
  awk -v m=$mode -v p="$p" -v q="$q" -v h="$h" -v bp="$base_pipe" -v bq="$base_pin" -v bh="$base_hack" \
    'BEGIN {printf "| %s | %.0f | %.3fx | %.0f | %.3fx | %.3f | %.3fx |\n", m, p, p/bp, q, q/bq, h, bh/h}'
done
echo "(medians of $rounds rounds; ratios: mode/none for ops/s, none/mode for hackbench seconds; higher is better)"
[[ -s $tmp/cost ]] && awk '{t+=$1; c+=$2} END {if (c) printf "\nkeel BPF cost: %.0f ns per event over %d events (keel-stats rounds)\n", t/c, c}' "$tmp/cost"
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
