#!/usr/bin/env python3
"""Check what the GitHub workflow schema cannot: every `run:` block of .github/workflows/*.yml
parses as bash (`bash -n`, with each ${{ expression }} replaced by a word), and every
scripts/... file a block runs exists in the repository and is executable.

.ci/run runs it after check-jsonschema has validated the same files against GitHub's schema.
Usage: python3 scripts/check-workflows.py   (needs PyYAML: apt-get install python3-yaml)
"""

import glob
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    sys.exit("check-workflows.py: needs PyYAML; install it with: apt-get install python3-yaml")


def runs(workflow):
    """(job id, step name, run text) of every step with a run block."""
    for job_id, job in (workflow.get("jobs") or {}).items():
        for index, step in enumerate(job.get("steps") or []):
            if "run" in step:
                yield job_id, step.get("name", "step {}".format(index + 1)), step["run"]


def problems(root, path):
    with open(path, encoding="utf-8") as f:
        workflow = yaml.safe_load(f)
    found = []
    for job_id, step, text in runs(workflow or {}):
        where = "{}: job {}, {}".format(os.path.relpath(path, root), job_id, step)
        script = re.sub(r"\$\{\{.*?\}\}", "EXPR", text)
        check = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        if check.returncode != 0:
            found.append("{}: bash -n: {}".format(where, check.stderr.strip()))
        for called in sorted(set(re.findall(r"\bscripts/[\w./-]+", script))):
            target = os.path.join(root, called)
            if not os.path.isfile(target):
                found.append("{}: runs {}, which the repository does not have".format(where, called))
            elif not called.endswith(".txt") and not os.access(target, os.X_OK):
                found.append("{}: runs {}, which is not executable (chmod +x {})".format(
                    where, called, called))
    return found


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(root, ".github", "workflows", "*.yml")))
    if not paths:
        sys.exit("check-workflows.py: no .github/workflows/*.yml under {}".format(root))
    found = [p for path in paths for p in problems(root, path)]
    for line in found:
        print(line, file=sys.stderr)
    if found:
        sys.exit(1)
    print("workflows: {} file(s), every run block parses and its scripts exist".format(len(paths)))


if __name__ == "__main__":
    main()
