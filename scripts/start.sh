#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and runs keel's main job with the shipped default
# config (observe mode: keel never writes a knob). Until `keel run` lands, the main job shows the
# host and the workloads keel discovers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh release
config=${KEEL_CONFIG:-config/keel.toml}
./build/cli/keel check-config "$config"
./build/cli/keel topology
./build/cli/keel probe
./build/cli/keel workloads --config "$config"
