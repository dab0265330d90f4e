"""The Make front door passes every knob value to rlaunch byte for byte and never executes it.

Each test runs the real Makefile (`make render`, `make image-build`, ...) with values that make or a
shell would expand or run: ${oc.env:USER}, $$5, a backtick command, $(touch FILE), both quotes,
spaces inside quotes, a backslash, a newline. A value either arrives exactly (spec.json, and as one
argument of the job.sh command line, read back by bash itself) or is refused by rlaunch's own
one-line error, exit 2; and FILE never exists.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The knobs are the Makefile's `NAME ?= ## ...` lines (what `make help` lists).
KNOB_NAMES = [line.split()[0] for line in (ROOT / "Makefile").read_text().splitlines()
              if line[:1].isupper() and " ?=" in line and "## " in line]
VALUES = {
    "hydra-interpolation": "${oc.env:USER}x",
    "double-dollar": "$$5",
    "backtick": "`touch {ran}`",
    "command-substitution": "$(touch {ran})",
    "both-quotes": "say \"hi\" it's",
    "space-in-quotes": "a \"b c\" 'd e'",
    "backslash": "back\\slash and\\n no newline",
}


def make(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    """The real Makefile, in a clean environment: nothing from an outer make or the user's knobs."""
    base = {k: v for k, v in os.environ.items()
            if k not in KNOB_NAMES and not k.startswith(("RLAUNCH_KNOB_", "MAKE")) and k != "MFLAGS"}
    return subprocess.run(["make", "-C", str(ROOT), *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, check=False)


def own_error(proc: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The one error line, which must be the program's own (not bash's, not a Python traceback)."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("make: *** [")]
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    return lines[0]


def words_of(command: str, tmp: Path) -> list[str]:
    """What bash makes of a rendered command line: its arguments, exactly (nothing runs: `set --`)."""
    proc = subprocess.run(["bash", "-c", f"set -- {command}; printf '%s\\0' \"$@\""],
                          env={"PATH": os.environ["PATH"], "RLAUNCH_ARTIFACTS": str(tmp)},
                          capture_output=True, text=True, check=True)
    return proc.stdout.split("\0")[:-1]


@pytest.fixture(params=list(VALUES), ids=list(VALUES))
def value(request, tmp_path) -> tuple[str, Path]:
    ran = tmp_path / "ran"
    return VALUES[request.param].replace("{ran}", str(ran)), ran


def test_a_value_reaches_spec_json_and_job_sh_exactly(value, tmp_path):
    text, ran = value
    # OUT takes any path but a newline (the next test), so any other value must arrive as it is.
    out = tmp_path / "out" / text.replace("\n", "")
    override = f"trainer.project_name={text}"
    # SET is split like a shell command line: quote the YAML list the way a shell user would.
    sets = "framework.overrides=" + shlex.quote(json.dumps([override])) + ' model.path="my models/m 1"'
    proc = make("render", "INFRA=gcp", "PRESET=verl-ppo-gsm8k-0.5b", "RUN_ID=t-make-knobs",
                f"OUT={out}", f"SET={sets}")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads((out / "spec.json").read_text())
    assert spec["run"]["out"] == str(out)
    assert spec["framework"]["overrides"] == [override]
    assert spec["model"]["path"] == "my models/m 1"  # a space inside quotes stays in one value
    command = re.search(r"^\s*(python3 -m verl\..*?) 2>&1 \| tee", (out / "job.sh").read_text(), re.M | re.S)
    argv = words_of(command.group(1), tmp_path)
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert argv[-1] == override and "actor_rollout_ref.model.path=my models/m 1" in argv
    assert not ran.exists()


# knob -> (make arguments besides the knob, how the value is written, the start of the error line)
REFUSED = {
    "PRESET": (["render"], "{}rehearsal", "rlaunch: config: PRESET="),
    "RUN_ID": (["render"], "{}", "rlaunch: config: run.id="),
    "WORK_ROOT": (["render", "INFRA=aistudio"], "/mnt/{}", "rlaunch: config: storage.mount="),
    "INFRA_SPEC": (["render", "INFRA=sky"], "gcp/{}", "rlaunch: config: infra.sky_infra="),
    "ACCELERATOR": (["render", "INFRA=gcp", "GPUS_PER_NODE=1"], "{}", "rlaunch: config: cluster.accelerator="),
    "REGISTRY": (["image-build", "FRAMEWORK=verl"], "ghcr.io/{}", "image: REGISTRY "),
    "TAG": (["image-build", "FRAMEWORK=verl"], "v1{}", "image: TAG "),
    "BASE": (["image-build", "FRAMEWORK=trl"], "standin{}", "image: BASE "),
    "BUILDER": (["image-check", "FRAMEWORK=trl"], "buildah{}", "image: BUILDER "),
}


@pytest.mark.parametrize("knob", list(REFUSED))
def test_a_refused_value_is_rlaunchs_own_error_and_runs_nothing(knob, value, tmp_path):
    text, ran = value
    args, form, prefix = REFUSED[knob]
    given = form.format(text)
    out = tmp_path / "out"
    # From the environment, as the workflows pass them (the test above passes them as arguments).
    proc = make(*args, f"OUT={out}", env={knob: given, "DOCKER": str(tmp_path / "no-docker")})
    line = own_error(proc, prefix)
    assert repr(given) in line  # the value arrived exactly
    assert not out.exists() and not ran.exists()


def test_an_override_with_a_newline_is_refused(tmp_path):
    """One line is meant: a newline would start a new line of job.sh or of a log."""
    out = tmp_path / "out"
    sets = "framework.overrides=" + shlex.quote(json.dumps(["trainer.project_name=a\nb"]))
    proc = make("render", "INFRA=gcp", "PRESET=verl-ppo-gsm8k-0.5b", "RUN_ID=t-make-knobs", f"OUT={out}", f"SET={sets}")
    assert "framework.overrides=" in own_error(proc, "rlaunch: config: framework.overrides=")
    assert "one line of text without control characters" in proc.stderr and not out.exists()


def test_out_with_a_newline_is_refused(tmp_path):
    out = tmp_path / "a\nb"
    proc = make("render", f"OUT={out}")
    assert repr(str(out)) in own_error(proc, "rlaunch: config: run.out=")
    assert "(from OUT): a directory path without control characters" in proc.stderr
    assert not out.exists()


def test_an_open_quote_in_set_is_an_error_naming_set(tmp_path):
    proc = make("render", f"OUT={tmp_path / 'out'}", "SET=run.name=\"x")
    line = own_error(proc, "rlaunch: config: SET=")
    assert line.startswith("rlaunch: config: SET='run.name=\"x': no closing quotation")
    assert not (tmp_path / "out").exists()


def test_status_and_verify_read_their_knobs_exactly(tmp_path):
    odd = tmp_path / "no run $(touch x) `y`"
    proc = make("status", f"OUT={odd}")
    # Nothing rendered there and no RUN_ID to ask an infrastructure about: rlaunch's own exit 2.
    assert proc.returncode == 2 and f"({odd} has no run.json)" in proc.stderr, proc.stderr
    proc = make("verify", f"RUN_DIR={odd}")
    assert str(odd) in proc.stdout + proc.stderr and proc.returncode != 0
    assert not (ROOT / "x").exists()


def test_every_declared_knob_is_exported():
    """The Makefile's `NAME ?= ## ...` lines are the knobs; each reaches recipes as RLAUNCH_KNOB_NAME."""
    assert {"PRESET", "SET", "OUT", "RUN_ID", "WORK_ROOT", "INFRA_SPEC", "REGISTRY", "TAG"} <= set(KNOB_NAMES)
    proc = make("-pn", "help", env={"TAG": "$(x)"})
    exported = {line.split(" ", 1)[0].split(":")[0] for line in proc.stdout.splitlines()
                if line.startswith("RLAUNCH_KNOB_")}
    assert {f"RLAUNCH_KNOB_{k}" for k in KNOB_NAMES} <= exported
    assert "RLAUNCH_KNOB_TAG := $$(x)" in proc.stdout  # a literal $ (make -p prints it doubled)
