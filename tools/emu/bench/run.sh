#!/usr/bin/env bash
# xhsa-emu benchmarks (print figures, assert nothing): null-kernel dispatch rate on one queue
# and doorbell-to-start latency, on the release build of the emulator; then the same dispatch
# loop with libxhsa preloaded, and the ratio of the two rates (libxhsa's dispatch overhead).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=target/bench
mkdir -p "$out"
n="${1:-20000}"
rounds="${2:-3}"
cargo build --release -p xhsa -p xhsa-emu -p xhsa-emu-thunk >&2
gcc -O2 -Wall -o "$out/dispatch" tools/emu/bench/dispatch.c -lhsa-runtime64
hipcc --offload-arch=gfx90a --cuda-device-only -c --no-gpu-bundle-output -w -o "$out/xhsa_kernels.co" tests/kernels/xhsa_kernels.hip
lib="$PWD/target/release/libxhsa.so"
board="$(mktemp -d)"
trap 'rm -rf "$board"' EXIT
rate() { sed -n 's/^null-kernel dispatch rate (one queue): \([0-9]*\) dispatches.*/\1/p'; }
native=()
xhsa=()
# Alternate the two so that host noise hits both alike.
for i in $(seq "$rounds"); do
  o=$(target/release/xhsa-emu run -- "$out/dispatch" "$out/xhsa_kernels.co" "$n")
  [ "$i" = 1 ] && echo "native: $o"
  native+=("$(echo "$o" | rate)")
  o=$(LD_PRELOAD="$lib" XHSA_BOARD_DIR="$board" target/release/xhsa-emu run -- "$out/dispatch" "$out/xhsa_kernels.co" "$n")
  [ "$i" = 1 ] && echo "libxhsa: $o"
  xhsa+=("$(echo "$o" | rate)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mn=$(median "${native[@]}")
mx=$(median "${xhsa[@]}")
echo "null-kernel dispatch rate, median of $rounds: native $mn/s, libxhsa $mx/s, ratio $(awk -v a="$mx" -v b="$mn" 'BEGIN {printf "%.3f", a / b}') (goal >= 0.95)"
