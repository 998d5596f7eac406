#!/usr/bin/env bash
# The part of tools/rocm64/setup.sh and tools/rocm72/setup.sh they share: builds a ROCm userland
# (Debian's ROCr/HIP with the thunk inside libhsa-runtime64, hipcc, rocminfo, rocm-smi and the
# libraries the users run) in a Debian sid root beside the bookworm host (sid's packages need
# glibc 2.38+, which bookworm does not have). Not called directly: each setup.sh sets
#
#   XHSA_ROCM_NAME        its short name in messages and file names (rocm64, rocm72)
#   XHSA_ROCM_VERSION     the ROCm version held to (6.4, 7.2): ROCr must be VERSION.x
#   XHSA_ROCM_ROOT_VAR    the variable naming the root (XHSA_ROCM64_ROOT, XHSA_ROCM72_ROOT)
#   XHSA_ROCM_DEFAULT     the root when that variable is unset
#   XHSA_ROCM_DIR         its directory: packages.txt, preferences
#   XHSA_ROCM_SUITES      extra suites apt reads beside sid (e.g. "experimental"; may be empty)
#   XHSA_ROCM_UNPINNED    pinned-pattern packages versioned on their own (not warned about)
#
# and execs this script. Steps: bookworm-backports' debootstrap (unpacked with dpkg -x, not
# installed) makes a minbase sid root; apt inside it (sid, plus XHSA_ROCM_SUITES) installs
# DIR/packages.txt with DIR/preferences; the installed ROCm versions go to
# ROOT/xhsa-rocm-VERSION.versions; ROOT/.xhsa-ready is written last. Reused once built (one
# line, nothing done); an interrupted run is resumed by the next one. Needs root (debootstrap,
# chroot).

# dpkg-query's ${Field} formats are meant literally:
# shellcheck disable=SC2016
set -euo pipefail

for v in XHSA_ROCM_NAME XHSA_ROCM_VERSION XHSA_ROCM_ROOT_VAR XHSA_ROCM_DEFAULT XHSA_ROCM_DIR; do
    [ -n "${!v:-}" ] || { echo "rocm-root.sh: $v is not set: run tools/rocm64/setup.sh or tools/rocm72/setup.sh" >&2; exit 2; }
done
name=$XHSA_ROCM_NAME
version=$XHSA_ROCM_VERSION
root_var=$XHSA_ROCM_ROOT_VAR
here=$XHSA_ROCM_DIR
default_root=$XHSA_ROCM_DEFAULT
read -r -a suites <<<"${XHSA_ROCM_SUITES:-}"
read -r -a unpinned <<<"${XHSA_ROCM_UNPINNED:-}"
# The version as an extended regular expression on a Debian version (epoch allowed).
version_re="^([0-9]+:)?${version//./\\.}\\."
mirror=http://deb.debian.org/debian
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
attempts=3

log() { echo "$name: $*" >&2; }
die() { echo "$name: $*" >&2; exit 1; }

# --- where -------------------------------------------------------------------------------------
root=${!root_var:-$default_root}
while [[ $root == */ && $root != / ]]; do root=${root%/}; done
if [[ ! $root =~ ^/[A-Za-z0-9._+/-]+$ || $root/ == *//* || $root/ == */../* || $root/ == */./* ]]; then
    die "$root_var='${!root_var:-}' is not accepted: give an absolute path other" \
        "than / made of letters, digits and . _ + - / without . or .. components" \
        "(default $default_root)"
fi
partial=$root.partial   # debootstrap's target until it has finished
ready=$root/.xhsa-ready
versions=$root/xhsa-rocm-$version.versions

# --- what --------------------------------------------------------------------------------------
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$here/packages.txt")
((${#packages[@]})) || die "$here/packages.txt lists no packages"
# The marker says what the root was built with: the package list and the apt preferences.
expected_marker=$(
    echo "packages: ${packages[*]}"
    echo "preferences-sha256: $(sha256sum <"$here/preferences" | cut -d' ' -f1)"
    if ((${#suites[@]})); then echo "suites: ${suites[*]}"; fi
)

marker_matches() { [ -f "$ready" ] && [ "$(cat "$ready")" = "$expected_marker" ]; }

# What Debian's packages break in their own use, fixed beside them (no package is changed), on
# every run (cheap and idempotent, so a root built earlier gets it too): MIOpen 6.4 runs the
# clang of its build tree, by a path baked into libMIOpen
# (/build/reproducible-path/miopen-VERSION/build/clang-N), to compile its OpenCL kernels; that
# path becomes a link to the root's /usr/bin/clang-N (docs/emulator.md).
fix_packaging() {
    local lib p
    for lib in "$root"/usr/lib/x86_64-linux-gnu/libMIOpen.so.1.*; do
        [ -f "$lib" ] || continue
        while read -r p; do
            [ -n "$p" ] && [ ! -e "$root$p" ] && [ ! -L "$root$p" ] || continue
            if [ "$(id -u)" -ne 0 ]; then
                log "warning: MIOpen's build-tree clang $p is not linked in the root; run ./x setup as root"
                continue
            fi
            mkdir -p "$root$(dirname "$p")"
            ln -s "/usr/bin/$(basename "$p")" "$root$p"
            log "linked MIOpen's build-tree $p to /usr/bin/$(basename "$p") in the root"
        done < <(grep -aoE '/build/reproducible-path/miopen-[^/]+/build/clang-[0-9]+' "$lib" | sort -u)
    done
}

if marker_matches; then
    fix_packaging
    log "ROCm $version root ready at $root (built earlier; versions in $versions)"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    if [ -e "$ready" ]; then what="is out of date (tools/$name changed since it was built)"; else what="is not built yet"; fi
    env=${!root_var:+$root_var=$root }
    die "the ROCm $version root at $root $what; building it needs root (debootstrap, chroot):" \
        "run 'sudo ${env}./x setup' (or 'sudo ${env}tools/$name/setup.sh')"
fi

for tool in wget xz gpgv sha256sum dpkg dpkg-deb chroot flock; do
    command -v "$tool" >/dev/null || die "'$tool' not found: run ./x setup, which installs tools/debian-packages.txt"
done
[ -f "$keyring" ] || die "$keyring not found: install debian-archive-keyring (tools/debian-packages.txt)"

# Only a root this script made (or an empty directory) is built in.
if [ -e "$root" ] && [ ! -f "$root/.xhsa-root" ] && { [ ! -d "$root" ] || [ -n "$(ls -A "$root")" ]; }; then
    die "$root exists and is not a root made by this set-up (no $root/.xhsa-root):" \
        "remove it, or set $root_var to another place"
fi

if [ -e "$partial" ] && [ ! -f "$partial/.xhsa-partial" ]; then
    die "$partial exists and is not an interrupted debootstrap of this set-up (no .xhsa-partial in it): remove it"
fi

# One set-up at a time per root; the one that waited finds the root ready.
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
if ! flock -n 9; then
    log "another set-up is building $root; waiting for it"
    flock 9
    if marker_matches; then
        fix_packaging
        log "ROCm $version root ready at $root (built by the other set-up; versions in $versions)"
        exit 0
    fi
fi

start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

retry() {  # retry WHAT COMMAND...: network steps, a few times, then fail saying so
    local what=$1 n
    shift
    for ((n = 1; n <= attempts; n++)); do
        "$@" && return 0
        if ((n < attempts)); then
            log "$what failed (attempt $n of $attempts); retrying in $((n * 15)) s"
            sleep $((n * 15))
        fi
    done
    die "$what failed $attempts times (network or archive trouble? see the messages above);" \
        "run set-up again to resume"
}

# Unmounts whatever an interrupted debootstrap left mounted under $1 (it mounts proc and sys).
unmount_under() {
    local m
    while read -r m; do
        umount -l "$m" || die "cannot unmount $m (left by an interrupted debootstrap)"
    done < <(awk -v p="$1/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r)
}

# --- 1. debootstrap ----------------------------------------------------------------------------
fetch_debootstrap() {  # the newest debootstrap of bookworm-backports, checked against the archive's signature
    local dist=$mirror/dists/bookworm-backports
    rm -f "$tmp/InRelease" "$tmp/Release" "$tmp/Packages.xz" "$tmp/debootstrap.deb"
    wget -q -O "$tmp/InRelease" "$dist/InRelease" || { log "cannot download $dist/InRelease"; return 1; }
    gpgv --keyring "$keyring" --output "$tmp/Release" "$tmp/InRelease" 2>"$tmp/gpgv.log" ||
        die "bookworm-backports' InRelease does not verify against $keyring: $(cat "$tmp/gpgv.log")"
    local sum
    sum=$(awk '/^[^ ]/ { s = ($1 == "SHA256:") } s && $3 == "main/binary-all/Packages.xz" { print $1 }' "$tmp/Release")
    [ -n "$sum" ] || die "bookworm-backports' Release lists no main/binary-all/Packages.xz"
    wget -q -O "$tmp/Packages.xz" "$dist/main/binary-all/Packages.xz" || { log "cannot download $dist/main/binary-all/Packages.xz"; return 1; }
    echo "$sum  $tmp/Packages.xz" | sha256sum -c --quiet - ||
        { log "bookworm-backports' Packages.xz does not match its Release (archive being updated?)"; return 1; }
    # Every debootstrap stanza: version, file, sha256; the newest version wins.
    local version=0 file='' sha='' v f s
    while read -r v f s; do
        if [ -z "$file" ] || dpkg --compare-versions "$v" gt "$version"; then version=$v file=$f sha=$s; fi
    done < <(xz -dc "$tmp/Packages.xz" | awk '
        /^Package: / { p = ($2 == "debootstrap") }
        p && /^Version: / { v = $2 } p && /^Filename: / { f = $2 } p && /^SHA256: / { s = $2 }
        /^$/ { if (p && f != "") print v, f, s; p = 0; f = "" }
        END { if (p && f != "") print v, f, s }')
    [ -n "$file" ] || die "bookworm-backports has no debootstrap package any more (looked in $dist/main/binary-all/Packages.xz)"
    log "debootstrap $version from bookworm-backports"
    wget -q -O "$tmp/debootstrap.deb" "$mirror/$file" || { log "cannot download $mirror/$file"; return 1; }
    echo "$sha  $tmp/debootstrap.deb" | sha256sum -c --quiet - ||
        { log "$mirror/$file does not match the sha256 in Packages.xz"; return 1; }
    rm -rf "$tmp/debootstrap"
    dpkg -x "$tmp/debootstrap.deb" "$tmp/debootstrap"
}

run_debootstrap() {
    if [ -e "$partial" ]; then
        log "removing $partial (an interrupted debootstrap)"
        unmount_under "$partial"
        rm -rf --one-file-system "$partial" || die "cannot remove $partial"
    fi
    mkdir "$partial" && touch "$partial/.xhsa-partial" || return 1
    DEBOOTSTRAP_DIR=$tmp/debootstrap/usr/share/debootstrap \
        "$tmp/debootstrap/usr/sbin/debootstrap" --variant=minbase --keyring="$keyring" sid "$partial" "$mirror"
}

if [ -f "$root/.xhsa-root" ]; then
    log "resuming in $root (debootstrap done earlier; running apt again)"
else
    if [ -e "$root" ]; then rmdir "$root"; fi  # empty (checked above)
    t=$SECONDS
    retry "downloading debootstrap" fetch_debootstrap
    log "debootstrap: a minbase sid root in $partial"
    retry "debootstrap of sid" run_debootstrap
    rm "$partial/.xhsa-partial"
    touch "$partial/.xhsa-root"
    mv "$partial" "$root"
    debootstrap_s=$((SECONDS - t))
    log "debootstrap done in ${debootstrap_s} s"
fi

# --- 2. apt in the root ------------------------------------------------------------------------
in_root() { DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 chroot "$root" "$@"; }

# This archive's sid Release file is past its Valid-Until date.
cat >"$root/etc/apt/apt.conf.d/99xhsa" <<'EOF'
// Written by xhsa's tools/rocm-root.sh.
Acquire::Check-Valid-Until "false";
Acquire::Retries "3";
// No pseudo-terminal for dpkg's log: the root has no /dev/pts mounted.
Dpkg::Use-Pty "0";
EOF
install -m 644 "$here/preferences" "$root/etc/apt/preferences.d/xhsa-$name.pref"
# The extra suites (experimental is NotAutomatic: only what preferences pin comes from it).
if ((${#suites[@]})); then
    for s in "${suites[@]}"; do echo "deb $mirror $s main"; done >"$root/etc/apt/sources.list.d/xhsa-$name.list"
else
    rm -f "$root/etc/apt/sources.list.d/xhsa-$name.list"
fi
# Name resolution as on the host (it may have changed since debootstrap copied it).
if [ -f /etc/resolv.conf ]; then cp -L /etc/resolv.conf "$root/etc/resolv.conf"; fi

t=$SECONDS
retry "apt-get update in $root" in_root apt-get update -q
# A run interrupted inside dpkg leaves packages unconfigured: finish them first.
in_root dpkg --configure -a
log "installing ${packages[*]} in $root"
retry "apt-get install in $root" in_root apt-get install -y -q --no-install-recommends "${packages[@]}"
in_root apt-get clean
apt_s=$((SECONDS - t))
log "apt done in ${apt_s} s"

# --- 3. check and record -----------------------------------------------------------------------
hsa=$(in_root dpkg-query -W -f='${Version}' libhsa-runtime64-1 2>/dev/null || true)
if [[ ! $hsa =~ $version_re ]]; then
    die "sid now has libhsa-runtime64-1 ${hsa:-(not installed)}, not $version.x: the ROCm $version root" \
        "cannot be built from today's Debian (left unfinished at $root; tools/$name/packages.txt" \
        "and the project's ROCm $version support need revisiting)"
fi
# Other pinned ROCm packages that are not VERSION.x: said, not fatal (XHSA_ROCM_UNPINNED are
# versioned on their own).
while read -r p v; do
    log "warning: $p is $v in this root, not $version.x"
done < <(in_root dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' \
    'libhsa-runtime*' 'libamdhip64*' 'libhiprtc*' 'libhipblas*' 'librocblas*' 'libmiopen*' \
    'librocfft*' 'libhipsparse*' 'librocsparse*' 'libhiprand*' 'librocrand*' 'librocm-smi64*' 'rocm-smi' 2>/dev/null |
    re=$version_re skip=" ${unpinned[*]} " awk '$1 == "ii" && index(ENVIRON["skip"], " " $2 " ") == 0 && $3 !~ ENVIRON["re"] { print $2, $3 }')

# The ROCm packages (Debian ROCm Team's), and what they run on: clang, libdrm_amdgpu, glibc, libstdc++.
{
    echo "# ROCm $version root at $root, built $(date -u +%Y-%m-%dT%H:%MZ) from Debian sid${suites:+ + ${suites[*]}} ($mirror)"
    echo "# package version"
    in_root dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\t${Version}\t${Maintainer}\n' |
        awk -F'\t' '$1 ~ /^ii/ && ($4 ~ /Debian ROCm Team/ || $2 ~ /^(clang-[0-9]+|libdrm-amdgpu1|libc6|libstdc\+\+6)$/) { print $2, $3 }'
} >"$versions.new"
mv "$versions.new" "$versions"
cat "$versions"

fix_packaging
echo "$expected_marker" >"$ready.new"
mv "$ready.new" "$ready"
if [ -n "${debootstrap_s:-}" ]; then debootstrap="debootstrap $debootstrap_s s"; else debootstrap="debootstrap done earlier"; fi
log "ROCm $version root ready at $root in $((SECONDS - start)) s" \
    "($debootstrap, apt $apt_s s; $(du -sh --one-file-system "$root" | cut -f1) on disk; versions in $versions)"
