#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds twice (release, and ASan+UBSan) and runs the
# tests in both, builds the libFuzzer harnesses (fuzz/) and replays every seed corpus and fuzzes each
# harness for a short budget, and runs the privileged tests again on a cgroup v2 host under systemd: a
# Debian 12 guest under qemu (scripts/vm-test.sh; KEEL_VM=0 leaves it out). Privileged tests (real cgroups,
# real BPF) run as root and skip with a printed reason otherwise. At the end it prints each stage's
# duration and, for each stage that ran tests, how many ran, passed, were skipped and passed only on a
# rerun, naming the last two (and any that failed).
#
# The ASan build runs every test except the end-to-end scenarios that only start the keel binary and
# watch the host (RunPriv, Churn, PackagePriv, ContainerPriv), and is built without them: the release
# build runs them here and again on the guest, and ASan's view of the same code paths is in the tests that
# call keel's code in process (actuators, sensing, the loop) and in CrashSafety, Faults and CapsPriv,
# which it still runs.
#
# Order, on a machine of 2 CPUs: the guest's image is built (or found in its cache), then the release
# build; the host's tests run with nothing else busy (BPF and cgroup tests observe the whole host and must
# not see each other, nor a build); then the guest runs its tests on one CPU (qemu's emulation is one
# thread) while the ASan build, its tests labelled `unit` (temporary trees and fakes, nothing of the
# host's), the fuzz build and the fuzzers use what it leaves (at the lowest priority, so the guest's CPU
# stays its own); the ASan build's privileged tests run after it, again with nothing else busy. The guest
# stage is on by default, so CI runs every privileged test on both layouts; it skips, saying why, where
# qemu cannot run a guest (not root, not x86_64, a tool missing), and under CI=true it fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
stages=()
logs=$(mktemp -d /tmp/keel-test.XXXXXX)
trap 'rm -rf "$logs"' EXIT
# stage NAME COMMAND...: one stage, timed, its output shown and kept for the summary; a failing stage
# fails the suite and the next ones still run.
stage() {
  local name=$1 begin=$SECONDS rc=0
  shift
  echo "=== $name ==="
  "$@" 2>&1 | tee "$logs/${#stages[@]}.log" || rc=${PIPESTATUS[0]}
  finish "$name" $((SECONDS - begin)) "$rc" "$logs/${#stages[@]}.log"
}
# finish NAME SECONDS RC LOG: the stage's summary line, and the tally of the tests it ran, if any.
finish() {
  local result=ok line tally l first=1
  [[ $3 -eq 0 ]] || { result="FAILED (exit $3)"; status=1; }
  line=$(printf '%-28s %3d min %02d s  %s' "$1" $(($2 / 60)) $(($2 % 60)) "$result")
  tally=$(python3 scripts/ctest-tally.py "$4" 2>/dev/null || true)
  while IFS= read -r l; do
    [[ -n $l ]] || continue
    if [[ $first -eq 1 ]]; then line+="  $l"; first=0; else line+=$'\n'"$(printf '%28s' '')$l"; fi
  done <<<"$tally"
  stages+=("$line")
}
started=$SECONDS

stage "dependencies" bash scripts/deps.sh
[[ $status -eq 0 ]] || exit 1
guest=0
[[ ${KEEL_VM:-1} == 1 ]] && guest=1
# The Kubernetes schema check's packages (npm, pinned by its package-lock.json; tests/deploy_test.cpp).
stage "npm (kubernetes schemas)" bash -c 'cd deploy/kubernetes/validate && npm ci --no-audit --no-fund --loglevel=error'
# Formatting is part of the suite: a file that differs from .clang-format fails it.
stage "format check" bash scripts/format.sh --check
# The guest's image, built once per package list (1.5 minutes here) and cached. (Beside the release build
# both took longer than one after the other: 8 min 8 s against about 6.)
[[ $guest -eq 1 ]] && stage "guest image" bash scripts/vm-test.sh --image
stage "build (release)" bash scripts/build.sh release
# tests DIR [CTEST ARGS...]: the tests of a build, those labelled `unit` (temporary trees, fakes: nothing
# of the host's) two at a time, then the privileged ones (`priv`: real cgroups and BPF, they observe the
# whole host) and any other one by one.
tests() {
  local dir=$1 rc=0
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 600 -L '^unit$' -j"$(nproc)" "$@") || rc=1
  (cd "$dir" && ctest --output-on-failure --timeout 600 -LE '^unit$' "$@") || rc=1
  return $rc
}
stage "tests (release)" tests build
if [[ $guest -eq 1 ]]; then
  echo "=== privileged tests (v2 guest): in the background, its output when it ends ==="
  guest_begin=$SECONDS
  bash scripts/vm-test.sh >"$logs/guest.log" 2>&1 &
  guest_pid=$!
  low=(nice -n 19)
else
  low=()
fi
stage "build (asan)" "${low[@]}" bash scripts/build.sh asan
asan_skip='^(RunPriv|Churn|PackagePriv|ContainerPriv)[.]'
# The ASan tests labelled `unit` observe nothing of the host's, so they run beside the guest too; the
# others wait until it is done.
stage "tests (asan, unit)" "${low[@]}" bash -c \
  "cd build-asan && ctest --output-on-failure --timeout 600 -L '^unit\$' -j$(nproc) -E '$asan_skip'"
stage "build (fuzz)" "${low[@]}" bash scripts/build.sh fuzz
# Each harness is one process on one CPU, fuzzing its whole budget: two at a time on 2 free CPUs, one at
# a time beside the guest (which keeps one CPU busy).
fuzz_jobs=$(nproc)
[[ $guest -eq 1 && $fuzz_jobs -gt 1 ]] && fuzz_jobs=$((fuzz_jobs - 1))
stage "fuzz (${KEEL_FUZZ_SECONDS:-10} s per harness)" "${low[@]}" bash -c \
  "cd build-fuzz && cmake -DKEEL_FUZZ_SECONDS=${KEEL_FUZZ_SECONDS:-10} . >/dev/null && ctest --output-on-failure --timeout 600 -j$fuzz_jobs"
if [[ $guest -eq 1 ]]; then
  rc=0
  wait "$guest_pid" || rc=$?
  echo "=== privileged tests (v2 guest) ==="
  cat "$logs/guest.log"
  finish "privileged tests (v2 guest)" $((SECONDS - guest_begin)) "$rc" "$logs/guest.log"
fi
stage "tests (asan, privileged)" bash -c \
  "cd build-asan && ctest --output-on-failure --timeout 600 -LE '^unit\$' -E '$asan_skip'"

echo "=== stages ==="
printf '%s\n' "${stages[@]}"
total=$((SECONDS - started))
printf '%-28s %3d min %02d s  %s\n' "total" $((total / 60)) $((total % 60)) "$([[ $status -eq 0 ]] && echo ok || echo FAILED)"
exit $status
