#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and runs keel's main job with the shipped default
# config (observe mode: keel never writes a knob). Until `keel run` lands, the main job shows the
# host, the workloads keel discovers, and a few seconds of `keel top`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh release
config=${KEEL_CONFIG:-config/keel.toml}
./build/cli/keel check-config "$config"
./build/cli/keel topology
./build/cli/keel probe
./build/cli/keel workloads --config "$config"
# Three seconds of live per-cgroup run-queue latency (BPF; needs root).
if [[ $(id -u) -eq 0 ]]; then
  ./build/cli/keel top --interval 1 --count 3
else
  echo "keel top skipped: it loads BPF programs and needs root"
fi
