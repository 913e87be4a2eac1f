#!/usr/bin/env bash
# keel's sensing overhead against no tracing, against the floor of its hooks (empty programs on the
# same attach points) and against libbpf-tools runqlat, in one run. Rounds interleave the modes so drift
# hits all alike; medians; ratios to no tracing and to the floor; keel's ns per event above the floor.
# Needs root.
#
# Columns (each mode runs all three every round):
#   pinned: `perf bench sched pipe` with both ends on CPU 0: every round trip is two wakeups and two
#           switches on one CPU, so its time is the per-event cost with nothing else in the way.
#   cross:  bench/pingpong.cpp (keel_pingpong) with one end on CPU 0 and the other on CPU 1: the same
#           traffic across CPUs (cross-CPU wakeups). Replaces the free pipe, which is bimodal on small
#           VMs (both ends on one CPU or not, from run to run).
#   hackbench: `hackbench -g 4 -l 200` (rt-tests): many tasks, all CPUs.
# Modes (MODES=... picks):
#   none        no tracing.
#   floor       bench/floor.cpp (keel_floor): one empty program per program keel attaches, of the same
#               type on the same tracepoint (taken from a keel started once for the purpose).
#   keel        keel's sensors as `keel top` runs them, reading every second, BPF run-time stats off.
#   keel-stats  the same with BPF run-time stats on throughout: keel's ns per program run.
#   runqlat     libbpf-tools runqlat (one global histogram).
#   KEEL_BEFORE=path/to/keel adds keel-before and floor-before: another keel binary (the one before a
#   change) and the floor of its own programs, measured in the same rounds.
# Per event: (1/ops(mode) - 1/ops(floor)) / events per op, events per op counted once per column
# before the rounds (the floor's program runs over one benchmark run, BPF stats on).
# After the rounds: keel's RSS and the memory of its maps, per cgroup entry and per task.
# Usage: bench/overhead.sh [ROUNDS] [KEEL_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
keel=${2:-build/cli/keel}
before=${KEEL_BEFORE:-}
floor_bin=build/bench/keel_floor
pingpong=build/bench/keel_pingpong
default_modes="none floor keel runqlat"
[[ -n $before ]] && default_modes="none floor-before keel-before floor keel runqlat"
loops=${LOOPS:-100000}
[[ $(id -u) -eq 0 ]] || { echo "needs root (loads BPF)" >&2; exit 1; }
for t in perf hackbench runqlat bpftool taskset; do command -v $t >/dev/null || { echo "missing $t (scripts/deps.sh)" >&2; exit 1; }; done
for b in "$keel" $floor_bin $pingpong ${before:+"$before"}; do
  [[ -x $b ]] || { echo "missing $b: build first (scripts/build.sh release)" >&2; exit 1; }
done
(( $(nproc) >= 2 )) || { echo "needs 2 CPUs (the cross column)" >&2; exit 1; }

tmp=$(mktemp -d)
tracer=0
cleanup() { [[ $tracer -ne 0 ]] && kill -INT $tracer 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# The programs a keel binary attaches on this host ("switch_btf migrate_btf ..."), from bpftool while
# it runs.
programs_of() {
  "$1" top --bpf-stats off --interval 1 --count 3600 >/dev/null & local pid=$!
  sleep 1.5
  local progs
  progs=$(bpftool prog show 2>/dev/null | awk '/ name keel_/ {for (i=1;i<=NF;i++) if ($i=="name") print $(i+1)}' |
    sed 's/^keel_//' | sort -u | xargs)
  kill -INT $pid; wait $pid 2>/dev/null || true
  [[ -n $progs ]] || { echo "$1 attached no keel_ program" >&2; exit 1; }
  echo "$progs"
}
progs_keel=$(programs_of "$keel")
if [[ -n $before ]]; then
  progs_before=$(programs_of "$before")
  # The same programs: one floor serves both (a second one would only add its own noise).
  [[ $progs_before == "$progs_keel" ]] && default_modes="none floor keel-before keel runqlat"
fi
modes=${MODES:-$default_modes}
has() { [[ " $modes " == *" $1 "* ]]; }
floor_before=floor-before
has floor-before || floor_before=floor

start_tracer() {
  case $1 in
    none) tracer=0 ;;
    # keel reads every second as `keel run` does (hot slots are given out at reads), BPF stats off.
    keel) "$keel" top --bpf-stats off --interval 1 --count 3600 >/dev/null & tracer=$! ;;
    keel-before) "$before" top --bpf-stats off --interval 1 --count 3600 >/dev/null & tracer=$! ;;
    keel-stats) "$keel" top --bpf-stats always --interval 1 --count 3600 >/dev/null & tracer=$! ;;
    floor) $floor_bin $progs_keel >/dev/null & tracer=$! ;;
    floor-before) $floor_bin $progs_before >/dev/null & tracer=$! ;;
    runqlat) runqlat 3600 1 >/dev/null & tracer=$! ;;
    *) echo "unknown mode $1" >&2; exit 2 ;;
  esac
  sleep 1.5  # attach
}
stop_tracer() {
  if [[ $tracer -ne 0 ]]; then kill -INT $tracer; wait $tracer 2>/dev/null || true; tracer=0; fi
}
keel_cost() {  # "run_time_ns run_cnt" summed over keel's programs (stats are on while keel runs)
  bpftool prog show 2>/dev/null | awk '/name keel_/ {k=1} k && /run_time_ns/ {for (i=1;i<=NF;i++) {if ($i=="run_time_ns") t+=$(i+1); if ($i=="run_cnt") c+=$(i+1)}; k=0} END {print t+0, c+0}'
}
pinned() { taskset -c 0 perf bench sched pipe -l "$loops" 2>/dev/null | awk '/ops\/sec/ {print $1}'; }
cross() { $pingpong "$loops" 0 1 | awk '/ops\/sec/ {print $1}'; }

# Events per benchmark operation for a program set: the floor's runs over one run of the column.
events_per_op() {  # progs column
  $floor_bin --stats $1 > "$tmp/count" & local pid=$!
  sleep 1.5
  $2 >/dev/null
  kill -INT $pid; wait $pid 2>/dev/null || true
  awk -v n="$loops" '/^runs/ {printf "%.3f", $2 / n}' "$tmp/count"
}
for col in pinned cross; do
  echo "$(events_per_op "$progs_keel" $col)" > "$tmp/events.keel.$col"
  [[ -n $before ]] && echo "$(events_per_op "$progs_before" $col)" > "$tmp/events.before.$col"
done

for ((r = 1; r <= rounds; r++)); do
  for mode in $modes; do
    start_tracer $mode
    pin=$(pinned)
    x=$(cross)
    hb=$(hackbench -g 4 -l 200 2>/dev/null | awk '/Time:/ {print $2}')
    [[ $mode == keel-stats ]] && keel_cost >> "$tmp/cost"
    stop_tracer
    echo "$pin" >> "$tmp/pinned.$mode"
    echo "$x" >> "$tmp/cross.$mode"
    echo "$hb" >> "$tmp/hack.$mode"
    echo "round $r $mode: pinned ${pin} ops/s, cross ${x} ops/s, hackbench ${hb} s" >&2
  done
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# Paired: one value per round from two modes' values of that round (drift between rounds cancels), then
# the median over rounds. pair FILE_A FILE_B AWK_EXPR (a, b: the round's two values).
pair() { paste "$1" "$2" | awk "{a=\$1; b=\$2; print $3}" > "$tmp/pair"; median "$tmp/pair"; }
printf '\n| mode | pinned ops/s | pinned ratio | cross ops/s | cross ratio | hackbench s | hackbench ratio |\n|---|---|---|---|---|---|---|\n'
for mode in $modes; do
  q=$(median "$tmp/pinned.$mode"); x=$(median "$tmp/cross.$mode"); h=$(median "$tmp/hack.$mode")
  rq=$(pair "$tmp/pinned.$mode" "$tmp/pinned.none" 'a/b')
  rx=$(pair "$tmp/cross.$mode" "$tmp/cross.none" 'a/b')
  rh=$(pair "$tmp/hack.$mode" "$tmp/hack.none" 'b/a')
  printf '| %s | %.0f | %.3fx | %.0f | %.3fx | %.3f | %.3fx |\n' $mode "$q" "$rq" "$x" "$rx" "$h" "$rh"
done
echo "(medians of $rounds rounds; ratios to none are paired: each round's mode/none for ops/s, none/mode for hackbench seconds, then their median; higher is better)"

# keel against the floor of its own programs, paired by round: throughput ratio, and ns per event above
# the floor ((1/ops - 1/ops_floor) / events per op).
against_floor() {  # mode floor_mode events_tag
  has "$1" && has "$2" || return 0
  printf '| %s | %s |' "$1" "$2"
  for col in pinned cross; do
    local e r ns fl
    e=$(cat "$tmp/events.$3.$col")
    r=$(pair "$tmp/$col.$1" "$tmp/$col.$2" 'a/b')
    ns=$(pair "$tmp/$col.$1" "$tmp/$col.$2" "(1/a - 1/b) * 1e9 / $e")
    fl=$(pair "$tmp/$col.$2" "$tmp/$col.none" "(1/a - 1/b) * 1e9 / $e")
    printf ' %.2f | %.3fx | %.0f ns | %.0f ns |' "$e" "$r" "$ns" "$fl"
  done
  echo
}
printf '\n| mode | floor | pinned events/op | pinned ratio to floor | pinned above floor, per event | floor above none, per event | cross events/op | cross ratio to floor | cross above floor, per event | floor above none, per event |\n|---|---|---|---|---|---|---|---|---|---|\n'
against_floor keel floor keel
against_floor keel-stats floor keel
against_floor runqlat floor keel
[[ -n $before ]] && against_floor keel-before $floor_before before
# keel against keel-before directly, paired by round (when both attach the same programs, the same
# events per op): the change's own effect.
if [[ -n $before ]] && has keel && has keel-before && [[ $progs_before == "$progs_keel" ]]; then
  printf '\n| keel against keel-before | pinned ratio | pinned ns per event | cross ratio | cross ns per event |\n|---|---|---|---|---|\n|  |'
  for col in pinned cross; do
    e=$(cat "$tmp/events.keel.$col")
    printf ' %.3fx | %.0f ns |' "$(pair "$tmp/$col.keel" "$tmp/$col.keel-before" 'a/b')" \
      "$(pair "$tmp/$col.keel" "$tmp/$col.keel-before" "(1/a - 1/b) * 1e9 / $e")"
  done
  echo
fi
echo "keel's programs: $progs_keel"
[[ -n $before ]] && echo "keel-before's programs: $progs_before"
[[ -s $tmp/cost ]] && awk '{t+=$1; c+=$2} END {if (c) printf "keel BPF cost: %.0f ns per program run over %d runs (keel-stats rounds)\n", t/c, c}' "$tmp/cost"

# Memory: keel top's RSS and its maps as bpftool shows them (memlock: what the kernel charges for a
# map; task storage is charged per task, an element header plus the value, outside the map's figure),
# with the per-cgroup map's bytes per entry and how many entries are in use.
memory() {  # binary label
  "$1" top --bpf-stats off --interval 1 --count 3600 >/dev/null & local pid=$!
  sleep 1.5
  pinned >/dev/null
  sleep 1  # a read after the benchmark
  local ids
  ids=$(bpftool prog show 2>/dev/null | awk '/ name keel_/ {k=1} k && /map_ids/ {for (i=1;i<=NF;i++) if ($i=="map_ids") print $(i+1); k=0}' | tr ',' '\n' | sort -un)
  echo "$2: RSS $(awk '/VmRSS/ {printf "%.1f MiB", $2 / 1024}' /proc/$pid/status)"
  for id in $ids; do
    bpftool map show id "$id" 2>/dev/null | tr '\n' ' ' | awk '{
      for (i=1;i<=NF;i++) {if ($i=="name") n=$(i+1); if ($i=="value") v=$(i+1); if ($i=="max_entries") m=$(i+1); if ($i=="memlock") b=$(i+1)}
      t=$2; gsub("B","",b); printf "  map %-16s %-18s value %6s, %6d entries max, memlock %8.1f KiB", n, t, v, m, b/1024
      if (n == "cg_stats") printf " (%.0f B per entry)", b/m
      printf "\n"}'
    # Not `bpftool ... | grep -q`: grep's early exit kills bpftool, which pipefail turns into false.
    if [[ $(bpftool map show id "$id" 2>/dev/null) == *"name cg_stats"* ]]; then
      echo "    in use: $(bpftool map dump id "$id" 2>/dev/null | grep -c '"key":' || true) cgroups"
    fi
  done
  kill -INT $pid; wait $pid 2>/dev/null || true
}
echo
memory "$keel" keel
[[ -n $before ]] && memory "$before" keel-before
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
