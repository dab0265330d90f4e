"""The job's own first steps, run inside a built rlaunch image (scripts/image check runs this there).

Each step is a child process of this image's python, as a node would start it, and prints one line:
  rlaunch CLI         python -m rlaunch --help
  node probe imports  what preflight's node probe imports and reports: ray, the framework (its
                      version must be the pinned one), torch
  entrypoint          the framework's training entrypoint with --help (nothing trains); "skip"
                      where its adapter names none yet
  ray version         `ray --version`, which must equal the pin: job submission needs the same Ray
                      on the cluster and in the launcher

Usage: python -m rlaunch.verify.image FRAMEWORK --ray VERSION [--framework-version VERSION]
Exit: 0 every step passed; 1 a step failed (its line says which and why); 2 bad arguments.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from rlaunch import cmdline
from rlaunch.errors import ConfigError, EXIT_FAILED, EXIT_USAGE
from rlaunch.registry import frameworks

PROG = "image-check"
STEP_TIMEOUT_S = 300  # a cold import of torch + transformers on a loaded 2-core machine stays well under
# The node probe's own functions, run in a fresh process: the same imports the probe makes on a node.
PROBE = """
import json, sys
import ray
from rlaunch.verify.probes import framework_info, gpu_info
print(json.dumps({"ray": ray.__version__, "framework": framework_info(sys.argv[1]),
                  "gpu": gpu_info(True)}))
"""


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False)


def _why(proc: subprocess.CompletedProcess[str]) -> str:
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return f"exit {proc.returncode}: {lines[-1] if lines else 'no output'}"


def step_cli() -> tuple[bool, str]:
    proc = _run([sys.executable, "-m", "rlaunch", "--help"])
    ok = proc.returncode == 0 and "rlaunch" in proc.stdout + proc.stderr  # fire prints help to stderr
    return ok, "python -m rlaunch --help" + ("" if ok else f": {_why(proc)}")


def step_probe(framework: str, want_version: str) -> tuple[bool, str]:
    proc = _run([sys.executable, "-c", PROBE, framework])
    if proc.returncode != 0:
        return False, f"node probe imports: {_why(proc)}"
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    got = facts["framework"]["version"]
    torch_error = facts["gpu"].get("cuda", {}).get("error")
    summary = f"node probe imports: ray {facts['ray']}, {framework} {got}, torch " + (
        "absent" if torch_error else "importable")
    if got == "absent":
        return False, f"{summary} ({facts['framework'].get('error', 'not importable')})"
    if want_version and got != want_version:
        return False, f"{summary}: {framework} {got} is not the pinned {want_version}"
    if torch_error:
        return False, f"{summary}: {torch_error}"
    return True, summary


def step_entrypoint(framework: str) -> tuple[bool | None, str]:
    entry = frameworks.descriptor(framework).images.entrypoint_help
    if not entry:
        return None, f"entrypoint: the {framework} adapter names no entrypoint --help to run yet"
    proc = _run([sys.executable, *entry])
    label = "entrypoint: python " + " ".join(entry)
    return proc.returncode == 0, label + ("" if proc.returncode == 0 else f": {_why(proc)}")


def step_ray_version(want: str) -> tuple[bool, str]:
    try:
        proc = _run(["ray", "--version"])
    except OSError as err:
        return False, f"ray --version: {err}"
    words = proc.stdout.split()
    got = words[-1] if proc.returncode == 0 and words else ""
    if not got:
        return False, f"ray --version: {_why(proc)}"
    return got == want, f"ray --version: {got}" + (" (the pin)" if got == want else f", the pin is {want}")


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser(PROG, __doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("framework")
    parser.add_argument("--ray", required=True, help="the pinned Ray version")
    parser.add_argument("--framework-version", default="", help="the pinned framework version")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else 0

    try:
        frameworks.descriptor(args.framework)
    except ConfigError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return EXIT_USAGE
    steps: list[Callable[[], tuple[bool | None, str]]] = [
        step_cli, lambda: step_probe(args.framework, args.framework_version),
        lambda: step_entrypoint(args.framework), lambda: step_ray_version(args.ray)]
    failed = 0
    for step in steps:
        try:
            ok, line = step()
        except subprocess.TimeoutExpired as err:
            ok, line = False, f"{err.cmd[1:3]} did not finish in {STEP_TIMEOUT_S} s"
        print(f"{PROG}: {'skip' if ok is None else 'ok  ' if ok else 'FAIL'} {line}", flush=True)
        failed += ok is False
    return EXIT_FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main())
