#!/usr/bin/env bash
# Build the Python wheels (pyproject.toml): dist/torchrun_preflight-<version>-py3-none-
# manylinux_2_17_<arch>.manylinux2014_<arch>.whl, holding the glibc-2.17 `preflight` binary of
# the tarball (scripts/dist.sh) as a script, plus the thin `python -m torchrun_preflight`
# entry point. `pip install dist/torchrun_preflight-*.whl` puts `preflight` on the environment's
# PATH.
#
# The binary is the one dist.sh packs: both scripts build it with build_portable
# (scripts/lib/portable.sh: cargo-zigbuild for glibc 2.17, symbols checked), so after one of
# them the other finds cargo's build fresh and packs the same bytes within seconds.
# scripts/lib/wheel.py then writes the wheel (PEP 427: METADATA from pyproject.toml and
# README.md, WHEEL, RECORD with sha256 hashes) and reads it back.
#
# Usage: scripts/wheel.sh [--target x86_64|aarch64|all]   (default: all)
# Needs (installs nothing): cargo, cargo-zigbuild and zig (prebuilt from PyPI:
# `pip install -r scripts/build-requirements.txt`), python3 (3.11+, or tomli), objdump; for
# aarch64 the Rust target aarch64-unknown-linux-gnu (rustup target add aarch64-unknown-linux-gnu).
set -euo pipefail
cd "$(dirname "$0")/.."

SCRIPT=wheel.sh
# shellcheck source=scripts/lib/portable.sh
. scripts/lib/portable.sh
parse_targets "$@"
need cargo "rustup (https://rustup.rs)"
need cargo-zigbuild "pip install -r scripts/build-requirements.txt   (prebuilt; or: cargo install cargo-zigbuild --locked)"
need python3 "apt-get install python3"
need objdump "apt-get install binutils"
need_zig
need_rust_targets

version=$(crate_version)
mkdir -p dist
for arch in "${arches[@]}"; do
    build_portable "$arch"
    start=$SECONDS
    wheel=$(python3 scripts/lib/wheel.py build --binary "$portable_bin" --arch "$arch" \
        --version "$version" --out dist)
    size=$(stat -c %s "$wheel")
    echo "$wheel"
    echo "    size: $size bytes ($(((size + 1023) / 1024)) KiB); runs on glibc ${portable_glibc#GLIBC_} or newer; packed in $((SECONDS - start)) s"
done
