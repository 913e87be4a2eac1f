#!/usr/bin/env bash
# keel's controller against the seeds' scenario, in one run: redis-server and its redis-benchmark client
# in a critical cgroup, NOISE_GROUPS best-effort cgroups ("containers") of stress-ng CPU hogs beside it.
#   (a) redis alone
#   (b) with the noise, no control (every cgroup as found: all CPUs, cpu.shares 1024)
#   (c) with the static pinning of seed 000, by hand: critical on CRIT_CPUS, noise on the rest, cpu.shares
#       2048 for every cgroup (the seed's docker --cpuset-cpus / --cpu-shares)
#   (c') (c)'s placement with keel observing (keel run --observe): what keel's sensing costs redis
#   (d) with keel enforcing (keel run, enforce mode) from the as-found state of (b)
#   (h) (d) plus a hog (stress-ng --cpu HOGS_TOP) in a top-level cgroup no workload declares
#   (e) (h) with actuators.isolate_unmanaged: keel keeps the hog off the CPUs it gives redis
# redis-benchmark: GET/SET, 256-byte values, CLIENTS connections, pipeline 1, REQUESTS requests per test
# per run, CYCLES runs in (c) and (d), BASE_RUNS in (a), (b) and (c'); p50/p99 from its --csv lines (mean over
# runs and tests, and the worst line's p99), throughput = all requests / time spent in them.
# (c) and (d) run a phased load: CYCLES cycles of CYCLE seconds each, the critical service idle for the
# first IDLE seconds of a cycle, then busy (one redis-benchmark run), then idle again until the cycle
# ends; the noise runs throughout. Best-effort work over the whole phased window: CPU seconds of the
# best-effort cgroups (cpuacct.usage) and stress-ng bogo ops; CPUs they used while redis was busy and
# while it was idle. keel's decision log of (d) is summed up under the table (KEEL_LOG=F keeps it).
# Each busy spell of (c), (d), (h), (e) opens with a short GET run (FIRST_REQUESTS requests, about a
# second), reported apart as "first second"; reaction times are polled (every 20 ms, no fork): from the
# noise's start to redis protected from the noise (each noise cgroup in the preemption class or off
# redis's CPUs), and from each busy spell's start to redis protected from everything that competes with
# it (the noise so, and in (h) and (e) the hog off redis's CPUs).
# Every cgroup and process it creates is removed on exit (also on failure and Ctrl-C); keel is stopped
# with SIGTERM and its knobs are checked to be back. Needs root, cgroup v1 cpu, cpuacct and cpuset.
# Two more scenarios, run only when named (issue 27): (g) static pinning against keel in short phased
# windows, per run, window and SLO (GB_RUNS GB_WINDOWS GB_SLOS GB_CHUNK; GB_KEELS="before:OLD after:NEW"
# runs two builds over one static baseline); (w) what redis's weight adds on top of the class (W_ROUNDS
# W_SECONDS). `SCENARIOS="w g" NOISE_GROUPS=4` is the issue's measurement.
# Usage: sudo bench/controller.sh   (env: CYCLES CYCLE IDLE BASE_RUNS REQUESTS CLIENTS NOISE_GROUPS NOISE_HOGS
#        PERIOD SLO CRIT_CPUS KEEL FIRST_REQUESTS HOGS_TOP SCENARIOS="a b c o d h e")
set -euo pipefail
cd "$(dirname "$0")/.."
keel=${KEEL:-build/cli/keel}
cycles=${CYCLES:-2}
cycle=${CYCLE:-50}        # seconds per cycle of the phased load
idle=${IDLE:-15}          # idle seconds at the start of each cycle (the rest after the run is idle too)
base_runs=${BASE_RUNS:-1} # runs of (a) and (b), back to back
requests=${REQUESTS:-200000}  # per test (SET, GET) per run
clients=${CLIENTS:-10}
groups_n=${NOISE_GROUPS:-3}
hogs=${NOISE_HOGS:-2}
period=${PERIOD:-500ms}
slo=${SLO:-300us}
crit_cpus=${CRIT_CPUS:-0}  # static pinning: the critical cgroup's CPUs (keel's planner picks the lowest core too)
scenarios=${SCENARIOS:-a b c o d h e}
first_requests=${FIRST_REQUESTS:-60000}  # the GET run that opens each busy spell ("first second")
hogs_top=${HOGS_TOP:-2}  # CPU hogs in the undeclared top-level cgroup of (h), (e): one per CPU here
cpu_method=int64           # one fixed stress-ng method, so bogo ops compare across scenarios

[[ $(id -u) -eq 0 ]] || { echo "needs root (cgroups, BPF)" >&2; exit 1; }
for t in redis-server redis-benchmark stress-ng; do command -v $t >/dev/null || { echo "missing $t" >&2; exit 1; }; done
[[ -x $keel ]] || { echo "build keel first: scripts/build.sh release" >&2; exit 1; }
cg=/sys/fs/cgroup
hier="cpu cpuacct cpuset"
for h in $hier; do
  grep -q " $cg/$h cgroup .*\b$h\b" /proc/mounts || { echo "needs cgroup v1 $h mounted at $cg/$h" >&2; exit 1; }
done

tmp=$(mktemp -d)
base=keel-bench-$$
all_cpus=$(cat $cg/cpuset/cpuset.cpus)
keel_pid=0
redis_pid=0
made=()  # cgroups created, relative to each hierarchy's root, parents first

log() { echo "controller.sh: $*" >&2; }

procs_of() { cat "$cg/$1/$2/cgroup.procs" 2>/dev/null || true; }  # procs_of HIERARCHY CGROUP

stop_keel() {
  [[ $keel_pid -ne 0 ]] || return 0
  kill -TERM $keel_pid 2>/dev/null || true
  wait $keel_pid 2>/dev/null || true
  keel_pid=0
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_keel
  # Every process in our cgroups: ours (redis-server, redis-benchmark, stress-ng and their children).
  local i sig pids
  for sig in TERM TERM KILL; do
    pids=""
    for ((i = ${#made[@]} - 1; i >= 1; i--)); do pids+=" $(procs_of cpu "${made[i]}")"; done
    pids=$(echo $pids)
    [[ -z $pids ]] && break
    kill -$sig $pids 2>/dev/null || true
    sleep 1
  done
  wait 2>/dev/null || true
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do
    for h in $hier; do
      [[ -d $cg/$h/${made[i]} ]] && { rmdir "$cg/$h/${made[i]}" 2>/dev/null || log "could not remove $cg/$h/${made[i]}"; }
    done
  done
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkcg() {  # mkcg NAME: a cgroup in cpu, cpuacct and cpuset; cpuset with every CPU and the root's mems
  for h in $hier; do mkdir "$cg/$h/$1"; done
  made+=("$1")
  cat $cg/cpuset/cpuset.mems > "$cg/cpuset/$1/cpuset.mems"
  echo "$all_cpus" > "$cg/cpuset/$1/cpuset.cpus"
}
# run_in NAME CMD...: this (sub)shell joins the cgroup NAME (under $base) of all three hierarchies and
# becomes CMD (its children inherit). Call it as `run_in ... &` or `(run_in ...) &`, never plainly.
run_in() {
  local name=$1; shift
  for h in $hier; do echo $BASHPID > "$cg/$h/$base/$name/cgroup.procs"; done
  exec "$@"
}
run_top() {  # run_top NAME CMD...: the same for a top-level cgroup NAME
  local name=$1; shift
  for h in $hier; do echo $BASHPID > "$cg/$h/$name/cgroup.procs"; done
  exec "$@"
}
set_knobs() {  # set_knobs NAME CPUS SHARES
  echo "$2" > "$cg/cpuset/$base/$1/cpuset.cpus"
  echo "$3" > "$cg/cpu/$base/$1/cpu.shares"
}
be_names() { local i; for ((i = 1; i <= groups_n; i++)); do echo be$i; done; }
be_usage_ns() { local t=0 n; for n in $(be_names); do t=$((t + $(cat "$cg/cpuacct/$base/$n/cpuacct.usage"))); done; echo $t; }
now() { echo "$EPOCHREALTIME"; }
sleep_until() { local d; d=$(awk -v t="$1" -v n="$EPOCHREALTIME" 'BEGIN {d = t - n; print (d > 0 ? d : 0)}'); sleep "$d" & wait $!; }

mkcg $base
mkcg $base/redis
for n in $(be_names); do mkcg $base/$n; done
hog_cg=$base-hog  # top level, beside $base: no workload declares it
mkcg $hog_cg

# redis-server on a free port of 127.0.0.1, in the critical cgroup.
port=16379
while (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
run_in redis redis-server --bind 127.0.0.1 --port $port --save "" --appendonly no --daemonize no --logfile "$tmp/redis.log" &
redis_pid=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
(exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null || { log "redis-server did not come up"; exit 1; }

noise_pids=()
start_noise() {  # $1 = tag for the metrics files; $2 = yes: the top-level hog too
  noise_pids=()
  local n
  for n in $(be_names); do
    run_in $n stress-ng --cpu $hogs --cpu-method $cpu_method --metrics-brief > "$tmp/noise.$1.$n" 2>&1 &
    noise_pids+=($!)
  done
  if [[ ${2:-no} == yes ]]; then
    run_top $hog_cg stress-ng --cpu $hogs_top --cpu-method $cpu_method --metrics-brief > "$tmp/hog.$1" 2>&1 &
    noise_pids+=($!)
  fi
}

# Reaction: polled without forking (reads with bash builtins, the wait a read on a FIFO that never
# gets data), so the watcher costs redis next to nothing.
mkfifo "$tmp/never"
exec {never_fd}<>"$tmp/never"
expand() {  # expand LIST: the CPUs of a cpuset list into the array CPUS
  local r a b x IFS=,
  CPUS=()
  for r in $1; do
    if [[ $r == *-* ]]; then a=${r%-*}; b=${r#*-}; for ((x = a; x <= b; x++)); do CPUS+=("$x"); done; else CPUS+=("$r"); fi
  done
}
disjoint() {  # disjoint LIST LIST
  local -a first
  local x y
  expand "$1"; first=("${CPUS[@]}"); expand "$2"
  for x in "${first[@]}"; do for y in "${CPUS[@]}"; do [[ $x == "$y" ]] && return 1; done; done
  return 0
}
read -ra be_list <<< "$(be_names | tr '\n' ' ')"
protected() {  # redis protected from the noise and (with $1 = yes) the hog
  local rc v n
  read -r rc < "$cg/cpuset/$base/redis/cpuset.cpus"
  for n in "${be_list[@]}"; do
    v=0; [[ -f $cg/cpu/$base/$n/cpu.idle ]] && read -r v < "$cg/cpu/$base/$n/cpu.idle"
    [[ $v == 1 ]] && continue
    read -r v < "$cg/cpuset/$base/$n/cpuset.cpus"
    disjoint "$rc" "$v" || return 1
  done
  if [[ $1 == yes ]]; then read -r v < "$cg/cpuset/$hog_cg/cpuset.cpus"; disjoint "$rc" "$v" || return 1; fi
  return 0
}
watch_pid=0
watch_start() {  # watch_start FILE HOG: in the background, the ms until protected() holds, into FILE
  local file=$1 hog=$2
  (
    t0=$EPOCHREALTIME
    while ! protected "$hog"; do read -rt 0.02 -u $never_fd _ || true; done
    t1=$EPOCHREALTIME
    echo $(( (${t1/./} - ${t0/./}) / 1000 )) > "$file"
  ) &
  watch_pid=$!
}
watch_stop() {  # the watcher gives up when the spell ends unprotected ("-" in the table)
  [[ $watch_pid -ne 0 ]] || return 0
  kill $watch_pid 2>/dev/null || true
  wait $watch_pid 2>/dev/null || true
  watch_pid=0
}
stop_noise() {  # SIGINT: stress-ng stops its hogs and prints its metrics
  kill -INT "${noise_pids[@]}" 2>/dev/null || true
  watch_stop
  wait "${noise_pids[@]}" 2>/dev/null || true
  noise_pids=()
}
bogo_ops() { cat "$tmp"/noise.$1.* | awk '/metrc:.* cpu +[0-9]/ {for (i = 1; i <= NF; i++) if ($i == "cpu") {t += $(i+1); break}} END {print t+0}'; }

bench_first() {  # bench_first TAG: the short GET run that opens a busy spell, its CSV and seconds kept
  local s0=$EPOCHREALTIME s1
  (run_in redis redis-benchmark -h 127.0.0.1 -p $port -t get -d 256 -c $clients -P 1 -n $first_requests --csv \
    > "$tmp/rb1.$1" 2>/dev/null) &
  wait $!
  s1=$EPOCHREALTIME
  echo "$(( (${s1/./} - ${s0/./}) / 1000 ))" > "$tmp/rb1s.$1"
}
bench_run() {  # bench_run TAG: one redis-benchmark run in the critical cgroup, its CSV kept
  (run_in redis redis-benchmark -h 127.0.0.1 -p $port -t set,get -d 256 -c $clients -P 1 -n $requests --csv \
    > "$tmp/rb.$1" 2>/dev/null) &
  wait $!  # in the background so that a signal to this script is handled at once
  log "  $1: $(tr -d '"' < "$tmp/rb.$1" | awk -F, '$1 != "test" {printf "%s %.0f req/s p50 %s p99 %s ms; ", $1, $2, $5, $7}')"
}

# keel's config: the critical cgroup and the best-effort ones, as the issue's example.
cat > "$tmp/keel.toml" <<EOF
[daemon]
mode = "enforce"
period = "$period"
state_dir = "$tmp/state"
hierarchy = "cpu"

[[workload]]
name = "redis"
match = { cgroup = "/$base/redis" }
class = "critical"
slo = { runqueue_p99 = "$slo" }

[[workload]]
name = "noise"
match = { cgroup = "/$base/be*", each = true }
class = "best-effort"
EOF
{ cat "$tmp/keel.toml"; printf '\n[actuators]\nisolate_unmanaged = true\n'; } > "$tmp/keel-isolate.toml"
for f in keel keel-isolate; do
  "$keel" check-config "$tmp/$f.toml" > "$tmp/check" 2>&1 || { cat "$tmp/check" >&2; exit 1; }
done

# scenario TAG PHASED NOISE [HOG]: the benchmark runs of one scenario, phased (c, d, h, e) or back to back.
# be.TAG: best-effort CPU-s and seconds over the window, the same while redis was busy, then bogo ops.
scenario() {
  local tag=$1 phased=$2 noise=$3 hog=${4:-no} c t0 u0 u1 t1 b0 b1 s0 s1 runs=$cycles busy_ns=0 busy_s=0
  [[ $phased == yes ]] || runs=$base_runs
  log "($tag)"
  if [[ $noise == yes ]]; then
    [[ $phased == yes ]] && watch_start "$tmp/react.$tag.noise" no  # the noise's start: the hog is judged per spell
    start_noise $tag $hog
    sleep 1  # hogs dispatched
  fi
  t0=$(now); u0=$(be_usage_ns)
  for ((c = 0; c < runs; c++)); do
    [[ $phased == yes ]] && sleep_until "$(awk -v t=$t0 -v c=$c -v l=$cycle -v i=$idle 'BEGIN {printf "%.6f", t + c * l + i}')"
    s0=$(now); b0=$(be_usage_ns)
    if [[ $phased == yes ]]; then
      watch_stop
      watch_start "$tmp/react.$tag.$c" $hog
      bench_first $tag.$c
    fi
    bench_run $tag.$c
    watch_stop
    b1=$(be_usage_ns); s1=$(now)
    busy_ns=$((busy_ns + b1 - b0)); busy_s=$(awk -v a=$busy_s -v s=$s0 -v e=$s1 'BEGIN {printf "%.6f", a + e - s}')
  done
  [[ $phased == yes ]] && sleep_until "$(awk -v t=$t0 -v l=$cycle -v n=$cycles 'BEGIN {printf "%.6f", t + n * l}')"
  u1=$(be_usage_ns); t1=$(now)
  [[ $noise == yes ]] && stop_noise
  awk -v a=$u0 -v b=$u1 -v s=$t0 -v e=$t1 -v bn=$busy_ns -v bs=$busy_s \
    'BEGIN {printf "%.3f %.3f %.3f %.3f\n", (b - a) / 1e9, e - s, bn / 1e9, bs}' > "$tmp/be.$tag"
  if [[ $noise == yes ]]; then bogo_ops $tag >> "$tmp/be.$tag"; else echo 0 >> "$tmp/be.$tag"; fi
}

start_keel() {  # start_keel TAG CONFIG [--observe]: keel run, its log in keel.TAG
  local tag=$1 config=$2; shift 2
  "$keel" run --config "$config" "$@" 2> "$tmp/keel.$tag" &
  keel_pid=$!
  for _ in $(seq 100); do grep -q 'keel: run: \(enforce\|observe\)' "$tmp/keel.$tag" && break; sleep 0.1; done
  grep -q 'keel: run: \(enforce\|observe\)' "$tmp/keel.$tag" || { cat "$tmp/keel.$tag" >&2; log "keel did not start"; exit 1; }
}

reset_knobs() {
  set_knobs redis "$all_cpus" 1024
  local n; for n in $(be_names); do set_knobs $n "$all_cpus" 1024; done
}
knobs_as_found() {  # every cgroup back at all CPUs and 1024 shares
  local n bad=0
  for n in redis $(be_names); do
    local c s
    c=$(cat "$cg/cpuset/$base/$n/cpuset.cpus"); s=$(cat "$cg/cpu/$base/$n/cpu.shares")
    [[ $c == "$all_cpus" && $s == 1024 ]] || { log "$n left at cpus $c shares $s"; bad=1; }
  done
  return $bad
}

rest=$(awk -v all="$all_cpus" -v c="$crit_cpus" 'function add(l, v,  n, r, i, ab, x) {
    n = split(l, r, ","); for (i = 1; i <= n; i++) if (split(r[i], ab, "-") == 2) { for (x = ab[1]; x <= ab[2]; x++) A[x] = v } else A[r[i]] = v }
  BEGIN { add(all, 1); add(c, 0); s = ""; for (x = 0; x < 8192; x++) if (A[x] == 1) s = s (s == "" ? "" : ",") x; print s }')
[[ -n $rest ]] || { log "CRIT_CPUS=$crit_cpus leaves no CPU for the noise"; exit 2; }
static_pin() {
  set_knobs redis "$crit_cpus" 2048
  local n; for n in $(be_names); do set_knobs $n "$rest" 2048; done
  log "static: redis on CPUs $crit_cpus, noise on $rest, cpu.shares 2048 everywhere"
}

# ---- (g) give-back follows load (issue 27) and (w) weights under the class ----
# (g): per run (GB_RUNS of them), per phased window (GB_WINDOWS, "BUSY/IDLExCYCLES" in seconds), the
# static pinning of (c) and then keel (enforce) at each SLO of GB_SLOS, each over the same window: redis
# busy BUSY s (back-to-back redis-benchmark runs of GB_CHUNK requests per test), idle IDLE s, CYCLES
# times; the noise runs throughout. Reported per run: best-effort CPU-s keel / static, redis p99 keel /
# static (every request of the busy spells pooled), and the most direction changes any one knob made in one
# busy/idle cycle (from keel's log, timestamped as it is written).
gb_runs=${GB_RUNS:-3}
gb_windows=${GB_WINDOWS:-3/3x4 10/10x2}
gb_slos=${GB_SLOS:-100us 500us}
gb_chunk=${GB_CHUNK:-10000}
gb_keels=${GB_KEELS:-keel:$keel}  # LABEL:BINARY ...: each keel over the same static baseline (before:OLD after:NEW)
gb_rows=()
gb_config() {  # gb_config SLO FILE
  sed "s/^slo = { runqueue_p99 = \".*\" }/slo = { runqueue_p99 = \"$1\" }/" "$tmp/keel.toml" > "$2"
}
bench_until() {  # bench_until END PREFIX: redis-benchmark runs of GB_CHUNK requests back to back until END (the one
  # running then is cut off: a test it had not finished counts nothing), output in PREFIX.K
  local k=0 rem
  while rem=$(awk -v e=$1 -v n="$EPOCHREALTIME" 'BEGIN {r = e - n; if (r < 0.01) exit 1; printf "%.3f", r}'); do
    (run_in redis timeout -s INT $rem redis-benchmark -h 127.0.0.1 -p $port -t set,get -d 256 -c $clients -P 1 \
      -n $gb_chunk --precision 3 > "$2.$k" 2>/dev/null) &
    wait $! || true
    k=$((k + 1))
  done
}
rb_tests() {  # rb_tests FILE...: per test redis-benchmark finished, "TEST req/s p50 p99" (ms), from its summary
  cat "$@" | tr '\r' '\n' | awk '/^====== / {t = $2} /throughput summary:/ {r = $3}
    /^ +avg +min +p50/ {getline; if (t != "") print t, r, $3, $5; t = ""}'
}
pooled_p99() {  # pooled_p99 FILE...: the p99 (ms) of all their tests' requests pooled: each test's cumulative
  # counts by latency (both of redis-benchmark's tables), linear between them, summed over the tests
  local pts=$tmp/pooled.pts
  cat "$@" | tr '\r' '\n' | awk '/^====== / {run++} /cumulative count/ && run {c = $NF; sub(/\)/, "", c); print run, $3, c}' |
    sort -k1,1n -k2,2g > "$pts"
  [[ -s $pts ]] || { echo nan; return; }
  sort -k2,2g "$pts" | awk '
    function at(r, x,   k) {
      if (x < L[r, 1]) return 0
      for (k = p[r] ? p[r] : 1; k < n[r] && L[r, k + 1] <= x; k++) ;
      p[r] = k
      if (k == n[r] || L[r, k + 1] == L[r, k]) return C[r, k]
      return C[r, k] + (C[r, k + 1] - C[r, k]) * (x - L[r, k]) / (L[r, k + 1] - L[r, k])
    }
    NR == FNR {k = ++n[$1]; L[$1, k] = $2; C[$1, k] = (k > 1 && C[$1, k - 1] > $3) ? C[$1, k - 1] : $3; next}
    FNR == 1 {for (r in n) N += C[r, n[r]]; want = 0.99 * N}
    {x = $2; F = 0; for (r in n) F += at(r, x)
     if (F >= want) {printf "%.4f\n", (FNR == 1 || F == pF) ? x : pX + (want - pF) * (x - pX) / (F - pF); found = 1; exit}
     pX = x; pF = F}
    END {if (!found) print "nan"}' "$pts" -
}
gb_window() {  # gb_window TAG BUSY IDLE CYCLES: one phased window; gb.TAG: BE CPU-s, window s; cyc.TAG: cycle starts
  local tag=$1 b=$2 i=$3 n=$4 c t0 u0 u1 t1 end
  start_noise $tag
  sleep 1
  : > "$tmp/cyc.$tag"
  t0=$(now); u0=$(be_usage_ns)
  for ((c = 0; c < n; c++)); do
    echo "$(awk -v t=$t0 -v c=$c -v l=$((b + i)) 'BEGIN {printf "%.6f", t + c * l}')" >> "$tmp/cyc.$tag"
    end=$(awk -v t=$t0 -v c=$c -v l=$((b + i)) -v b=$b 'BEGIN {printf "%.6f", t + c * l + b}')
    bench_until $end "$tmp/gbrb.$tag.$c"
    sleep_until "$(awk -v t=$t0 -v c=$c -v l=$((b + i)) 'BEGIN {printf "%.6f", t + (c + 1) * l}')"
  done
  u1=$(be_usage_ns); t1=$(now)
  stop_noise
  awk -v a=$u0 -v b=$u1 -v s=$t0 -v e=$t1 'BEGIN {printf "%.3f %.3f\n", (b - a) / 1e9, e - s}' > "$tmp/gb.$tag"
  echo "$(pooled_p99 "$tmp"/gbrb.$tag.*) $(rb_tests "$tmp"/gbrb.$tag.* | awk '{k++; if ($4 > w) w = $4} END {printf "%.3f %d", w, k}')" >> "$tmp/gb.$tag"
}
gb_flips() {  # gb_flips LOG CYCLES_FILE: the most direction changes of one knob within one cycle
  awk 'NR == FNR {starts[++n] = $1; next}
    function size(v,  k, r, i, ab) {
      if (v ~ /[,-]/) {k = split(v, r, ","); t = 0; for (i = 1; i <= k; i++) t += split(r[i], ab, "-") == 2 ? ab[2] - ab[1] + 1 : 1; return t}
      return v + 0 }
    $6 == "wrote" {
      c = 0; for (i = 1; i <= n; i++) if ($1 >= starts[i]) c = i
      if (c == 0) next
      path = $7; from = $8; to = $10; gsub(/"/, "", from); gsub(/"/, "", to)
      d = size(to) > size(from) ? 1 : size(to) < size(from) ? -1 : 0
      if (d == 0) next
      key = c SUBSEP path
      if ((key in last) && last[key] != d) { f[key]++; if (f[key] > m) m = f[key] }
      last[key] = d
    }
    END {print m + 0}' "$2" "$1"
}
gb_run() {  # gb_run RUN
  local r=$1 win w b i n slo tag kb lab bin
  for win in $gb_windows; do
    b=${win%%/*}; i=${win#*/}; i=${i%%x*}; n=${win##*x}; w=${win//\//-}
    for kb in $gb_keels; do
      lab=${kb%%:*}; bin=${kb#*:}
      for slo in $gb_slos; do
        # Its own static baseline right before it: the VM drifts over minutes (a baseline taken
        # once per window and compared with four keel windows after it put the last ones 1.2-1.5x off).
        static_pin; log "(g) run $r window $win: static"; gb_window s.$r.$w $b $i $n; reset_knobs
        tag=k.$lab.$r.$w.$slo
        gb_config $slo "$tmp/keel.$slo.toml"
        log "(g) run $r window $win: keel $lab, SLO $slo"
        "$bin" run --config "$tmp/keel.$slo.toml" 2> >(while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done > "$tmp/keel.$tag") &
        keel_pid=$!
        sleep 2
        gb_window $tag $b $i $n
        stop_keel
        sleep 0.5
        grep -q 'run: stopped' "$tmp/keel.$tag" || { cat "$tmp/keel.$tag" >&2; log "keel did not report its restore"; exit 1; }
        knobs_as_found || { log "keel left knobs changed"; exit 1; }
        [[ -n ${KEEL_LOG:-} ]] && cp "$tmp/keel.$tag" "$KEEL_LOG.$tag"
        gb_rows+=("$r $win $slo $lab $(tr '\n' ' ' < "$tmp/gb.s.$r.$w") $(tr '\n' ' ' < "$tmp/gb.$tag") $(gb_flips "$tmp/keel.$tag" "$tmp/cyc.$tag") $(grep -c ' enforce give-back ' "$tmp/keel.$tag" || true) $(grep -c ' enforce revert ' "$tmp/keel.$tag" || true) $(grep -c ' early: .* kept under ' "$tmp/keel.$tag" || true)")
      done
    done
  done
}
gb_table() {
  echo "| run | window (busy/idle x cycles) | SLO | keel | best-effort CPU-s static | keel | keel / static | redis p99 ms static | keel | keel / static | worst p99 ms static / keel | most direction changes of a knob in a cycle | give-back / revert lines | demand-watch early ticks |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  local row
  for row in "${gb_rows[@]}"; do
    echo "$row" | awk '{printf "| %s | %s | %s | %s | %.1f | %.1f | %.2fx | %.3f | %.3f | %.2fx | %.3f / %.3f | %d | %d / %d | %d |\n",
      $1, $2, $3, $4, $5, $10, $10 / $5, $7, $12, $12 / $7, $8, $13, $15, $16, $17, $18}'
  done
  echo "(best-effort CPU-s: cpuacct.usage of the $groups_n noise cgroups over the window; p99: every request of the $gb_chunk-request SET and GET runs back to back while busy, pooled (redis-benchmark's cumulative counts by latency), the one running at the end of a busy spell cut off; worst: the highest p99 of one run and test; keel period $period)"
}
# (w): the class alone (every noise cgroup in cpu.idle, all CPUs everywhere), redis's cpu.shares 1024
# against the largest (262144), alternated W_ROUNDS times for W_SECONDS each: what weights add on top of the class.
w_rounds=${W_ROUNDS:-3}
w_seconds=${W_SECONDS:-8}
w_test() {
  local r sh n
  start_noise w
  sleep 1
  for n in $(be_names); do echo 1 > "$cg/cpu/$base/$n/cpu.idle"; done
  for ((r = 0; r < w_rounds; r++)); do
    for sh in 1024 262144; do
      echo $sh > "$cg/cpu/$base/redis/cpu.shares"
      bench_until "$(awk -v n="$EPOCHREALTIME" -v s=$w_seconds 'BEGIN {printf "%.6f", n + s}')" "$tmp/wrb.$sh.$r"
    done
  done
  for n in $(be_names); do echo 0 > "$cg/cpu/$base/$n/cpu.idle"; done
  stop_noise
  echo 1024 > "$cg/cpu/$base/redis/cpu.shares"
  echo "| redis cpu.shares (noise in cpu.idle) | round | redis p99 ms | worst p99 ms | req/s |"
  echo "|---|---|---|---|---|"
  for ((r = 0; r < w_rounds; r++)); do
    for sh in 1024 262144; do
      rb_tests "$tmp"/wrb.$sh.$r.* | awk -v sh=$sh -v r=$((r + 1)) -v p="$(pooled_p99 "$tmp"/wrb.$sh.$r.*)" '{k++; q += $2; if ($4 > w) w = $4}
        END {printf "| %d | %d | %.3f | %.3f | %.0f |\n", sh, r, p, w, q / k}'
    done
  done
  for sh in 1024 262144; do
    echo "redis cpu.shares $sh with the class: p99 $(pooled_p99 "$tmp"/wrb.$sh.*) ms (pooled over $(rb_tests "$tmp"/wrb.$sh.* | wc -l) runs x tests)"
  done
}

reset_knobs
for s in $scenarios; do
  case $s in
    a) scenario a no no ;;
    b) scenario b no yes ;;
    c) static_pin; scenario c yes yes; reset_knobs ;;
    o)  # (c)'s placement, unphased, with keel observing: what keel's sensing costs redis
      static_pin; start_keel o "$tmp/keel.toml" --observe; scenario o no yes; stop_keel; reset_knobs ;;
    d | h | e)
      config=$tmp/keel.toml hog=no
      [[ $s == d ]] || hog=yes
      [[ $s == e ]] && config=$tmp/keel-isolate.toml
      start_keel $s "$config"
      sleep 2  # keel running before the noise starts, as on a host it already watches (its first tick is a period in)
      scenario $s yes yes $hog
      stop_keel
      grep -q 'run: stopped' "$tmp/keel.$s" || { cat "$tmp/keel.$s" >&2; log "keel did not report its restore"; exit 1; }
      knobs_as_found || { log "keel left knobs changed"; exit 1; }
      [[ $(cat "$cg/cpuset/$hog_cg/cpuset.cpus") == "$all_cpus" ]] || { log "keel left the hog's cgroup changed"; exit 1; }
      [[ -n ${KEEL_LOG:-} ]] && cp "$tmp/keel.$s" "$KEEL_LOG.$s"
      ;;
    g) for ((r = 1; r <= gb_runs; r++)); do gb_run $r; done ;;
    w) w_test > "$tmp/w.table" ;;
    *) log "unknown scenario $s"; exit 2 ;;
  esac
done

# The table.
label() {
  case $1 in
    a) echo "(a) redis alone" ;;
    b) echo "(b) + noise, no control" ;;
    c) echo "(c) + noise, static pinning (seed 000)" ;;
    o) echo "(c') = (c) with keel observing" ;;
    d) echo "(d) + noise, keel enforce" ;;
    h) echo "(h) = (d) + a hog in an undeclared top-level cgroup" ;;
    e) echo "(e) = (h) with isolate_unmanaged" ;;
  esac
}
echo
is_phased() { [[ $1 == c || $1 == d || $1 == h || $1 == e ]]; }
# first_second TAG: p99 of the first-second GET runs (mean over spells, worst) and their mean length.
first_second() {
  is_phased $1 || { echo "- - -"; return; }
  cat "$tmp"/rb1.$1.* | tr -d '"' | awk -F, -v ms="$(cat "$tmp"/rb1s.$1.* | tr '\n' ' ')" '
    $1 == "test" {next} {k++; p += $7; if ($7 > w) w = $7}
    END {n = split(ms, m, " "); for (i = 1; i <= n; i++) t += m[i]; printf "%.3f %.3f %.2f\n", p / k, w, t / n / 1000}'
}
reaction() {  # reaction TAG: "noise N ms; spells A, B ms" ("-": not protected within the spell)
  local out="" f c
  is_phased $1 || { echo "-"; return; }
  f=$tmp/react.$1.noise; out="noise $([[ -f $f ]] && cat "$f" || echo -) ms; spells"
  for ((c = 0; c < cycles; c++)); do f=$tmp/react.$1.$c; out+=" $([[ -f $f ]] && cat "$f" || echo -)"; done
  echo "$out ms"
}
classic=$(echo " $scenarios " | tr ' ' '\n' | grep -E '^[abcodhe]$' | tr '\n' ' ' || true)
[[ " $scenarios " == *" g "* ]] && { echo "(g) give-back follows load, one row per run, window and SLO:"; gb_table; echo; }
[[ -f $tmp/w.table ]] && { echo "(w) weights on top of the class:"; cat "$tmp/w.table"; echo; }
[[ -n ${classic// /} ]] || exit 0
echo "| scenario | p50 ms | p99 ms | worst p99 ms | first-second p99 ms (worst) | req/s | best-effort CPU-s | best-effort CPUs, redis busy | best-effort CPUs, redis idle | best-effort bogo ops | reaction |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for s in $classic; do
  cat "$tmp"/rb.$s.* | tr -d '"' | awk -F, -v n=$requests -v lab="$(label $s)" -v be="$(tr '\n' ' ' < "$tmp/be.$s")" \
    -v phased=$(is_phased $s && echo 1 || echo 0) -v noise=$([[ $s == a ]] && echo 0 || echo 1) \
    -v first="$(first_second $s)" -v react="$(reaction $s)" '
    $1 == "test" {next}
    {k++; p50 += $5; p99 += $7; if ($7 > w) w = $7; secs += n / $2}
    END {
      split(be, b, " ")  # window CPU-s, window s, busy CPU-s, busy s, bogo ops
      split(first, f, " ")
      cpu = ops = idle = "-"; busy = noise ? sprintf("%.2f", b[3] / b[4]) : "-"
      fs = f[1] == "-" ? "-" : sprintf("%s (%s)", f[1], f[2])
      if (phased) {cpu = sprintf("%.1f", b[1]); idle = sprintf("%.2f", (b[1] - b[3]) / (b[2] - b[4])); ops = b[5]}
      printf "| %s | %.3f | %.3f | %.3f | %s | %.0f | %s | %s | %s | %s | %s |\n", lab, p50 / k, p99 / k, w, fs, k * n / secs, cpu, busy, idle, ops, react
    }'
done
echo
for s in $scenarios; do
  is_phased $s && echo "first second of the busy spells in ($s): $(first_second $s | awk '{printf "%s s of GETs on average", $3}')"
done
echo
# The issue's targets, as ratios to (c) in this run.
if [[ -f $tmp/be.c ]]; then
  p99_of() { cat "$tmp"/rb.$1.* | tr -d '"' | awk -F, '$1 != "test" {k++; p += $7} END {printf "%.4f", p / k}'; }
  for s in d h e; do
    [[ -f $tmp/be.$s ]] || continue
    echo "($s) / (c): p99 $(awk -v a=$(p99_of $s) -v b=$(p99_of c) 'BEGIN {printf "%.2fx", a / b}'), first-second p99 $(awk -v a="$(first_second $s)" -v b="$(first_second c)" 'BEGIN {split(a, x, " "); split(b, y, " "); printf "%.2fx", x[1] / y[1]}')"
  done
fi
for s in d h e; do
  [[ -f $tmp/be.c && -f $tmp/be.$s ]] || continue
  paste -d' ' <(tr '\n' ' ' < "$tmp/be.c") <(tr '\n' ' ' < "$tmp/be.$s") | awk -v s=$s '{
    printf "best-effort work, keel (%s) / static (c): CPU-s %.2fx, bogo ops %.2fx (phased windows %.1f s and %.1f s; redis busy %.1f s and %.1f s of them)\n", s, $6 / $1, $10 / $5, $2, $7, $4, $9 }'
done
for s in d h e; do
  [[ -f $tmp/keel.$s ]] || continue
  awk -v base="$base" '
    $5 == "act" {a++} $5 == "give-back" {g++} $5 == "revert" {r++} $4 == "early:" && $5 != "done" {e++}
    $2 == "tick" {t = $3 + 0}
    $5 == "wrote" && index($6, base "/redis/cpuset.cpus") {if (ded) held += t - since; ded = ($NF != all); since = t}
    / status / && / VIOLATED/ {v++; if (match($0, /, [0-9]+ waits/) && substr($0, RSTART + 2, RLENGTH - 8) + 0 < 50) vi++}
    END {
      if (ded) held += t - since
      printf "keel in (%s): last decision logged at tick %d; redis held a dedicated CPU for %d ticks; %d act, %d give-back, %d revert decision lines; %d early ticks; %d violation episodes, %d of them declared on a tick with fewer than 50 run-queue waits of redis (idle)\n", s, t, held, a, g, r, e, v, vi
    }' all="$all_cpus" s=$s "$tmp/keel.$s"
  grep -o 'run: stopped.*' "$tmp/keel.$s"
done
echo "(p50/p99: redis-benchmark --csv per run and test, mean over runs x {SET, GET} of $requests requests each: $base_runs run(s) in (a), (b), (c'), $cycles in (c), (d); -c $clients -P 1 -d 256."
echo " (c), (d), (h), (e): $cycles cycles of $cycle s, redis idle for the first $idle s of each and after its run; noise: $groups_n cgroups x stress-ng --cpu $hogs --cpu-method $cpu_method; (h), (e): + stress-ng --cpu $hogs_top in /$hog_cg."
echo " first second: each busy spell opens with $first_requests GETs, reported apart; reaction: ms until redis is protected from what competes with it"
echo " keel: period $period, SLO runqueue p99 $slo, no bounds; static: redis on CPUs $crit_cpus, noise on $rest, cpu.shares 2048)"
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(redis-server --version | awk '{print $1, $3}'), stress-ng $(stress-ng --version | awk '{print $3}')"
