#!/usr/bin/env bash
# Builds the users' ROCm 7.2 userland (Debian experimental's ROCr/HIP 7.2, hipcc on clang 22,
# rocminfo, rocm-smi, hipBLAS/rocBLAS, MIOpen, rocFFT, hipSPARSE, hipRAND) in a sid root beside
# the bookworm host: sid (+ experimental) packages need glibc 2.38+, which bookworm does not
# have. Called by ./x setup.
#
#   XHSA_ROCM72_ROOT   where the root goes (absolute path; default /var/lib/xhsa/rocm-7.2)
#
# tools/rocm-root.sh does the work (shared with tools/rocm64): a minbase sid root by
# debootstrap, apt (sid + experimental) installs tools/rocm72/packages.txt with
# tools/rocm72/preferences (which take the ROCm packages, 7.2.x, from experimental), the
# installed ROCm versions go to ROOT/xhsa-rocm-7.2.versions, ROOT/.xhsa-ready is written last.
# Reused once built (one line, nothing done); an interrupted run is resumed by the next one.
# Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
XHSA_ROCM_NAME=rocm72 \
    XHSA_ROCM_VERSION=7.2 \
    XHSA_ROCM_ROOT_VAR=XHSA_ROCM72_ROOT \
    XHSA_ROCM_DEFAULT=/var/lib/xhsa/rocm-7.2 \
    XHSA_ROCM_DIR=$here \
    XHSA_ROCM_SUITES='experimental' \
    XHSA_ROCM_UNPINNED='libhipblas-common-dev' \
    exec "$here/../rocm-root.sh"
