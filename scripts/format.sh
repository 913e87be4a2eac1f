#!/usr/bin/env bash
# The repository's C, C++ and BPF sources in .clang-format's style.
# Usage: scripts/format.sh [--check]   (--check: change nothing, print the files that differ, exit 1 if any)
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
[[ -n $fmt ]] || { echo "format: clang-format is not installed (scripts/deps.sh)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
if [[ ${1:-} == --check ]]; then
  bad=()
  for f in "${files[@]}"; do
    "$fmt" --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  if [[ ${#bad[@]} -gt 0 ]]; then
    echo "format: ${#bad[@]} files differ from .clang-format (run scripts/format.sh):" >&2
    for f in "${bad[@]}"; do echo "  $f" >&2; "$fmt" --style=file "$f" | diff -u "$f" - | head -20 >&2 || true; done
    exit 1
  fi
  echo "format: ${#files[@]} files as .clang-format wants them"
  # Every folder with headers is under clang-tidy's header filter.
  filter=$(sed -n "s/^HeaderFilterRegex: *'\(.*\)'/\1/p" .clang-tidy)
  for d in $(git ls-files '*.h' | grep / | cut -d/ -f1 | sort -u); do
    [[ /$d/ =~ $filter ]] || { echo "format: .clang-tidy's HeaderFilterRegex leaves out $d/" >&2; exit 1; }
  done
  exit 0
fi
"$fmt" --style=file -i "${files[@]}"
