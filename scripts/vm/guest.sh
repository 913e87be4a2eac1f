#!/usr/bin/env bash
# Runs inside the v2 guest (scripts/vm-test.sh), from the host's tree mounted at the path it has on the
# host: prints what the guest is and what keel probe sees, then runs the privileged tests of the release
# build with ctest and returns ctest's status. .keel-vm/env (written by vm-test.sh) may set
# KEEL_VM_CTEST_ARGS (more ctest arguments, such as -R NAME) or KEEL_VM_RUN (a command run instead).
set -uo pipefail
repo=$1
cd "$repo" || exit 1
# shellcheck disable=SC1091
[[ -f .keel-vm/env ]] && . .keel-vm/env
# How the guest's CPUs run (tcg: emulated, so latency and timing are not the host's; the tests then
# check behaviour and print their timings instead of asserting them: tests/support/scene.h).
KEEL_VM_ACCEL=$(sed -n 's/.*keel\.accel=\([^ ]*\).*/\1/p' /proc/cmdline)
export KEEL_VM_ACCEL
# Boot over (this unit is not part of its transaction): systemd "running", as on the hosts keel is for.
echo "keel-vm: systemd $(systemctl is-system-running --wait 2>&1)"
echo "keel-vm: guest $(uname -r), $(systemctl --version | head -1), PID 1 $(cat /proc/1/comm)," \
  "$(nproc) CPUs on $(ls -d /sys/devices/system/node/node* | wc -l) NUMA nodes"
echo "keel-vm: CPUs under ${KEEL_VM_ACCEL:-?}, clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource); /sys/fs/cgroup is $(stat -f -c %T /sys/fs/cgroup), root controllers:" \
  "$(cat /sys/fs/cgroup/cgroup.controllers)"
# This boot's kernel text symbols, for vm-test.sh to name where the CPUs are should the guest stop
# making progress (it reads them off the tree disk; the kernel's addresses change with every boot).
grep -i ' t ' /proc/kallsyms >.keel-vm/kallsyms 2>/dev/null
sync
echo "=== keel probe (guest) ==="
./build/cli/keel probe
# The open-files limit of a shell on the development machines and CI (systemd gives a service 1024):
# tests of hostile trees hold a descriptor per cgroup, up to keel's bounds.
ulimit -n "$(ulimit -Hn)"
if [[ -n ${KEEL_VM_RUN:-} ]]; then
  echo "=== $KEEL_VM_RUN (guest) ==="
  bash -c "$KEEL_VM_RUN"
  exit $?
fi
echo "=== ctest (guest, label priv) ==="
cd build || exit 1
# The tests of v1's own kernel rules (CgroupV1Actuators: EBUSY and EACCES of nested v1 cpusets, v1
# quota ratios) have v2 twins (CgroupV2Actuators) and are left out here; every other privileged test
# runs on both layouts.
# A ctest -R regex for exactly the tests named on stdin (one per line). By name: ctest numbers tests
# within what -L and -E leave, so a number from one ctest run names another test under other filters.
exactly() {
  # Test names are letters, digits, '_', '/' and '.': only '.' means more in a regex.
  printf '^(%s)$' "$(sed 's/[.]/\\./g' | paste -sd'|' -)"
}
# A test that fails runs once more, by name, named on the console: under TCG the guest's CPUs are
# emulated and its timing is not a host's, and a second failure fails the run.
once_more() {
  local rc=$1 failed
  if [[ $rc -ne 0 && -s Testing/Temporary/LastTestsFailed.log ]]; then
    failed=$(cut -d: -f2- Testing/Temporary/LastTestsFailed.log)
    echo "keel-vm: failed on the first try, run once more:" $failed
    ctest --output-on-failure --timeout 900 -R "$(exactly <<<"$failed")"
    rc=$?
  fi
  return "$rc"
}
# KEEL_VM_TESTS (test names, one per line, set by vm-test.sh for a second boot after a stalled guest):
# only those.
if [[ -n ${KEEL_VM_TESTS:-} ]]; then
  ctest --output-on-failure --timeout 900 -R "$(exactly <<<"$KEEL_VM_TESTS")"
  once_more $?
  exit $?
fi
# shellcheck disable=SC2086
ctest --output-on-failure --timeout 900 -L priv -E '^CgroupV1Actuators[.]' ${KEEL_VM_CTEST_ARGS:-}
once_more $?
