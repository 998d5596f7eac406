#!/usr/bin/env bash
# Builds the users' ROCm 6.4 userland (Debian sid's ROCr/HIP 6.4, hipcc, rocminfo, rocm-smi,
# hipBLAS/rocBLAS, MIOpen, rocFFT, hipSPARSE, hipRAND) in a sid root beside the bookworm host:
# sid's packages need glibc 2.38+, which bookworm does not have. Called by ./x setup.
#
#   XHSA_ROCM64_ROOT   where the root goes (absolute path; default /var/lib/xhsa/rocm-6.4)
#
# tools/rocm-root.sh does the work (shared with tools/rocm72): a minbase sid root by debootstrap,
# apt installs tools/rocm64/packages.txt with tools/rocm64/preferences, the installed ROCm
# versions go to ROOT/xhsa-rocm-6.4.versions, ROOT/.xhsa-ready is written last. Reused once
# built (one line, nothing done); an interrupted run is resumed by the next one. Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
XHSA_ROCM_NAME=rocm64 \
    XHSA_ROCM_VERSION=6.4 \
    XHSA_ROCM_ROOT_VAR=XHSA_ROCM64_ROOT \
    XHSA_ROCM_DEFAULT=/var/lib/xhsa/rocm-6.4 \
    XHSA_ROCM_DIR=$here \
    XHSA_ROCM_SUITES='' \
    XHSA_ROCM_UNPINNED='libhipblas-common-dev' \
    exec "$here/../rocm-root.sh"
