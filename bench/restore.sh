#!/usr/bin/env bash
# What `keel restore` costs as the journal grows: N journaled knobs over a temporary tree laid out as
# cgroupfs (keel restore --root), each cgroup with cpu.shares, cpu.cfs_quota_us and cpu.cfs_period_us
# (a bandwidth pair, which restore orders through "no limit"), each timed with this build's keel and,
# beside it in the same run, a baseline: a plain loop writing the same N files (the I/O floor), and with
# --before REV the keel binary of that git revision (built once in a temporary worktree; or
# --before-bin KEEL, a binary built before), on the very same journal (format 2, which both read).
# Prints seconds, microseconds per knob and ratios.
#   bench/restore.sh [--before REV | --before-bin KEEL] [--max-before N] [N ...]
#   (default N: 2000 8000 100000; N is rounded down to whole cgroups of 3 knobs)
set -euo pipefail
cd "$(dirname "$0")/.."
before=""
before_bin=""
max_before=8000
sizes=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --before) before=$2; shift 2 ;;
    --before-bin) before_bin=$2; shift 2 ;;
    --max-before) max_before=$2; shift 2 ;;
    *) sizes+=("$1"); shift ;;
  esac
done
[[ ${#sizes[@]} -eq 0 ]] && sizes=(2000 8000 100000)
keel=build/cli/keel
[[ -x $keel ]] || { echo "restore.sh: build keel first (scripts/build.sh)" >&2; exit 1; }

# The tree in memory, as cgroupfs is (on ext4 a truncated file is written back at close: the disk, not
# keel, would be measured).
base=/tmp
[[ -d /dev/shm ]] && base=/dev/shm
work=$(mktemp -d $base/keel-restore-bench.XXXXXX)
old_tree=""
cleanup() {
  rm -rf "$work"
  if [[ -n $old_tree ]]; then git worktree remove --force "$old_tree" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

old_keel=$before_bin
[[ -n $before_bin ]] && before=$(basename "$before_bin")
if [[ -n $before && -z $old_keel ]]; then
  old_tree=$work/before-src
  git worktree add --detach "$old_tree" "$before" >/dev/null
  echo "building keel at $before (once) ..." >&2
  cmake -S "$old_tree" -B "$work/before-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$work/before-build" -j"$(nproc)" --target keel >/dev/null
  old_keel=$work/before-build/cli/keel
fi

# A tree of N/3 cgroups whose shares and bandwidth keel changed, and the journal of their originals.
make_case() {
  local n=$1 dir=$2
  rm -rf "$dir"
  mkdir -p "$dir/proc/sys/kernel/random" "$dir/sys/fs/cgroup/cpu" "$dir/state"
  chmod 700 "$dir/state"
  echo "bench-boot" >"$dir/proc/sys/kernel/random/boot_id"
  python3 - "$n" "$dir" <<'EOF'
import os, sys
n, d = int(sys.argv[1]), sys.argv[2]
lines = ["keel-journal 2 boot_id=bench-boot"]
knobs = [("cpu.shares", "weight", "2", "1024"), ("cpu.cfs_quota_us", "cfs_quota", "50000", "-1"),
         ("cpu.cfs_period_us", "cfs_period", "200000", "100000")]
for i in range(n // len(knobs)):
    cg = f"{d}/sys/fs/cgroup/cpu/c{i}"
    os.mkdir(cg)
    ino = os.stat(cg).st_ino
    for f, kind, now, orig in knobs:
        with open(f"{cg}/{f}", "w") as out:
            out.write(now + "\n")
        lines.append(f"file cgroup cpu/c{i}/{f} {kind} {ino} {orig}")
with open(f"{d}/state/journal", "w") as f:
    f.write("\n".join(lines) + "\n")
EOF
}

# The floor: the same N files written once each by a plain loop (open, write, close).
floor() {
  python3 - "$1" <<'EOF'
import os, sys, time
d = sys.argv[1]
t = time.monotonic()
i = 0
while os.path.exists(f"{d}/sys/fs/cgroup/cpu/c{i}"):
    for f in ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"):
        fd = os.open(f"{d}/sys/fs/cgroup/cpu/c{i}/{f}", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"1024\n")
        os.close(fd)
    i += 1
print(f"{time.monotonic() - t:.3f}")
EOF
}

timed() {  # seconds of one `keel restore` with binary $1 over case dir $2
  local t0 t1
  t0=$(date +%s.%N)
  "$1" restore --root "$2" --state "$2/state" >/dev/null 2>&1 || { echo "restore failed ($1)" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}

check_restored() {  # every knob back at its original
  python3 - "$1" "$2" <<'EOF' || exit 1
import os, sys
n, d = int(sys.argv[1]), sys.argv[2]
want = {"cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"}
bad = 0
for i in range(n // 3):
    for f, v in want.items():
        with open(f"{d}/sys/fs/cgroup/cpu/c{i}/{f}") as x:
            bad += x.read().strip() != v
if bad:
    sys.exit(f"restore left {bad} of {n} knobs")
EOF
}

printf '| knobs | floor s | keel s | keel us/knob | keel / floor |'
[[ -n $old_keel ]] && printf ' before (%s) s | before / keel |' "$before"
printf '\n|---|---|---|---|---|'
[[ -n $old_keel ]] && printf -- '---|---|'
printf '\n'
for n in "${sizes[@]}"; do
  d=$work/case
  make_case "$n" "$d"
  f=$(floor "$d")
  make_case "$n" "$d"
  k=$(timed "$keel" "$d")
  check_restored "$n" "$d"
  printf '| %d | %s | %s | %.1f | %.1fx |' "$n" "$f" "$k" "$(python3 -c "print($k * 1e6 / $n)")" \
    "$(python3 -c "print($k / max($f, 1e-3))")"
  if [[ -n $old_keel ]]; then
    if [[ $n -le $max_before ]]; then
      make_case "$n" "$d"
      o=$(timed "$old_keel" "$d")
      check_restored "$n" "$d"
      printf ' %s | %.1fx |' "$o" "$(python3 -c "print($o / max($k, 1e-3))")"
    else
      printf ' (not run: past --max-before) | |'
    fi
  fi
  printf '\n'
done
