#!/usr/bin/env bash
# Build the release tarballs that run on the nodes of a GPU cluster:
#   dist/preflight-<version>-<arch>-unknown-linux-gnu.tar.gz (+ .sha256)
# holding preflight-<version>/{preflight, README.md, LICENSE files, examples/}.
#
# The binary is linked against glibc 2.17 (CentOS 7, RHEL 8, Ubuntu 20.04 and every newer
# distribution) with cargo-zigbuild: zig ships the headers and stub libraries of every glibc
# version, so `--target x86_64-unknown-linux-gnu.2.17` links against 2.17's symbols from any
# build host. A static musl binary is not an option: NVML, CUDA and NCCL are dlopen'ed at run
# time and are glibc libraries. scripts/wheel.sh packs the same binary (build_portable in
# scripts/lib/portable.sh builds it for both; the second script finds cargo's build fresh).
#
# Usage: scripts/dist.sh [--target x86_64|aarch64|all]   (default: all)
# Needs (installs nothing): cargo, cargo-zigbuild, zig (or python3 -m ziglang; both prebuilt
# from PyPI: `pip install -r scripts/build-requirements.txt`), objdump (aarch64-linux-gnu-objdump is used for the
# aarch64 binary when present), tar, gzip, sha256sum; for aarch64 the Rust target
# aarch64-unknown-linux-gnu (rustup target add aarch64-unknown-linux-gnu).
# The aarch64 binary cannot run here; qemu-aarch64 -L /usr/aarch64-linux-gnu runs it
# (apt-get install qemu-user libc6-arm64-cross).
set -euo pipefail
cd "$(dirname "$0")/.."

SCRIPT=dist.sh
# shellcheck source=scripts/lib/portable.sh
. scripts/lib/portable.sh
parse_targets "$@"

# --- Tools: check, never install --------------------------------------------------------------
need cargo "rustup (https://rustup.rs)"
need cargo-zigbuild "pip install -r scripts/build-requirements.txt   (prebuilt; or: cargo install cargo-zigbuild --locked)"
need_zig
need tar "apt-get install tar"
need gzip "apt-get install gzip"
need sha256sum "apt-get install coreutils"
need objdump "apt-get install binutils"
need_rust_targets

# --- Version --------------------------------------------------------------------------------
version=$(crate_version)

mkdir -p dist
for arch in "${arches[@]}"; do
    triple="$arch-unknown-linux-gnu"
    build_portable "$arch"
    bin=$portable_bin
    needed=$portable_glibc

    name="preflight-$version"
    tarball="dist/$name-$triple.tar.gz"
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    mkdir "$stage/$name"
    install -m 0755 "$bin" "$stage/$name/preflight"
    cp README.md "$stage/$name/"
    licenses=(LICENSE*)
    if [ -e "${licenses[0]}" ]; then
        cp "${licenses[@]}" "$stage/$name/"
    else
        echo "dist.sh: warning: the repository has no LICENSE file (Cargo.toml: license = MIT OR Apache-2.0); none packed" >&2
    fi
    [ -d examples ] && cp -R examples "$stage/$name/"
    # Owner root and sorted names, so the archive does not carry this machine's users.
    tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -cf - "$name" |
        gzip -9n >"$tarball"
    rm -rf "$stage"
    trap - EXIT
    (cd dist && sha256sum "$(basename "$tarball")" >"$(basename "$tarball").sha256")

    size=$(stat -c %s "$tarball")
    sha=$(cut -d' ' -f1 <"$tarball.sha256")
    echo "$tarball"
    echo "    size:   $size bytes ($(((size + 1023) / 1024)) KiB)"
    echo "    sha256: $sha"
    echo "    runs on glibc ${needed#GLIBC_} or newer"
done
