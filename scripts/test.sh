#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds twice (release, and ASan+UBSan) and runs the
# tests in both, builds the libFuzzer harnesses (fuzz/) and replays every seed corpus and fuzzes each
# harness for a short budget, and runs the privileged tests again on a cgroup v2 host under systemd: a
# Debian 12 guest under qemu (scripts/vm-test.sh; KEEL_VM=0 leaves it out). Privileged tests (real cgroups, real BPF) run as root
# and skip with a printed reason otherwise. Each stage's duration is printed at the end.
#
# The ASan build runs every test except the end-to-end scenarios that only start the keel binary and
# watch the host (RunPriv, Churn, PackagePriv, ContainerPriv): the release build runs them here and again
# on the guest, and ASan's view of the same code paths is in the tests that call keel's code in process
# (actuators, sensing, the loop) and in CrashSafety, Faults and CapsPriv, which it still runs.
# The guest stage is on by default, so CI runs every privileged test on both layouts; it skips, saying why,
# where qemu cannot run a guest (not root, not x86_64, a tool missing).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
stages=()
# stage NAME COMMAND...: one stage, timed; a failing stage fails the suite and the next ones still run.
stage() {
  local name=$1 begin=$SECONDS rc=0
  shift
  echo "=== $name ==="
  "$@" || rc=$?
  local took=$((SECONDS - begin)) result=ok
  [[ $rc -eq 0 ]] || { result="FAILED (exit $rc)"; status=1; }
  stages+=("$(printf '%-28s %3d min %02d s  %s' "$name" $((took / 60)) $((took % 60)) "$result")")
}
started=$SECONDS

stage "dependencies" bash scripts/deps.sh
[[ $status -eq 0 ]] || exit 1
# The Kubernetes schema check's packages (npm, pinned by its package-lock.json; tests/deploy_test.cpp).
stage "npm (kubernetes schemas)" bash -c 'cd deploy/kubernetes/validate && npm ci --no-audit --no-fund --loglevel=error'
# Formatting is part of the suite: a file that differs from .clang-format fails it.
stage "format check" bash scripts/format.sh --check
# Serial: BPF and cgroup tests observe the whole host and must not see each other.
stage "build (release)" bash scripts/build.sh release
stage "tests (release)" bash -c 'cd build && ctest --output-on-failure --timeout 600'
stage "build (asan)" bash scripts/build.sh asan
stage "tests (asan)" bash -c \
  "cd build-asan && ctest --output-on-failure --timeout 600 -E '^(RunPriv|Churn|PackagePriv|ContainerPriv)[.]'"
stage "build (fuzz)" bash scripts/build.sh fuzz
stage "fuzz (${KEEL_FUZZ_SECONDS:-10} s per harness)" bash -c \
  'cd build-fuzz && cmake -DKEEL_FUZZ_SECONDS="${KEEL_FUZZ_SECONDS:-10}" . >/dev/null && ctest --output-on-failure --timeout 600'
if [[ ${KEEL_VM:-1} == 1 ]]; then
  stage "privileged tests (v2 guest)" bash scripts/vm-test.sh
fi

echo "=== stages ==="
printf '%s\n' "${stages[@]}"
total=$((SECONDS - started))
printf '%-28s %3d min %02d s  %s\n' "total" $((total / 60)) $((total % 60)) "$([[ $status -eq 0 ]] && echo ok || echo FAILED)"
exit $status
