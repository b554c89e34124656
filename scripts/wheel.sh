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

SCRIPT=wheel.sh
# shellcheck source=scripts/lib/portable.sh
. scripts/lib/portable.sh
parse_targets "$@"
need cargo "rustup (https://rustup.rs)"
need maturin "pip install maturin   (prebuilt)"
need python3 "apt-get install python3"
need objdump "apt-get install binutils"
need_zig
need_rust_targets

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
    needed=$(glibc_at_most "$arch" "$bin")
    rm -rf "$unpacked"

    size=$(stat -c %s "$wheel")
    echo "$wheel"
    echo "    size: $size bytes ($(((size + 1023) / 1024)) KiB); runs on glibc ${needed#GLIBC_} or newer"
done
