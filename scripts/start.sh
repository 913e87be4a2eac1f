#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and runs keel with the shipped default config
# (observe mode: keel senses and logs what it would do, and never writes a knob). Ctrl-C stops it.
# KEEL_CONFIG=FILE uses another config; KEEL_ONCE=1 stops after one tick.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build run
bash scripts/build.sh release
config=${KEEL_CONFIG:-config/keel.toml}
./build/cli/keel check-config "$config"
./build/cli/keel topology
./build/cli/keel probe
./build/cli/keel workloads --config "$config"
if [[ $(id -u) -ne 0 ]]; then
  echo "keel run needs root (it loads BPF programs); run this script as root" >&2
  exit 1
fi
once=()
[[ ${KEEL_ONCE:-} == 1 ]] && once=(--once)
exec ./build/cli/keel run --config "$config" --verbose "${once[@]}"
