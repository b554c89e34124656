#!/usr/bin/env python3
"""Write the torchrun-preflight wheel (PEP 427) around a prebuilt `preflight` binary.

scripts/wheel.sh calls this with the glibc-2.17 binary scripts/dist.sh packs too, so the
tarball and the wheel hold the same bytes and the binary is built once. The wheel holds:

  torchrun_preflight/*.py                         python/torchrun_preflight (python -m ...)
  torchrun_preflight-V.data/scripts/preflight     the binary, mode 0755: pip puts it on PATH
  torchrun_preflight-V.dist-info/METADATA         from pyproject.toml's [project], README.md
  torchrun_preflight-V.dist-info/WHEEL            py3-none-manylinux_2_17_ARCH.manylinux2014_ARCH
  torchrun_preflight-V.dist-info/licenses/LICENSE-*   the repository's license files
  torchrun_preflight-V.dist-info/RECORD           every file's sha256 and size

Entries are sorted and dated SOURCE_DATE_EPOCH (else 1980-01-01), so the same inputs give the
same wheel. Standard library only; Python 3.8+ (pyproject.toml is read with tomllib, or tomli
where tomllib is missing: Python before 3.11).

Usage: wheel.py build --binary PATH --arch x86_64|aarch64 --version CARGO_VERSION --out DIR
           (prints the wheel's path)
       wheel.py verify WHEEL...          (RECORD against the files; prints each binary's sha256)
       wheel.py name CARGO_VERSION ARCH  (the wheel's file name, as build writes it)
"""

import argparse
import base64
import hashlib
import os
import re
import sys
import time
import zipfile

ARCHES = ("x86_64", "aarch64")
# ELF e_machine (little-endian u16 at offset 18) of each architecture.
ELF_MACHINE = {"x86_64": 62, "aarch64": 183}
# The ceiling scripts/lib/portable.sh checks the binary against (GLIBC_MAX).
GLIBC = (2, 17)
# pyproject.toml's [project] keys this writer turns into METADATA; any other key is refused,
# so a field added there cannot silently miss the wheel.
KNOWN_KEYS = {
    "name", "version", "description", "readme", "license", "requires-python",
    "keywords", "classifiers", "dynamic", "urls", "authors",
}


def fail(message):
    sys.stderr.write("wheel.py: {}\n".format(message))
    sys.exit(1)


def load_project(root):
    """pyproject.toml's [project] table."""
    try:
        import tomllib as toml
    except ImportError:
        try:
            import tomli as toml
        except ImportError:
            fail("reading pyproject.toml needs Python 3.11+ (tomllib) or: pip install tomli")
    path = os.path.join(root, "pyproject.toml")
    try:
        with open(path, "rb") as f:
            project = toml.load(f).get("project")
    except (OSError, ValueError) as e:
        fail("cannot read {}: {}".format(path, e))
    if not isinstance(project, dict) or "name" not in project:
        fail("{} has no [project] table with a name".format(path))
    unknown = sorted(set(project) - KNOWN_KEYS)
    if unknown:
        fail("pyproject.toml [project] has keys this writer does not map: {}; "
             "add them to scripts/lib/wheel.py".format(", ".join(unknown)))
    return project


def pep440(version):
    """Cargo's SemVer as a PEP 440 version: 1.2.3-rc.1 -> 1.2.3rc1 (as maturin does)."""
    m = re.fullmatch(r"(\d+\.\d+\.\d+)(?:-(alpha|beta|rc)\.?(\d+))?(?:\+[0-9A-Za-z.]+)?", version)
    if not m:
        fail("Cargo version {!r} has no PEP 440 form (use X.Y.Z or X.Y.Z-alpha|beta|rc.N)"
             .format(version))
    base, pre, num = m.groups()
    return base + ({"alpha": "a", "beta": "b", "rc": "rc"}[pre] + num if pre else "")


def license_files(root):
    return [n for n in sorted(os.listdir(root))
            if n.startswith("LICENSE") and os.path.isfile(os.path.join(root, n))]


def metadata(project, version, root):
    """METADATA (core metadata 2.4, the fields maturin wrote) from [project] and the README."""
    lines = [
        "Metadata-Version: 2.4",
        "Name: " + project["name"],
        "Version: " + version,
    ]
    if project.get("description"):
        lines.append("Summary: " + project["description"])
    if project.get("keywords"):
        lines.append("Keywords: " + ",".join(project["keywords"]))
    for author in project.get("authors", []):
        if author.get("name"):
            lines.append("Author: " + author["name"])
        if author.get("email"):
            lines.append("Author-email: " + author["email"])
    license_ = project.get("license", {})
    if isinstance(license_, dict) and license_.get("text"):
        lines.append("License: " + license_["text"])
    for name in license_files(root):
        lines.append("License-File: " + name)
    for classifier in project.get("classifiers", []):
        lines.append("Classifier: " + classifier)
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    for label, url in sorted(project.get("urls", {}).items()):
        lines.append("Project-URL: {}, {}".format(label, url))
    readme = project.get("readme")
    body = ""
    if readme:
        if not isinstance(readme, str) or not readme.endswith(".md"):
            fail("pyproject.toml readme must be a Markdown file name, not {!r}".format(readme))
        try:
            with open(os.path.join(root, readme), encoding="utf-8") as f:
                body = f.read()
        except OSError as e:
            fail("cannot read the readme {}: {}".format(readme, e))
        lines.append("Description-Content-Type: text/markdown; charset=UTF-8; variant=GFM")
    return "\n".join(lines) + "\n\n" + body


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "{},sha256={},{}".format(name, digest, len(data))


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        fail("cannot read {}: {}".format(path, e))


def distribution(project):
    """The name as wheel file names spell it: torchrun_preflight."""
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def platforms(arch):
    return ["manylinux_{}_{}_{}".format(GLIBC[0], GLIBC[1], arch), "manylinux2014_" + arch]


def wheel_name(project, cargo_version, arch):
    return "{}-{}-py3-none-{}.whl".format(
        distribution(project), pep440(cargo_version), ".".join(platforms(arch)))


def contents(args, root, project):
    """(archive name, bytes, mode) of every file but RECORD, in wheel order."""
    dist = distribution(project)
    version = pep440(args.version)
    if project.get("version") not in (None, version):
        fail("pyproject.toml's version {} is not Cargo.toml's {}".format(project["version"], version))
    info = "{}-{}.dist-info".format(dist, version)
    package = os.path.join(root, "python", dist)
    if not os.path.isfile(os.path.join(package, "__init__.py")):
        fail("{} is not a Python package (no __init__.py)".format(package))
    files = []
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            files.append(("{}/{}".format(dist, name), read(os.path.join(package, name)), 0o644))
    binary = read(args.binary)
    if not binary.startswith(b"\x7fELF") or len(binary) < 20:
        fail("{} is not an ELF binary".format(args.binary))
    machine = int.from_bytes(binary[18:20], "little")
    if machine != ELF_MACHINE[args.arch]:
        fail("{} is built for ELF machine {}, not {} ({}): give the {} binary".format(
            args.binary, machine, args.arch, ELF_MACHINE[args.arch], args.arch))
    files.append(("{}-{}.data/scripts/preflight".format(dist, version), binary, 0o755))
    files.append(("{}/METADATA".format(info),
                  metadata(project, version, root).encode("utf-8"), 0o644))
    wheel = ["Wheel-Version: 1.0", "Generator: preflight scripts/lib/wheel.py",
             "Root-Is-Purelib: false"] + ["Tag: py3-none-" + p for p in platforms(args.arch)]
    files.append(("{}/WHEEL".format(info), ("\n".join(wheel) + "\n").encode(), 0o644))
    for name in license_files(root):
        files.append(("{}/licenses/{}".format(info, name), read(os.path.join(root, name)), 0o644))
    return wheel_name(project, args.version, args.arch), "{}/RECORD".format(info), files


def write(path, record_name, files):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    record = [record_line(name, data) for name, data, _ in files] + [record_name + ",,"]
    entries = files + [(record_name, ("\n".join(record) + "\n").encode(), 0o644)]
    tmp = path + ".part"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            entry = zipfile.ZipInfo(name, date_time=stamp)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data, compresslevel=9)
    os.replace(tmp, path)


def verify(path):
    """Reads the wheel back: every file in RECORD with its hash and size, and nothing else;
    returns the packed binary's sha256 (hex)."""
    try:
        z = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        fail("cannot open {} as a wheel: {}".format(path, e))
    with z:
        names = z.namelist()
        record_name = next((n for n in names if n.endswith(".dist-info/RECORD")), None)
        if record_name is None:
            fail("{} has no RECORD".format(path))
        listed = set()
        for line in z.read(record_name).decode().splitlines():
            name, _, _ = line.partition(",")
            listed.add(name)
            if name != record_name and line != record_line(name, z.read(name)):
                fail("{}: RECORD line {!r} does not match the file".format(path, line))
        if listed != set(names):
            fail("{}: RECORD lists {} but the archive holds {}".format(
                path, sorted(listed), sorted(names)))
        binaries = [n for n in names if re.fullmatch(r"[^/]+\.data/scripts/preflight", n)]
        if len(binaries) != 1:
            fail("{} holds {} <name>.data/scripts/preflight files, not one".format(
                path, len(binaries)))
        if (z.getinfo(binaries[0]).external_attr >> 16) & 0o111 == 0:
            fail("{}: {} is not executable".format(path, binaries[0]))
        return hashlib.sha256(z.read(binaries[0])).hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="write the wheel around a binary")
    build.add_argument("--binary", required=True)
    build.add_argument("--arch", required=True, choices=ARCHES)
    build.add_argument("--version", required=True, help="Cargo.toml's version")
    build.add_argument("--out", required=True)
    check = sub.add_parser("verify", help="check wheels' RECORD; print their binary's sha256")
    check.add_argument("wheels", nargs="+")
    name = sub.add_parser("name", help="the wheel file name for a version and architecture")
    name.add_argument("version")
    name.add_argument("arch", choices=ARCHES)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if args.command == "verify":
        for path in args.wheels:
            print("{}  {}".format(verify(path), path))
        return
    project = load_project(root)
    if args.command == "name":
        print(wheel_name(project, args.version, args.arch))
        return
    filename, record_name, files = contents(args, root, project)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, filename)
    write(path, record_name, files)
    verify(path)
    print(path)


if __name__ == "__main__":
    main()
