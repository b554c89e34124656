#!/usr/bin/env bash
# Check a release's files in dist/ and write dist/SHA256SUMS; publishes nothing. The release
# workflow (.github/workflows/release.yml) runs it before it uploads anything, and .ci/run runs
# it on the x86_64 files as the release's dry run.
#
# For every architecture asked for, dist/ must hold the tarball (scripts/dist.sh) with its
# .sha256 and the wheel (scripts/wheel.sh) of Cargo.toml's version; then:
#   - each .sha256 holds (sha256sum -c);
#   - each wheel's RECORD matches its files (scripts/lib/wheel.py verify), and the wheel's
#     binary is the tarball's, byte for byte (the one build both pack);
#   - twine check --strict accepts the wheels (the metadata and README PyPI will render);
#   - dist/SHA256SUMS lists every tarball and wheel, and sha256sum -c accepts it.
# --tag vX.Y.Z: the tag a release is cut from must be Cargo.toml's version with a `v`.
#
# Usage: scripts/release-check.sh [--target x86_64|aarch64|all] [--tag vX.Y.Z]   (default: all)
# Needs: cargo, python3, sha256sum, tar, twine (pip install -r scripts/release-requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

SCRIPT=release-check.sh
# shellcheck source=scripts/lib/portable.sh
. scripts/lib/portable.sh
tag=
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --tag)
            [ $# -ge 2 ] || die "usage: scripts/release-check.sh [--target x86_64|aarch64|all] [--tag vX.Y.Z]"
            tag=$2
            shift 2
            ;;
        *)
            targets+=("$1")
            shift
            ;;
    esac
done
parse_targets "${targets[@]+"${targets[@]}"}"
need cargo "rustup (https://rustup.rs)"
need python3 "apt-get install python3"
need sha256sum "apt-get install coreutils"
need tar "apt-get install tar"
need twine "pip install -r scripts/release-requirements.txt"

version=$(crate_version)
if [ -n "$tag" ] && [ "$tag" != "v$version" ]; then
    die "the tag $tag is not Cargo.toml's version $version with a v (v$version): set version in Cargo.toml's [workspace.package], commit, and tag that commit v<version>"
fi

files=()
wheels=()
for arch in "${arches[@]}"; do
    tarball="preflight-$version-$arch-unknown-linux-gnu.tar.gz"
    wheel=$(python3 scripts/lib/wheel.py name "$version" "$arch")
    for f in "$tarball" "$tarball.sha256" "$wheel"; do
        [ -f "dist/$f" ] || die "dist/$f is missing; build it with: scripts/dist.sh --target $arch && scripts/wheel.sh --target $arch"
    done
    (cd dist && sha256sum --quiet --strict -c "$tarball.sha256") ||
        die "dist/$tarball does not match dist/$tarball.sha256; rebuild it with scripts/dist.sh --target $arch"
    packed=$(tar -xzOf "dist/$tarball" "preflight-$version/preflight" | sha256sum | cut -d' ' -f1)
    in_wheel=$(python3 scripts/lib/wheel.py verify "dist/$wheel" | cut -d' ' -f1)
    [ "$packed" = "$in_wheel" ] ||
        die "dist/$wheel's binary (sha256 $in_wheel) is not dist/$tarball's ($packed): build both from one checkout, scripts/dist.sh then scripts/wheel.sh"
    echo "$arch: $tarball and $wheel hold the same binary (sha256 $packed)"
    files+=("$tarball" "$wheel")
    wheels+=("dist/$wheel")
done

twine check --strict "${wheels[@]}"

# SHA256SUMS: one line per file, sorted, names relative to dist/ (sha256sum -c in that folder).
(cd dist && printf '%s\n' "${files[@]}" | sort | xargs sha256sum >SHA256SUMS)
(cd dist && sha256sum --strict -c SHA256SUMS)
echo "release files checked for preflight $version${tag:+ (tag $tag)}; nothing published:"
for f in "${files[@]}"; do
    echo "    dist/$f ($(stat -c %s "dist/$f") bytes)"
done
echo "    dist/SHA256SUMS"
