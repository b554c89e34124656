# shellcheck shell=bash
# What scripts/dist.sh and scripts/wheel.sh share: `--target x86_64|aarch64|all` into the array
# `arches`, the check that a tool is there (never installing it), zig, the Rust targets, the
# crate's version, and the one portable build both package (build_portable: cargo-zigbuild for
# glibc 2.17, then the glibc 2.17 limit checked). Sourced after `set -euo pipefail`, with SCRIPT
# set to the script's name.

GLIBC_MAX=2.17

die() {
    echo "$SCRIPT: $*" >&2
    exit 1
}

usage() {
    echo "usage: scripts/$SCRIPT [--target x86_64|aarch64|all]" >&2
    exit 2
}

# parse_targets "$@": sets `arches` from --target (default: all).
parse_targets() {
    local which_arch=all
    while [ $# -gt 0 ]; do
        case "$1" in
            --target)
                [ $# -ge 2 ] || usage
                which_arch="$2"
                shift 2
                ;;
            --target=*)
                which_arch="${1#--target=}"
                shift
                ;;
            *) usage ;;
        esac
    done
    case "$which_arch" in
        x86_64) arches=(x86_64) ;;
        aarch64) arches=(aarch64) ;;
        all) arches=(x86_64 aarch64) ;;
        *) usage ;;
    esac
}

need() { # need TOOL "how to install it"
    command -v "$1" >/dev/null 2>&1 || die "missing '$1'; install it with: $2"
}

# zig from PATH, else `python3 -m ziglang` (the PyPI package), as cargo-zigbuild and maturin run it.
need_zig() {
    if ! command -v zig >/dev/null 2>&1 && ! python3 -m ziglang version >/dev/null 2>&1; then
        die "missing zig; install it with: pip install ziglang   (or put a zig binary on PATH)"
    fi
}

# The Rust target of every architecture in `arches`.
need_rust_targets() {
    local arch
    for arch in "${arches[@]}"; do
        if command -v rustup >/dev/null 2>&1 &&
            ! rustup target list --installed | grep -qx "$arch-unknown-linux-gnu"; then
            die "missing Rust target $arch-unknown-linux-gnu; install it with: rustup target add $arch-unknown-linux-gnu"
        fi
    done
}

# objdump_for ARCH: the objdump to read that architecture's dynamic symbols with. The host's
# objdump reads an aarch64 binary's symbol versions as generic ELF; the cross one is preferred.
objdump_for() {
    if [ "$1" = aarch64 ] && command -v aarch64-linux-gnu-objdump >/dev/null 2>&1; then
        echo aarch64-linux-gnu-objdump
    else
        echo objdump
    fi
}

# glibc_at_most ARCH FILE: prints the highest GLIBC_x.y the binary needs; dies, listing the
# symbols, when that is above GLIBC_MAX or when it shows none.
glibc_at_most() {
    local od needed highest
    od=$(objdump_for "$1")
    needed=$("$od" -T "$2" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -n 1)
    [ -n "$needed" ] || die "$od -T $2 shows no GLIBC_ symbol version (not a glibc binary?)"
    highest=$(printf '%s\n%s\n' "${needed#GLIBC_}" "$GLIBC_MAX" | sort -V | tail -n 1)
    if [ "$highest" != "$GLIBC_MAX" ]; then
        "$od" -T "$2" | grep -F "$needed" >&2 || true
        die "$2 needs $needed, more than GLIBC_$GLIBC_MAX (the symbols above)"
    fi
    echo "$needed"
}

# crate_version: preflight's version as Cargo.toml sets it (workspace-inherited); `cargo pkgid`
# prints path+file:///...#preflight@0.1.0.
crate_version() {
    local version
    version=$(cargo pkgid -p preflight | sed -n 's/.*[#@]\([0-9][0-9A-Za-z.+-]*\)$/\1/p')
    [ -n "$version" ] || die "could not read preflight's version from Cargo.toml (cargo pkgid -p preflight)"
    echo "$version"
}

# build_portable ARCH: builds the release `preflight` for ARCH against glibc 2.17 with
# cargo-zigbuild and checks its glibc symbols; sets `portable_bin` (its path) and
# `portable_glibc` (the highest GLIBC_x.y it needs). The tarball (dist.sh) and the wheel
# (wheel.sh) both pack this one binary: the same command, flags and environment, so whichever
# script runs second finds cargo's build fresh and packs the same bytes.
build_portable() {
    local arch=$1 triple target_dir start
    triple="$arch-unknown-linux-gnu"
    target_dir=$(cargo metadata --no-deps --format-version 1 |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    [ -n "$target_dir" ] || die "could not find cargo's target directory (cargo metadata)"
    echo "==> cargo zigbuild --release --target $triple.$GLIBC_MAX" >&2
    start=$SECONDS
    cargo zigbuild --release --locked -p preflight --bin preflight --target "$triple.$GLIBC_MAX" >&2
    echo "    built in $((SECONDS - start)) s" >&2
    portable_bin="$target_dir/$triple/release/preflight"
    [ -x "$portable_bin" ] || die "cargo zigbuild produced no $portable_bin"
    portable_glibc=$(glibc_at_most "$arch" "$portable_bin")
    echo "    highest glibc symbol version: $portable_glibc (limit GLIBC_$GLIBC_MAX)" >&2
}
