#!/usr/bin/env bash
# The README's main job, the product demo: the users' "intensive" scenario (ResNet-18 bs8
# inference at 20 req/s, high priority, beside ResNet-50 bs1024 training flat out, low priority,
# in two processes) on the emulated MI308X, natively and with libxhsa preloaded, in one table.
# Real HIP/ROCr 5.2 processes, built with the real hipcc (tools/workloads/workload.hip).
#
#   tools/demo.sh [SECONDS]     measured window per phase, wall-clock seconds (default 10)
#
# `tools/demo.sh streams` runs the older single-program demo instead (two HIP streams of
# different priority in one process, no libxhsa).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = streams ]; then
    shift
    out=target/demo
    mkdir -p "$out"
    src=tools/demo/priority_streams.hip
    if [ ! -x "$out/priority_streams" ] || [ "$src" -nt "$out/priority_streams" ]; then
        echo "demo: building $src with hipcc --offload-arch=gfx90a" >&2
        hipcc --offload-arch=gfx90a -O2 -w -o "$out/priority_streams" "$src"
    fi
    exec target/release/xhsa-emu run -- "$out/priority_streams" "$@"
fi
seconds="${1:-10}"
echo "demo: the intensive scenario, native then with libxhsa (4 phases of ~${seconds} s each, plus start-up)" >&2
exec target/release/xhsa-bench run intensive --mode xhsa --seconds "$seconds"
