"""`python -m torchrun_preflight ARGS...` runs the `preflight` binary this wheel installed."""

import os
import shutil
import sys
import sysconfig


def _binary():
    """The `preflight` binary of this installation: the scripts directory of the scheme the
    package was installed with (a venv, the user site or the system), else PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    schemes = [None]
    user = "{}_user".format(os.name)
    if user in sysconfig.get_scheme_names():
        schemes.append(user)
    for scheme in schemes:
        paths = sysconfig.get_paths(scheme) if scheme else sysconfig.get_paths()
        purelib = os.path.abspath(paths.get("purelib", ""))
        candidate = os.path.join(paths.get("scripts", ""), "preflight")
        if here.startswith(purelib) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("preflight")


def main():
    binary = _binary()
    if binary is None:
        sys.stderr.write(
            "torchrun_preflight: the `preflight` binary is missing from this environment; "
            "reinstall it with: python -m pip install --force-reinstall torchrun-preflight\n"
        )
        return 127
    os.execv(binary, [binary] + sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
