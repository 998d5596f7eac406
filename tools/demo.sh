#!/usr/bin/env bash
# The README's main job: a HIP program with two streams at different priorities, built with
# the real hipcc and run by the real HIP/ROCr 5.2 on the emulated MI308X (xhsa-emu).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/demo
mkdir -p "$out"
src=tools/demo/priority_streams.hip
if [ ! -x "$out/priority_streams" ] || [ "$src" -nt "$out/priority_streams" ]; then
    echo "demo: building $src with hipcc --offload-arch=gfx90a" >&2
    hipcc --offload-arch=gfx90a -O2 -w -o "$out/priority_streams" "$src"
fi
exec target/release/xhsa-emu run -- "$out/priority_streams" "$@"
