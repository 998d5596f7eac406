#!/usr/bin/env bash
# Installs AMD's library test suites into a ROCm root with the root's own apt, as
# tools/rocm64/setup.sh and tools/rocm72/setup.sh install the roots' packages:
# tools/conformance/packages.txt into the ROCm 6.4 root, tools/conformance/packages-7.2.txt into
# the ROCm 7.2 root with --rocm 7.2, or the packages named as arguments. Idempotent: packages
# already installed are not asked for again (nothing is downloaded then). Needs the root built
# (./x setup) and, to install, root privileges.
#
#   tools/conformance/install.sh [--rocm 6.4|7.2] [PACKAGE...]
#
#   XHSA_ROCM64_ROOT   the ROCm 6.4 root (default /var/lib/xhsa/rocm-6.4)
#   XHSA_ROCM72_ROOT   the ROCm 7.2 root (default /var/lib/xhsa/rocm-7.2)

# dpkg-query's ${Field} formats are meant literally:
# shellcheck disable=SC2016
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

log() { echo "conformance: $*" >&2; }
die() { echo "conformance: $*" >&2; exit 1; }

rocm=6.4
if [ "${1:-}" = --rocm ]; then
    (($# >= 2)) || die "--rocm needs a version: 6.4 or 7.2"
    rocm=$2
    shift 2
fi
case "$rocm" in
    6.4) root=${XHSA_ROCM64_ROOT:-/var/lib/xhsa/rocm-6.4}; list=$here/packages.txt ;;
    7.2) root=${XHSA_ROCM72_ROOT:-/var/lib/xhsa/rocm-7.2}; list=$here/packages-7.2.txt ;;
    *) die "--rocm '$rocm' is not accepted: 6.4 or 7.2" ;;
esac
while [[ $root == */ && $root != / ]]; do root=${root%/}; done

[ -f "$root/.xhsa-ready" ] || die "the ROCm $rocm root at $root is not built: run ./x setup (as root) first"

if (($#)); then
    packages=("$@")
else
    mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$list")
fi
((${#packages[@]})) || die "no packages to install"

in_root() { DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 chroot "$root" "$@"; }

missing() {
    local p
    for p in "${packages[@]}"; do
        in_root dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}

mapfile -t todo < <(missing)
if ((${#todo[@]} == 0)); then
    log "test packages installed in $root: ${packages[*]}"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || die "${todo[*]} not installed in $root; installing needs root (chroot): run 'sudo ./x conformance'"

# One apt at a time per root: the lock tools/rocm-root.sh takes while it builds the root.
exec 9>"$root.lock"
if ! flock -n 9; then
    log "another set-up holds $root.lock; waiting for it"
    flock 9
fi
if [ -f /etc/resolv.conf ]; then cp -L /etc/resolv.conf "$root/etc/resolv.conf"; fi
t=$SECONDS
in_root dpkg --configure -a
log "installing ${todo[*]} in $root"
# The root's package lists may be older than sid's pool (files gone): then update and retry.
if ! in_root apt-get install -y -q --no-install-recommends "${todo[@]}"; then
    log "apt-get install failed; updating the package lists and trying again"
    in_root apt-get update -q
    in_root apt-get install -y -q --no-install-recommends "${todo[@]}"
fi
in_root apt-get clean
mapfile -t todo < <(missing)
((${#todo[@]} == 0)) || die "still not installed after apt: ${todo[*]}"
log "installed in $((SECONDS - t)) s"
