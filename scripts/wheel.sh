#!/usr/bin/env bash
# Build the Python wheels (pyproject.toml): dist/torchrun_preflight-<version>-py3-none-
# manylinux_2_17_<arch>.manylinux2014_<arch>.whl, holding the same glibc-2.17 `preflight` binary
# as the tarball (scripts/dist.sh) as a script, plus the thin `python -m torchrun_preflight`
# entry point. `pip install torchrun-preflight` puts `preflight` on the environment's PATH.
#
# maturin links with zig (--zig), which ships glibc 2.17's stubs, so the wheel's manylinux2014
# tag holds on any build host; the script then checks the packed binary's glibc symbols.
#
# Usage: scripts/wheel.sh [--target x86_64|aarch64|all]   (default: all)
# Needs (installs nothing): cargo, maturin and zig (both from PyPI, prebuilt:
# `pip install maturin ziglang`), python3, objdump; for aarch64 the Rust target
# aarch64-unknown-linux-gnu (rustup target add aarch64-unknown-linux-gnu).
set -euo pipefail
cd "$(dirname "$0")/.."

GLIBC_MAX=2.17

die() {
    echo "wheel.sh: $*" >&2
    exit 1
}
usage() {
    echo "usage: scripts/wheel.sh [--target x86_64|aarch64|all]" >&2
    exit 2
}

which_arch=all
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

need() { # need TOOL "how to install it"
    command -v "$1" >/dev/null 2>&1 || die "missing '$1'; install it with: $2"
}
need cargo "rustup (https://rustup.rs)"
need maturin "pip install maturin   (prebuilt)"
need python3 "apt-get install python3"
need objdump "apt-get install binutils"
# maturin --zig runs `zig` from PATH, else `python3 -m ziglang` (the PyPI package).
if ! command -v zig >/dev/null 2>&1 && ! python3 -m ziglang version >/dev/null 2>&1; then
    die "missing zig; install it with: pip install ziglang   (or put a zig binary on PATH)"
fi
for arch in "${arches[@]}"; do
    if command -v rustup >/dev/null 2>&1 &&
        ! rustup target list --installed | grep -qx "$arch-unknown-linux-gnu"; then
        die "missing Rust target $arch-unknown-linux-gnu; install it with: rustup target add $arch-unknown-linux-gnu"
    fi
done

mkdir -p dist
for arch in "${arches[@]}"; do
    triple="$arch-unknown-linux-gnu"
    echo "==> maturin build --release --zig --target $triple --compatibility manylinux2014" >&2
    start=$SECONDS
    maturin build --release --locked --zig --target "$triple" \
        --compatibility manylinux2014 --out dist
    echo "    built in $((SECONDS - start)) s" >&2
    wheel=$(ls -t dist/*-manylinux*_"$arch".whl 2>/dev/null | head -n 1)
    [ -n "$wheel" ] || die "maturin left no manylinux $arch wheel in dist/"

    # The packed binary: glibc 2.17 at most, like the tarball's.
    unpacked=$(mktemp -d)
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "$wheel" "$unpacked"
    bin=$(find "$unpacked" -path '*.data/scripts/preflight' -type f | head -n 1)
    [ -n "$bin" ] || die "$wheel holds no <name>.data/scripts/preflight"
    od=objdump
    [ "$arch" = aarch64 ] && command -v aarch64-linux-gnu-objdump >/dev/null 2>&1 &&
        od=aarch64-linux-gnu-objdump
    needed=$("$od" -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -n 1)
    rm -rf "$unpacked"
    [ -n "$needed" ] || die "the wheel's binary shows no GLIBC_ symbol version"
    highest=$(printf '%s\n%s\n' "${needed#GLIBC_}" "$GLIBC_MAX" | sort -V | tail -n 1)
    [ "$highest" = "$GLIBC_MAX" ] || die "the wheel's binary needs $needed, more than GLIBC_$GLIBC_MAX"

    size=$(stat -c %s "$wheel")
    echo "$wheel"
    echo "    size: $size bytes ($(((size + 1023) / 1024)) KiB); runs on glibc ${needed#GLIBC_} or newer"
done
