"""The GitHub workflows, run here: each workflow_dispatch input reaches the make variable of the
same name through env: (never through ${{ inputs.* }} inside run:), secrets reach only the steps
that need them, and a failed or cancelled launch runs `make down`.

The runner is simulated: a small evaluator for the GitHub expressions these workflows use fills
env: and if:, each `run:` step runs in bash as GitHub runs it (`bash -e -o pipefail`), and `make`
is a PATH stub that records its arguments and environment. `uses:` steps are skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from rlaunch.config import pins
from rlaunch.registry import backends

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
MAKE_VARS = {"infra": "INFRA", "algo": "ALGO", "preset": "PRESET", "nodes": "NODES",
             "gpus_per_node": "GPUS_PER_NODE", "spot": "SPOT", "run_id": "RUN_ID", "code": "CODE", "cmd": "CMD"}
COMMIT = "0123456789abcdef0123456789abcdef01234567"
USER_CODE = f"https://github.com/acme/rl@{COMMIT}"
USER_CMD = "python3 -m recipe.dapo.main_dapo data.train_batch_size=64 trainer.x='a b'"
SECRET_NAMES = ["WANDB_API_KEY", "HF_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                "GCP_CREDENTIALS_JSON", "KUBECONFIG_DATA", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
                "AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID", "SKYPILOT_SERVICE_ACCOUNT_TOKEN"]


def load(name: str) -> dict:
    wf = yaml.safe_load((WORKFLOWS / name).read_text())
    # PyYAML reads the bare key `on` as the boolean True (YAML 1.1).
    wf["on"] = wf.pop(True, wf.get("on"))
    return wf


# ---------------------------------------------------------------- GitHub expressions (a subset)

TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>&&|\|\||==|!=|!|\(|\)|,)"
                   r"|(?P<name>[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*))")


class Expr:
    """Recursive descent over: literals, dotted names, function calls, ! == != && || and ( )."""

    def __init__(self, text: str, ctx: dict, status: str):
        self.tokens, pos = [], 0
        while pos < len(text.rstrip()):
            m = TOKEN.match(text, pos)
            if not m:
                raise ValueError(f"unsupported expression syntax at {text[pos:]!r}")
            self.tokens.append((m.lastgroup, m.group(m.lastgroup)))
            pos = m.end()
        self.ctx, self.status, self.i = ctx, status, 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        value = self.or_()
        if self.i != len(self.tokens):
            raise ValueError(f"trailing tokens {self.tokens[self.i:]}")
        return value

    def or_(self):
        left = self.and_()
        while self.peek()[1] == "||":
            self.take()
            right = self.and_()
            left = left if left else right
        return left

    def and_(self):
        left = self.cmp()
        while self.peek()[1] == "&&":
            self.take()
            right = self.cmp()
            left = right if left else left
        return left

    def cmp(self):
        left = self.unary()
        while self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            right = self.unary()
            left = (str(left).lower() == str(right).lower()) == (op == "==")
        return left

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not self.unary()
        return self.primary()

    def primary(self):
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if text == "(":
            value = self.or_()
            self.take(")")
            return value
        if kind == "name" and self.peek()[1] == "(":
            self.take("(")
            args = []
            while self.peek()[1] != ")":
                args.append(self.or_())
                if self.peek()[1] == ",":
                    self.take()
            self.take(")")
            return self.call(text, args)
        if kind == "name":
            if text in ("true", "false", "null"):
                return {"true": True, "false": False, "null": None}[text]
            node = self.ctx
            for part in text.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            return node
        raise ValueError(f"unexpected token {text!r}")

    def call(self, name, args):
        if name == "format":
            return re.sub(r"\{(\d+)\}", lambda m: to_str(args[int(m.group(1)) + 1]), args[0])
        status = {"success": self.status == "success", "failure": self.status == "failure",
                  "cancelled": self.status == "cancelled", "always": True}
        if name in status and not args:
            return status[name]
        raise ValueError(f"function {name}() is not in this simulator: add it")


def to_str(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def interpolate(text: str, ctx: dict, status: str = "success") -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: to_str(Expr(m.group(1), ctx, status).parse()), str(text))


def condition(text: str | None, ctx: dict, status: str) -> bool:
    if text is None:
        return status == "success"  # a step with no if: runs only while nothing failed
    expr = text.strip()
    expr = expr[3:-2] if expr.startswith("${{") else expr
    return bool(Expr(expr, ctx, status).parse())


# ---------------------------------------------------------------- the simulated runner

STUB_MAKE = """#!/usr/bin/env bash
set -Eeuo pipefail
n=$(find "$STUB_DIR" -name 'make.*.args' | wc -l)
printf '%s\\n' "$@" >"$STUB_DIR/make.$n.args"
env >"$STUB_DIR/make.$n.env"
[[ " $* " == *" ${STUB_MAKE_FAIL:-none} "* ]] && { echo "stub make: $1 failed" >&2; exit 1; }
exit 0
"""


class Run:
    def __init__(self, calls: list[dict], ran: list[str], status: str, outputs: dict[str, str]):
        self.calls, self.ran, self.status, self.outputs = calls, ran, status, outputs

    def make(self, target: str) -> dict:
        matches = [c for c in self.calls if c["argv"][:1] == [target]]
        assert len(matches) == 1, f"make {target} ran {len(matches)} times: {self.calls}"
        return matches[0]


def run_workflow(tmp_path: Path, name: str, inputs: dict, secrets: dict | None = None,
                 fail: str | None = None, variables: dict | None = None) -> Run:
    wf = load(name)
    secrets = secrets or {}
    declared = wf["on"]["workflow_dispatch"]["inputs"]
    given = {k: v.get("default") for k, v in declared.items()} | inputs
    ctx = {"inputs": given, "secrets": secrets, "github": {"run_id": "4242", "run_attempt": "1"},
           "env": {}, "steps": {}, "vars": variables or {}}
    (job,) = wf["jobs"].values()
    job_env = {k: interpolate(v, ctx) for k, v in (job.get("env") or {}).items()}
    ctx["env"] = dict(job_env)

    bindir, stub_dir, temp = tmp_path / "bin", tmp_path / "calls", tmp_path / "runner-temp"
    for d in (bindir, stub_dir, temp):
        d.mkdir(parents=True, exist_ok=True)
    (bindir / "make").write_text(STUB_MAKE)
    (bindir / "make").chmod(0o755)
    github_env = tmp_path / "github-env"
    github_env.write_text("")
    base_env = {"PATH": f"{bindir}:{os.environ['PATH']}", "STUB_DIR": str(stub_dir), "HOME": str(tmp_path),
                "RUNNER_TEMP": str(temp), "GITHUB_ENV": str(github_env), "STUB_MAKE_FAIL": fail or "none"}
    exported: dict[str, str] = {}
    status, ran, outputs = "success", [], {}
    for step in job["steps"]:
        if not condition(step.get("if"), ctx, status):
            if "id" in step:
                ctx["steps"][step["id"]] = {"outcome": "skipped"}
            continue
        if "run" not in step:
            continue
        env = base_env | job_env | exported
        env |= {k: interpolate(v, ctx, status) for k, v in (step.get("env") or {}).items()}
        script = tmp_path / "step.sh"
        script.write_text(step["run"])  # run: text is used verbatim by GitHub: no expressions left here
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", str(script)],
                              env=env, capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        ran.append(step["name"])
        outputs[step["name"]] = proc.stdout + proc.stderr
        for line in github_env.read_text().splitlines():
            key, _, value = line.partition("=")
            exported[key] = value
        if proc.returncode != 0:
            status = "failure"
        if "id" in step:
            ctx["steps"][step["id"]] = {"outcome": "success" if proc.returncode == 0 else "failure"}
    calls = []
    for args in sorted(stub_dir.glob("make.*.args"), key=lambda p: int(p.name.split(".")[1])):
        env_lines = (stub_dir / args.name.replace(".args", ".env")).read_text().splitlines()
        calls.append({"argv": args.read_text().splitlines(),
                      "env": dict(line.split("=", 1) for line in env_lines if "=" in line)})
    return Run(calls, ran, status, outputs)


def make_vars(call: dict) -> dict[str, str]:
    return dict(a.split("=", 1) for a in call["argv"][1:] if "=" in a)


# ---------------------------------------------------------------- static rules


@pytest.mark.parametrize("name", ["ci.yml", "launch.yml", "down.yml"])
def test_no_expression_inside_run(name):
    """Inputs, secrets and any other context reach run: only through env: (no script injection)."""
    for job in load(name)["jobs"].values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), f"{name}: step {step.get('name')!r} interpolates into run:"


@pytest.mark.parametrize("name", ["launch.yml", "down.yml"])
def test_the_skypilot_clouds_the_workflows_name_are_the_registry_s(name):
    """Their bash tells a SkyPilot launch by INFRA: the registry's SkyPilot clouds (sky aside: not an option)."""
    found = re.findall(r'\^\(([a-z0-9|]+)\)\$', (ROOT / ".github" / "workflows" / name).read_text())
    assert found == ["|".join(n for n, cloud in backends.sky_clouds().items() if cloud)], found


def test_launch_inputs_are_typed_as_agreed():
    inputs = load("launch.yml")["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == set(MAKE_VARS)
    assert inputs["infra"]["type"] == "choice"
    # Held to the infrastructures' registry: every one but sky (any cloud), which needs INFRA_SPEC,
    # an input the workflow does not have.
    assert inputs["infra"]["options"] == [name for name in backends.names() if name != "sky"]
    assert inputs["algo"]["options"] == ["grpo", "ppo"]
    assert {k: inputs[k]["type"] for k in ("preset", "nodes", "gpus_per_node", "spot", "run_id", "code", "cmd")} == {
        "preset": "string", "nodes": "number", "gpus_per_node": "number", "spot": "boolean", "run_id": "string",
        "code": "string", "cmd": "string"}
    assert inputs["code"]["default"] == inputs["cmd"]["default"] == ""  # empty: the preset's own program


def test_launch_env_maps_each_input_to_its_make_variable():
    env = load("launch.yml")["jobs"]["launch"]["env"]
    for name, var in MAKE_VARS.items():
        assert f"inputs.{name}" in env.get(var, ""), f"{var} does not come from inputs.{name}"


def test_concurrency_group_is_per_run_id_and_shared_with_down():
    launch, down = load("launch.yml"), load("down.yml")
    ctx = {"inputs": {"run_id": "exp-7"}, "github": {"run_id": "1"}}
    assert interpolate(launch["concurrency"]["group"], ctx) == interpolate(down["concurrency"]["group"], ctx)
    assert interpolate(launch["concurrency"]["group"], ctx) != interpolate(
        launch["concurrency"]["group"], {"inputs": {"run_id": "exp-8"}, "github": {"run_id": "1"}})
    assert launch["concurrency"]["cancel-in-progress"] is False  # never kill a running launch for another
    assert down["concurrency"]["cancel-in-progress"] is True


def test_ci_runs_the_ci_script_on_push_and_pull_request():
    ci = load("ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    runs = [s["run"] for j in ci["jobs"].values() for s in j["steps"] if "run" in s]
    assert any(re.search(r"\bbash \.ci/run\b", r) for r in runs), runs


def test_ci_leaves_the_cpu_torch_to_setup_and_keeps_ci_through_sudo():
    """scripts/setup and setup-validators take torch alone from the pinned CPU index. An extra index
    for every package (PIP_EXTRA_INDEX_URL) made pip wait ~75 s on it where it is unreachable."""
    step = next(s for j in load("ci.yml")["jobs"].values() for s in j["steps"] if ".ci/run" in s.get("run", ""))
    assert not [k for k in step.get("env", {}) if k.startswith("PIP_")], step["env"]
    assert "PIP_" not in step["run"], step["run"]
    # sudo drops the environment unless told to keep it: CI=true makes a missing tool fail a test.
    assert re.search(r"--preserve-env=\S*\bCI\b", step["run"]), step["run"]
    index = pins.get_str("torch_cpu_index", pins.load_versions(ROOT / "configs" / "versions.yaml"))
    assert index.startswith("https://download.pytorch.org/whl/cpu")
    for script in ("setup", "setup-validators"):
        text = (ROOT / "scripts" / script).read_text()
        assert "cpu_torch " in text and "torch_cpu_index" in text, script


@pytest.mark.parametrize("name", ["ci.yml", "launch.yml", "down.yml"])
def test_actions_pinned_by_commit_and_checkout_keeps_no_token(name):
    for job in load(name)["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
                if step["uses"].startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False


# ---------------------------------------------------------------- behaviour


def test_each_launch_input_reaches_make(tmp_path):
    inputs = {"infra": "gcp", "algo": "ppo", "preset": "verl-ppo-gsm8k-0.5b", "nodes": 3,
              "gpus_per_node": 8, "spot": True, "run_id": "exp-1", "code": USER_CODE, "cmd": USER_CMD}
    run = run_workflow(tmp_path, "launch.yml", inputs)
    assert run.status == "success", run.outputs
    want = {"INFRA": "gcp", "ALGO": "ppo", "PRESET": "verl-ppo-gsm8k-0.5b", "NODES": "3",
            "GPUS_PER_NODE": "8", "SPOT": "1", "RUN_ID": "exp-1", "CODE": USER_CODE, "CMD": USER_CMD}
    assert [c["argv"][0] for c in run.calls] == ["setup", "plan", "launch", "summary"]
    for target in ("plan", "launch"):
        assert make_vars(run.make(target)) == want, target
    assert make_vars(run.make("summary")) == {"RUN_ID": "exp-1"}


def test_each_input_alone_changes_only_its_variable(tmp_path):
    """A swapped or dropped mapping (NODES fed from gpus_per_node, say) fails here."""
    base = run_workflow(tmp_path / "base", "launch.yml", {"run_id": "r0"})
    base_vars = make_vars(base.make("launch"))
    changed = {"infra": "aws", "algo": "ppo", "preset": "p-x", "nodes": 5, "gpus_per_node": 7,
               "spot": True, "run_id": "r1", "code": USER_CODE, "cmd": USER_CMD}
    shown = {"infra": "aws", "algo": "ppo", "preset": "p-x", "nodes": "5", "gpus_per_node": "7",
             "spot": "1", "run_id": "r1", "code": USER_CODE, "cmd": USER_CMD}
    for name, value in changed.items():
        inputs = {"run_id": "r0"} | {name: value}
        run = run_workflow(tmp_path / name, "launch.yml", inputs)
        got = make_vars(run.make("launch"))
        diff = {k: v for k, v in got.items() if base_vars.get(k) != v}
        assert diff == {MAKE_VARS[name]: shown[name]}, name


def test_defaults_spot_off_and_run_id_from_the_workflow_run(tmp_path):
    run = run_workflow(tmp_path, "launch.yml", {})
    got = make_vars(run.make("launch"))
    assert got["SPOT"] == "0" and got["RUN_ID"] == "gh-4242" and got["INFRA"] == "local"


def test_gpus_per_node_zero_is_the_presets(tmp_path):
    """The input says "0 = the preset's": GPUS_PER_NODE=0 would make every preset CPU-only."""
    assert make_vars(run_workflow(tmp_path, "launch.yml", {}).make("plan"))["GPUS_PER_NODE"] == ""
    assert make_vars(run_workflow(tmp_path / "4", "launch.yml", {"gpus_per_node": 4}).make("plan"))[
        "GPUS_PER_NODE"] == "4"


def test_hostile_input_stays_data(tmp_path):
    """An input full of shell syntax is refused as data by the input check, and runs nothing."""
    marker = tmp_path / "pwned"
    preset = f"x$(touch {marker});touch {marker}`touch {marker}`"
    run = run_workflow(tmp_path, "launch.yml", {"preset": preset, "run_id": "r1"})
    assert run.status == "failure" and run.calls == []
    assert f"::error::preset {preset!r} not allowed" in run.outputs["Check inputs"]
    assert not marker.exists()


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("code", "https://github.com/acme/rl@main", "a git repository at a full commit"),
    ("code", "/home/me/rl", "a git repository at a full commit"),  # the runner has no checkout of theirs
    ("code", f"https://github.com/acme/rl@{COMMIT}\n::warning::x", "a git repository at a full commit"),
    ("cmd", "python3 -m m a=1\x1b[2J", "without control characters"),
])
def test_bad_code_or_cmd_stops_before_make(tmp_path, name, value, needle):
    run = run_workflow(tmp_path, "launch.yml", {"run_id": "r1", name: value})
    assert run.status == "failure" and run.calls == []
    assert f"::error::{name} {value!r} not allowed: " in run.outputs["Check inputs"]
    assert needle in run.outputs["Check inputs"] and run.outputs["Check inputs"].count("::error::") == 1


def test_bad_run_id_stops_before_make(tmp_path):
    run = run_workflow(tmp_path, "launch.yml", {"run_id": "../../etc"})
    assert run.status == "failure" and run.calls == []
    assert "run_id '../../etc' not allowed" in run.outputs["Check inputs"]


@pytest.mark.parametrize("name", ["launch.yml", "down.yml"])
def test_run_id_rule_is_the_configs(tmp_path, name):
    """The workflows refuse exactly the run ids rlaunch's config refuses (one rule, rlaunch.config.knobs)."""
    from rlaunch.config import load as config

    for run_id, ok in [("exp-1", True), ("a" * 40, True), ("a" * 41, False), ("Exp-1", False),
                       ("exp_1", False), ("exp-", False), ("exp.1", False)]:
        run = run_workflow(tmp_path / run_id, name, {"infra": "local", "run_id": run_id})
        assert (run.status == "success") == ok, (name, run_id, run.outputs.get("Check inputs"))
        try:
            config.load("rehearsal", {"RUN_ID": run_id})
            accepted = True
        except config.ConfigError:
            accepted = False
        assert accepted == ok, run_id


def test_secrets_reach_launch_and_down_only_and_never_argv(tmp_path):
    secrets = {name: f"sekret-{name.lower()}" for name in SECRET_NAMES}
    run = run_workflow(tmp_path, "launch.yml", {"infra": "k8s", "run_id": "r1"}, secrets=secrets,
                       fail="launch")
    assert run.status == "failure"
    plan, launch, down = run.make("plan"), run.make("launch"), run.make("down")
    for call in (plan, launch, down):
        assert not any("sekret-" in a for a in call["argv"])
    assert not any(v.startswith("sekret-") for v in plan["env"].values())
    assert launch["env"]["WANDB_API_KEY"] == secrets["WANDB_API_KEY"]
    assert launch["env"]["HF_TOKEN"] == secrets["HF_TOKEN"]
    assert launch["env"]["AWS_SECRET_ACCESS_KEY"] == secrets["AWS_SECRET_ACCESS_KEY"]
    assert "WANDB_API_KEY" not in down["env"]  # tearing down needs cloud access, not W&B
    # File-based credentials: written 0600 under RUNNER_TEMP, only the path is exported.
    for call in (launch, down):
        kubeconfig = Path(call["env"]["KUBECONFIG"])
        assert kubeconfig.read_text().strip() == secrets["KUBECONFIG_DATA"]
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        gcp = Path(call["env"]["GOOGLE_APPLICATION_CREDENTIALS"])
        assert gcp.read_text() == secrets["GCP_CREDENTIALS_JSON"]


def test_no_credential_files_without_secrets(tmp_path):
    run = run_workflow(tmp_path, "launch.yml", {"run_id": "r1"})
    assert "KUBECONFIG" not in run.make("launch")["env"]
    assert list((tmp_path / "runner-temp").iterdir()) == []


@pytest.mark.parametrize("status", ["failure", "cancelled"])
def test_down_runs_when_launch_fails_or_is_cancelled(tmp_path, status):
    wf = load("launch.yml")
    (down,) = [s for s in wf["jobs"]["launch"]["steps"] if s.get("run", "").startswith("make down")]
    started = {"steps": {"launch": {"outcome": status}}}
    assert condition(down.get("if"), started, status)
    assert not condition(down.get("if"), {"steps": {"launch": {"outcome": "success"}}}, "success")
    # Stopped before `make launch` ran (cancelled during setup, plan failed): nothing to tear down.
    assert not condition(down.get("if"), {"steps": {"launch": {"outcome": "skipped"}}}, status)
    if status == "failure":
        run = run_workflow(tmp_path, "launch.yml", {"infra": "aws", "run_id": "r9"}, fail="launch")
        assert make_vars(run.make("down")) == make_vars(run.make("launch"))


def test_failed_plan_runs_no_launch_and_no_down(tmp_path):
    run = run_workflow(tmp_path, "launch.yml", {"run_id": "r5"}, fail="plan")
    assert run.status == "failure"
    assert [c["argv"][0] for c in run.calls] == ["setup", "plan"]


def test_success_does_not_run_down_and_uploads_the_run_folder(tmp_path):
    run = run_workflow(tmp_path, "launch.yml", {"run_id": "r2"})
    assert "down" not in [c["argv"][0] for c in run.calls]
    (upload,) = [s for s in load("launch.yml")["jobs"]["launch"]["steps"]
                 if s.get("uses", "").startswith("actions/upload-artifact@")]
    ctx = {"env": {"RUN_ID": "r2"}, "steps": {"inputs": {"outcome": "success"}}}
    assert condition(upload["if"], ctx, "failure") and condition(upload["if"], ctx, "cancelled")
    # A refused input names no artifact: nothing is uploaded.
    assert not condition(upload["if"], ctx | {"steps": {"inputs": {"outcome": "failure"}}}, "failure")
    # The plan, and the local run directory on build/storage without its checkpoints.
    assert interpolate(upload["with"]["path"], ctx).split() == [
        "build/r2/", "build/storage/runs/*/r2/", "!build/storage/runs/*/r2/checkpoint*/",
        "!build/storage/runs/*/r2/ray-train/"]
    assert interpolate(upload["with"]["name"], ctx) == "rlaunch-r2"


def test_down_workflow_passes_infra_and_run_id(tmp_path):
    inputs = load("down.yml")["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"infra", "run_id"}
    launch_inputs = load("launch.yml")["on"]["workflow_dispatch"]["inputs"]
    assert inputs["infra"]["options"] == launch_inputs["infra"]["options"]
    run = run_workflow(tmp_path, "down.yml", {"infra": "kuberay", "run_id": "exp-3"})
    assert run.status == "success", run.outputs
    assert make_vars(run.make("down")) == {"INFRA": "kuberay", "RUN_ID": "exp-3"}


def test_summary_runs_after_a_failed_launch_not_after_a_failed_plan(tmp_path):
    failed = run_workflow(tmp_path / "launch", "launch.yml", {"run_id": "r3"}, fail="launch")
    assert [c["argv"][0] for c in failed.calls] == ["setup", "plan", "launch", "summary", "down"]
    assert "summary" not in [c["argv"][0] for c in run_workflow(tmp_path / "plan", "launch.yml",
                                                                {"run_id": "r3"}, fail="plan").calls]


SKY_SERVER = "https://sky.example.org:46580"


@pytest.mark.parametrize("name", ["launch.yml", "down.yml"])
def test_the_skypilot_api_server_variable_reaches_make_only_when_set(tmp_path, name):
    """SkyPilot reads an empty SKYPILOT_API_SERVER_ENDPOINT as a URL: set it, or leave it out."""
    inputs = {"infra": "gcp", "run_id": "r4"}
    target = "launch" if name == "launch.yml" else "down"
    run = run_workflow(tmp_path / "set", name, inputs, variables={"SKYPILOT_API_SERVER_ENDPOINT": SKY_SERVER},
                       secrets={"SKYPILOT_SERVICE_ACCOUNT_TOKEN": "sky_sekret"})
    assert run.status == "success", run.outputs
    env = run.make(target)["env"]
    assert env["SKYPILOT_API_SERVER_ENDPOINT"] == SKY_SERVER and env["SKYPILOT_SERVICE_ACCOUNT_TOKEN"] == "sky_sekret"
    assert "SKYPILOT_SERVICE_ACCOUNT_TOKEN" not in run.make("setup")["env"]
    local = run_workflow(tmp_path / "local", name, {"infra": "local", "run_id": "r4"})
    assert "SKYPILOT_API_SERVER_ENDPOINT" not in local.make(target)["env"]
    bad = run_workflow(tmp_path / "bad", name, inputs, variables={"SKYPILOT_API_SERVER_ENDPOINT": "sky.example\nX=1"})
    assert bad.status == "failure" and target not in [c["argv"][0] for c in bad.calls]


def test_the_skypilot_user_variable_names_the_inputs_bucket_at_plan_and_launch(tmp_path):
    """One SkyPilot user hash on every runner: plan and launch render the same inputs bucket."""
    run = run_workflow(tmp_path, "launch.yml", {"infra": "gcp", "run_id": "r6"}, variables={"SKYPILOT_USER_ID": "ci0a1b"})
    assert run.status == "success", run.outputs
    assert run.make("plan")["env"]["SKYPILOT_USER_ID"] == run.make("launch")["env"]["SKYPILOT_USER_ID"] == "ci0a1b"


def test_launch_without_a_skypilot_server_warns_that_down_cannot_find_the_run(tmp_path):
    run = run_workflow(tmp_path, "launch.yml", {"infra": "aws", "run_id": "r5"})
    assert run.status == "success"
    assert "::warning::no SKYPILOT_API_SERVER_ENDPOINT variable" in run.outputs["Credentials"]
    assert "::warning::" not in run_workflow(tmp_path / "k", "launch.yml", {"infra": "kuberay"}).outputs["Credentials"]


@pytest.mark.parametrize("infra", ["gcp", "aws", "azure", "k8s"])
def test_down_of_a_skypilot_run_without_the_server_stops_before_setup(tmp_path, infra):
    """A fresh runner's own SkyPilot API server would answer "nothing" about a run that bills."""
    run = run_workflow(tmp_path, "down.yml", {"infra": infra, "run_id": "r6"})
    assert run.status == "failure" and run.calls == []
    assert f"::error::infra={infra} needs the repository variable SKYPILOT_API_SERVER_ENDPOINT" in \
        run.outputs["SkyPilot API server"]


def test_simulator_rejects_expressions_it_does_not_know():
    with pytest.raises(ValueError, match="not in this simulator"):
        interpolate("${{ hashFiles('x') }}", {})
