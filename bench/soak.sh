#!/usr/bin/env bash
# keel run enforcing for a long time while cgroups churn around it: a critical waker, two best-effort
# hogs beside it, and rounds of 20 cgroups (half of them best-effort workloads keel acts on, half
# matched by nothing), each with a task that runs, made and removed every few seconds. Every interval
# it prints keel's RSS, open fds, mean tick time, BPF map entries and journal records, with ratios
# against the first interval of the same run (flat is 1.00x). Root; cgroup v1 (cpu, cpuacct, cpuset).
#   sudo bench/soak.sh [MINUTES (30)] [INTERVAL_S (60)]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
interval=${2:-60}
keel=$PWD/build/cli/keel
[[ -x $keel ]] || { echo "soak.sh: build keel first (scripts/build.sh)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "soak.sh: needs root" >&2; exit 1; }
cg=/sys/fs/cgroup
for c in cpu cpuacct cpuset; do
  [[ -d $cg/$c ]] || { echo "soak.sh: needs the cgroup v1 $c hierarchy at $cg/$c" >&2; exit 1; }
done
name=keel-soak-$$
work=$(mktemp -d /tmp/keel-soak.XXXXXX)
port=$((20000 + RANDOM % 20000))
pids=()
keel_pid=""

mk() {  # a cgroup in every hierarchy; its cpuset gets its parent's CPUs and nodes
  local rel=$1
  for c in cpu cpuacct cpuset; do mkdir -p "$cg/$c/$rel"; done
  cat "$cg/cpuset/$(dirname "$rel")/cpuset.mems" >"$cg/cpuset/$rel/cpuset.mems"
  for _ in 1 2 3 4 5; do
    cat "$cg/cpuset/$(dirname "$rel")/cpuset.cpus" >"$cg/cpuset/$rel/cpuset.cpus" 2>/dev/null && return 0
    sleep 0.01
  done
}
rm_cg() {
  local rel=$1
  for c in cpu cpuacct cpuset; do
    for _ in $(seq 50); do [[ -d $cg/$c/$rel ]] || break; rmdir "$cg/$c/$rel" 2>/dev/null || sleep 0.02; done
  done
}
run_in() {  # run_in REL CMD...: CMD in the cgroup REL of every hierarchy, in the background
  local rel=$1; shift
  (for c in cpu cpuacct cpuset; do echo $BASHPID >"$cg/$c/$rel/cgroup.procs"; done; exec "$@") &
  pids+=($!)
}
cleanup() {
  exec 2>/dev/null  # bash's "Killed" notices of the tasks stopped here
  [[ -n $keel_pid ]] && kill -TERM "$keel_pid" && wait "$keel_pid" || true
  for p in "${pids[@]}"; do kill -KILL "$p" || true; done
  # Every task still in the soak's cgroups (the churn's last round is not among $pids), then the
  # cgroups of every hierarchy (a round stopped half way leaves one made in some hierarchies only).
  for _ in 1 2 3; do
    for c in cpu cpuacct cpuset; do
      find "$cg/$c/$name" -name cgroup.procs -exec cat {} + | xargs -r kill -KILL || true
    done
    sleep 0.2
  done
  wait || true
  for c in cpu cpuacct cpuset; do
    for _ in 1 2 3 4 5; do
      [[ -d $cg/$c/$name ]] || break
      find "$cg/$c/$name" -depth -type d -exec rmdir {} + || sleep 0.2
    done
  done
  "$keel" restore --state "$work/state" >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for d in "$name" "$name/crit" "$name/be" "$name/be/noise" "$name/u"; do mk "$d"; done
run_in "$name/crit" stress-ng --cyclic 1 --cyclic-sleep 1000000 --quiet
run_in "$name/be/noise" stress-ng --cpu 2 --quiet
cat >"$work/keel.toml" <<EOF
[daemon]
mode = "enforce"
period = "1s"
state_dir = "$work/state"
hierarchy = "cpu"
metrics_listen = "127.0.0.1:$port"

[[workload]]
name = "crit"
match = { cgroup = "/$name/crit" }
class = "critical"
slo = { runqueue_p99 = "300us" }

[[workload]]
name = "be"
match = { cgroup = "/$name/be/*", each = true }
class = "best-effort"
EOF
"$keel" run --config "$work/keel.toml" >"$work/keel.log" 2>&1 &
keel_pid=$!
sleep 5
kill -0 "$keel_pid" || { cat "$work/keel.log"; exit 1; }

scrape() { curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null || python3 -c "
import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())"; }
value() { awk -v m="$1" '$1 == m || index($1, m "{") == 1 { print $2; exit }' <<<"$2"; }

# The churn, in the background: rounds of 20 cgroups with a light task each, 3 s alive. Its stderr
# (bash's "Killed" for each task it kills) goes to a file, not into the table.
(
  exec 2>>"$work/churn.err"
  n=0
  while :; do
    round=()
    for i in $(seq 20); do
      n=$((n + 1))
      if ((i % 2)); then rel=$name/be/w$n; else rel=$name/u/u$n; fi
      mk "$rel"
      (for c in cpu cpuacct cpuset; do echo $BASHPID >"$cg/$c/$rel/cgroup.procs"; done
       exec stress-ng --cpu 1 --cpu-load 2 --quiet) &
      round+=("$!:$rel")
    done
    sleep 3
    for r in "${round[@]}"; do kill -KILL "${r%%:*}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for r in "${round[@]}"; do rm_cg "${r#*:}"; done
    echo "$n" >"$work/churned"
  done
) &
pids+=($!)

printf '| minute | cgroups churned | RSS MiB | x first | fds | x first | tick ms | x first | map entries | journal records |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
first_rss="" first_fds="" first_tick=""
last_sum=0 last_count=0
end=$((SECONDS + minutes * 60))
i=0
while ((SECONDS < end)); do
  sleep "$interval"
  i=$((i + 1))
  kill -0 "$keel_pid" 2>/dev/null || { echo "keel exited:"; tail -50 "$work/keel.log"; exit 1; }
  m=$(scrape)
  rss=$(awk '/VmRSS/ {print $2 / 1024}' "/proc/$keel_pid/status")
  fds=$(ls "/proc/$keel_pid/fd" | wc -l)
  sum=$(value keel_tick_duration_seconds_sum "$m")
  count=$(value keel_tick_duration_seconds_count "$m")
  tick=$(python3 -c "print(f'{($sum - $last_sum) / max($count - $last_count, 1) * 1e3:.2f}')")
  last_sum=$sum last_count=$count
  entries=$(value keel_bpf_map_entries "$m")
  records=$(python3 -c "
import sys
try:
    print(sum(1 for l in open('$work/state/journal') if l[:1] in '+-'))
except FileNotFoundError:
    print(0)")
  churned=$(cat "$work/churned" 2>/dev/null || echo 0)
  [[ -z $first_rss ]] && first_rss=$rss first_fds=$fds first_tick=$tick
  printf '| %.1f | %s | %.1f | %.2fx | %s | %.2fx | %s | %.2fx | %s | %s |\n' \
    "$(python3 -c "print($i * $interval / 60)")" "$churned" "$rss" "$(python3 -c "print($rss / $first_rss)")" \
    "$fds" "$(python3 -c "print($fds / $first_fds)")" "$tick" "$(python3 -c "print($tick / max($first_tick, 1e-9))")" \
    "$entries" "$records"
done
errors=$(grep -c "error:" "$work/keel.log" || true)
echo
echo "keel log: $errors error lines"
grep "error:" "$work/keel.log" | head -5 || true
