#!/usr/bin/env bash
# The README's main job. Until the emulated GPU (tools/emu) lands there is no device to run a
# demo on, so this says so and shows what the foundation provides.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "xhsa: the emulated GPU (xhsa-emu) is not built yet; see docs/ARCHITECTURE.md for the plan."
echo "libxhsa.so built at target/release/libxhsa.so:"
readelf -d target/release/libxhsa.so | grep -E 'SONAME|NEEDED'
