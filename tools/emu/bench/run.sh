#!/usr/bin/env bash
# xhsa-emu benchmarks (print figures, assert nothing): null-kernel dispatch rate on one queue
# and doorbell-to-start latency, on the release build of the emulator.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=target/bench
mkdir -p "$out"
cargo build --release -p xhsa-emu -p xhsa-emu-thunk >&2
gcc -O2 -Wall -o "$out/dispatch" tools/emu/bench/dispatch.c -lhsa-runtime64
hipcc --offload-arch=gfx90a --cuda-device-only -c --no-gpu-bundle-output -w -o "$out/xhsa_kernels.co" tests/kernels/xhsa_kernels.hip
target/release/xhsa-emu run -- "$out/dispatch" "$out/xhsa_kernels.co" "${1:-20000}"
