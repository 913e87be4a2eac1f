#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds twice (release, and ASan+UBSan) and runs
# every test in both, then builds the libFuzzer harnesses (fuzz/) and replays every seed corpus and
# fuzzes each harness for a short budget. Privileged tests (real cgroups, real BPF) run as root and skip
# with a printed reason otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# The Kubernetes schema check's packages (npm, pinned by its package-lock.json; tests/deploy_test.cpp).
(cd deploy/kubernetes/validate && npm ci --no-audit --no-fund --loglevel=error)
status=0
# Formatting is part of the suite: a file that differs from .clang-format fails it.
bash scripts/format.sh --check || status=1
for kind in release asan; do
  bash scripts/build.sh "$kind"
  dir=build; [[ $kind == asan ]] && dir=build-asan
  echo "=== tests ($kind) ==="
  # Serial: BPF and cgroup tests observe the whole host and must not see each other.
  (cd "$dir" && ctest --output-on-failure --timeout 600) || status=1
done
bash scripts/build.sh fuzz
echo "=== fuzz (every corpus replayed, each harness ${KEEL_FUZZ_SECONDS:-10} s) ==="
(cd build-fuzz && cmake -DKEEL_FUZZ_SECONDS="${KEEL_FUZZ_SECONDS:-10}" . >/dev/null &&
  ctest --output-on-failure --timeout 600) || status=1
exit $status
