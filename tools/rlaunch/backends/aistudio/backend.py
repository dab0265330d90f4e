"""INFRA=aistudio: a managed Ray platform that creates the Ray cluster itself (seed 003).

AIStudio has no public submit API. A task is a form: workers, GPUs, image, env vars, a Ray RuntimeEnv
JSON and a startup command that the platform runs on the Ray head once its cluster is up. rlaunch
renders exactly those, plus a run script; `make launch` installs the run script, the job and
rlaunch's own tools on the shared storage and prints the three things to paste. The driver joins
the platform's cluster (RAY_ADDRESS=auto): nothing here runs `ray start`.

On the shared storage (WORK_ROOT, i.e. storage.mount, in every worker and, as in the seed, where
`make launch` runs; infra.install_root where this machine mounts it elsewhere):
    rlaunch/launches/<run_id>/   run.sh, job.sh, spec.json, framework files, the paste files,
                                 home/ (rlaunch's tools/, scripts/, configs/), SHA256SUMS
    runs/<run_name>/<run_id>/    the run's outputs (paths.run_dir), never overwritten
Inputs are prepared there beforehand, each directory with a SHA256SUMS manifest (`sha256sum`
output); the run script checks them before anything starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rlaunch import ROOT, verify
from rlaunch.backends.base import Answer, Backend, LaunchPlan, Place, Run, RunHandle
from rlaunch.config import ckptsize
from rlaunch.config import code as codepack  # `code` names the checkout's record here
from rlaunch.config import inputs as run_inputs
from rlaunch.config.spec import Config, Spec
from rlaunch.errors import CheckError, MissingPrerequisite
from rlaunch.frameworks import accel
from rlaunch.config.inputs import MANIFEST
from rlaunch.job.data import manifest_text, upload
from rlaunch.plan import artifacts, jobenv
from rlaunch.plan.render import render_template, with_header
from rlaunch.registry import frameworks

LAUNCHES = "rlaunch/launches"
# rlaunch's own files a run needs on the cluster (the job's preflight/postflight and their config).
HOME_DIRS = ("tools/rlaunch", "scripts", "configs")
# The platform's own variables: it sets them for the cluster it created; a RuntimeEnv must not.
PLATFORM_ENV = ("RAY_ADDRESS", "RAY_HEAD_IP", "RAY_HEAD_ADDRESS", "RAY_PORT", "RAY_GCS_ADDRESS")
# Offline on the cluster: the task never downloads, it reads the pinned inputs on the shared storage.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# ---------------------------------------------------------------- what the spec says


def launch_rel(spec: Spec) -> str:
    return f"{LAUNCHES}/{spec.run.id}"


def launch_dir(spec: Spec) -> str:
    """The launch directory as the workers see it."""
    return f"{spec.storage.mount}/{launch_rel(spec)}"


def install_root(spec: Spec) -> Path:
    """The shared storage where `make launch` runs: infra.install_root, else the workers' mount path."""
    return Path(spec.infra.install_root or spec.storage.mount)


def _adapter(spec: Spec) -> Any:
    return frameworks.get(spec.framework.name)


def checkout(spec: Spec) -> dict[str, Any] | None:
    """The framework's pinned git checkout on the shared storage, when its entrypoint lives in one.

    The adapter says where (`checkout(spec)`, e.g. RLinf's <mount>/code/checkouts/<commit>); the files
    the run needs from it are the adapter's inputs under that path.
    """
    adapter, commit = _adapter(spec), spec.pins.framework_commit
    path = adapter.checkout(spec).rstrip("/")
    if not path or not commit:
        return None
    required = [p[len(path) + 1:] for p in adapter.inputs(spec) if p.startswith(path + "/")]
    return {"path": path, "commit": commit, "required": required}


def manifests(spec: Spec) -> list[dict[str, Any]]:
    """Input directories that must match their SHA256SUMS: the model and the dataset where
    rlaunch.config.inputs puts them (the pinned revision's directories, or model.path / data.path), each with
    the files it must list (the adapter's inputs there, the model's config, tokenizer and weights)."""
    items = sorted(run_inputs.of(spec), key=lambda item: item.what != "model")
    return [{"what": item.what, "dir": item.dir, "required": list(item.required)} for item in items]


def pins_env(spec: Spec) -> dict[str, str]:
    """The pins the run script prints (and exports), so a log says exactly what ran."""
    pins = spec.pins
    return {
        "RLAUNCH_FRAMEWORK": spec.framework.name,
        "RLAUNCH_FRAMEWORK_VERSION": pins.framework_version,
        "RLAUNCH_FRAMEWORK_COMMIT": pins.framework_commit,
        "RLAUNCH_IMAGE": pins.image,
        "RLAUNCH_RAY_VERSION": pins.ray,
        "RLAUNCH_MODEL": pins.model.get("hf_id", ""),
        "RLAUNCH_MODEL_REVISION": pins.model.get("revision", ""),
        "RLAUNCH_DATASET": pins.dataset.get("hf_id", ""),
        "RLAUNCH_DATASET_REVISION": pins.dataset.get("revision", ""),
    }


def job_env(spec: Spec) -> dict[str, str]:
    """Non-secret env of the driver and of every Ray worker: the adapter's, offline, NCCL, PYTHONPATH."""
    # Offline by default (the platform's nodes reach no hub); under 8 GPUs per worker the platform
    # gives no RDMA (form: rdma off), so the NCCL settings say IP only.
    env = jobenv.job_env(spec, OFFLINE_ENV)
    # Workers import the framework's checkout and rlaunch (the rehearsal's train loop) from the
    # shared storage; the adapter's own entries (the image's /opt/Megatron-LM) stay in between.
    code = checkout(spec)
    parts = [spec.paths.code_dir] if spec.paths.code_dir else []  # CODE's pack (rlaunch.config.code) first
    parts += [code["path"]] if code else []
    parts += _adapter(spec).pythonpath(spec)
    parts += [p for p in env.get("PYTHONPATH", "").split(":") if p]
    parts.append(f"{launch_dir(spec)}/home/tools")
    env["PYTHONPATH"] = ":".join(dict.fromkeys(parts))
    return dict(sorted(env.items()))


def runtime_env(spec: Spec) -> dict[str, Any]:
    """The Ray RuntimeEnv pasted into the form: code from the shared storage, env for every worker."""
    code = checkout(spec)
    env: dict[str, Any] = {}
    if code:
        # The pinned checkout is the job's working dir; history and docs are never imported.
        env.update(working_dir=code["path"], excludes=["/.git/", "/docs/"])
    env["env_vars"] = job_env(spec)
    return env


def target_steps(spec: Spec) -> int:
    return spec.train.steps


def tensorboard_path(run_dir: str) -> str:
    """What the form's TensorBoard path is for a run directory: its run id is the platform's ${RUN_ID}."""
    return f"{run_dir.rsplit('/', 1)[0]}/${{RUN_ID}}/tensorboard"


def form(spec: Spec) -> dict[str, Any]:
    """The task form's values, in the order the platform asks for them."""
    cluster, infra = spec.cluster, spec.infra
    env = {"WORK_ROOT": spec.storage.mount, "RUN_ID": spec.run.id,
           "TARGET_STEPS": str(target_steps(spec))}
    if infra.image_bin:
        # The platform runs `ray` from the task's PATH before the startup command: the image's
        # venv must come first (seed 003); without image_bin the image's own PATH stays.
        env["PATH"] = f"{infra.image_bin}:{SYSTEM_PATH}"
    return {
        "task_type": "training",
        "spot": infra.spot,
        "gpu": cluster.accelerator,
        "distributed_framework": "Ray",
        "workers": cluster.nodes,
        "gpus_per_worker": cluster.gpus_per_node,
        "rdma": infra.rdma,
        "image": spec.pins.image,
        "auto_restart": False,
        "storage_mount": spec.storage.mount,
        "env": env,
        "secrets": list(spec.secrets),
        # The platform fills in ${RUN_ID} from the env var above; RLinf writes {log_path}/tensorboard.
        "tensorboard_path": tensorboard_path(spec.paths.run_dir),
        "launch_dir": launch_dir(spec),
        "runtime_env": "runtime_env.json",
        "startup_command": "startup.sh",
    }


# ---------------------------------------------------------------- checks


def validate_runtime_env(env: object, spec: Spec) -> list[str]:
    """Ray's own RuntimeEnv validation plus the rules Ray does not make; raise CheckError."""
    from ray.runtime_env import RuntimeEnv  # ~1 s: only when checking

    if not isinstance(env, dict):
        raise CheckError("runtime_env", f"must be a JSON object, got {type(env).__name__}")
    unknown = sorted(set(env) - set(RuntimeEnv.known_fields))
    if unknown:
        # Ray keeps unknown keys as plugin names and ignores them: a typo would pass silently.
        raise CheckError("runtime_env", f"unknown key {unknown[0]!r}; allowed: "
                                        f"{', '.join(sorted(RuntimeEnv.known_fields))}")
    env_vars = env.get("env_vars") or {}
    for key, value in (env_vars.items() if isinstance(env_vars, dict) else ()):
        if not isinstance(value, str):
            raise CheckError("runtime_env", f"env_vars.{key}={value!r}: values must be strings "
                                            f"(quote it: \"{value}\")")
    work = env.get("working_dir")
    if isinstance(work, str) and "://" not in work and not os.path.isdir(work):
        # Ray checks a local working_dir exists, and it exists on the platform's storage, not here.
        mount = spec.storage.mount
        if not work.startswith(mount + "/"):
            raise CheckError("runtime_env", f"working_dir={work} is not on the shared storage "
                                            f"({mount}), so the workers cannot read it")
        env = {k: v for k, v in env.items() if k != "working_dir"}
    try:
        RuntimeEnv(**env)
    except (TypeError, ValueError) as err:
        raise CheckError("runtime_env", str(err).splitlines()[0]) from None
    platform = sorted(set(env_vars) & set(PLATFORM_ENV))
    if platform:
        raise CheckError("runtime_env", f"env_vars.{platform[0]}: the platform sets it for the cluster it "
                                        "created; a RuntimeEnv must not")
    secrets = sorted(set(env_vars) & set(spec.secrets))
    if secrets:
        raise CheckError("runtime_env", f"env_vars.{secrets[0]} is a secret: set it in the task form, "
                                        "never in a rendered file")
    return [f"runtime_env.json accepted by ray.runtime_env.RuntimeEnv "
            f"({', '.join(sorted(k for k in env if k != 'working_dir'))}; working_dir on the shared storage)"]


def bash_syntax(files: dict[str, str]) -> list[str]:
    """bash's own parser on every script a task runs (bash -n reads, never executes)."""
    names = [n for n in ("startup.sh", "run.sh", "job.sh") if n in files]
    for name in names:
        proc = subprocess.run(["bash", "-n", "/dev/stdin"], input=files[name], text=True,
                              capture_output=True, check=False)
        if proc.returncode:
            raise CheckError("bash", f"{name}: {proc.stderr.strip().splitlines()[0]}")
    return [f"bash -n: {', '.join(names)}"]


# ---------------------------------------------------------------- install


def home_files(root: Path = ROOT) -> dict[str, Path]:
    """rlaunch's files the cluster runs (relative path under home/ -> source), no caches."""
    out = {}
    for top in HOME_DIRS:
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                out[str(path.relative_to(root))] = path
    return out


def stage(files: dict[str, str], target: Path) -> None:
    """Write the rendered files and rlaunch's home/ into target, then its SHA256SUMS."""
    for relpath, text in files.items():
        path = target / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755 if text.startswith("#!") else 0o644)
    for relpath, source in home_files().items():
        path = target / "home" / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, path)
    (target / MANIFEST).write_text(manifest_text(target), encoding="utf-8")


def _differences(old: str, new: str) -> list[str]:
    def parse(text: str) -> dict[str, str]:
        return {name: digest for digest, _, name in (line.partition("  ") for line in text.splitlines())}

    a, b = parse(old), parse(new)
    return sorted(name for name in set(a) | set(b) if a.get(name) != b.get(name))


def install(spec: Spec, files: dict[str, str]) -> tuple[Path, bool]:
    """Put the launch on the shared storage; (its directory, whether it was already there)."""
    root = install_root(spec)
    if not root.is_dir():
        raise MissingPrerequisite(
            f"WORK_ROOT {root}", f"not a directory here: mount the shared storage that the AIStudio task "
            f"mounts at {spec.storage.mount} at the same path here, or tell make launch where it is "
            "mounted here: SET=infra.install_root=<path>")
    if not os.access(root, os.W_OK):
        raise MissingPrerequisite(f"write access to WORK_ROOT {root}", "mount the shared storage read-write")
    run_dir = root / Path(spec.paths.run_dir).relative_to(spec.storage.mount)
    if run_dir.exists():
        raise CheckError("run_id", f"RUN_ID={spec.run.id} was already used: {run_dir} exists; "
                                   "pick a new one (make launch INFRA=aistudio RUN_ID=...)")
    target = root / launch_rel(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        stage(files, staging)
        if target.exists():
            old = (target / MANIFEST).read_text(encoding="utf-8") if (target / MANIFEST).is_file() else ""
            changed = _differences(old, (staging / MANIFEST).read_text(encoding="utf-8"))
            if changed:
                raise CheckError("install", f"{target} holds a different version of run {spec.run.id} "
                                            f"({len(changed)} files differ: {', '.join(changed[:6])}"
                                            f"{', ...' if len(changed) > 6 else ''}); it is never "
                                            "overwritten: launch with a new RUN_ID")
            return target, True
        staging.rename(target)  # atomic: a reader sees the whole launch or none of it
        return target, False
    finally:
        if staging.exists():
            shutil.rmtree(staging)


# ---------------------------------------------------------------- the backend


# Seed 003 asks for at least 25 GiB free on the shared storage for each run ("每次运行建议至少预留 25 GiB"):
# what setup.sh asks for when the run's checkpoints cannot be estimated offline (rlaunch.config.ckptsize).
FREE_GIB = 25
SETUP_RUNNER = """On AIStudio you run it once, where the shared storage is mounted at
# the same path and the network reaches {sites} (seed 003's AICoder), from the launch
# directory: `cd home && bash ../setup.sh`. The task never downloads: run.sh checks what this left."""


def space_needed(spec: Spec) -> tuple[int, str]:
    """GiB setup.sh asks to be free, and why: the run's checkpoints, from the model's facts (offline:
    its pin or the facts cache), else seed 003's 25 GiB."""
    found = ckptsize.of(spec, offline=True)
    if isinstance(found, str):
        return FREE_GIB, f"seed 003 asks for {FREE_GIB} GiB a run (its checkpoints are not estimated offline)"
    return max(1, math.ceil(found.need / 2**30)), found.line()


def setup_script(spec: Spec) -> str:
    """setup.sh for the launch directory: the free-space check, then the framework's own preparation
    (its pinned checkout, the pinned model and dataset with their SHA256SUMS), each step idempotent.
    "" when the framework has nothing to prepare."""
    lines = frameworks.get(spec.framework.name).setup(spec)
    if not lines:
        return ""
    mount = shlex.quote(spec.storage.mount)
    need, why = space_needed(spec)
    message = shlex.quote(f"{why}: free some space, or a larger train.save_freq")
    free = (f'free_kib="$(df --output=avail -k {mount} | tail -n 1)"; '
            f'if ((free_kib < {need} * 1024 * 1024)); then echo "setup: {spec.storage.mount} has '
            f'$((free_kib / 1024 / 1024)) GiB free, the run needs {need} GiB: "{message} >&2; '
            "exit 3; fi")
    return render_template("common/setup.sh.j2", spec=spec, lines=[free, *lines],
                           runner=SETUP_RUNNER.format(sites=run_inputs.sites(spec)))


def stage_data(spec: Spec) -> str:
    """DATA= of this machine copied into WORK_ROOT as INFRA=local uploads it (once: a copy whose
    SHA256SUMS is its content hash is kept); run.sh checks it by that manifest. What it did, one line."""
    source = spec.pins.source
    dest = install_root(spec) / Path(source["dir"]).relative_to(spec.storage.mount)
    done = upload(Path(source["local"]), dest, source["sha256"])
    return (f"aistudio: dataset {source['local']} "
            + (f"staged at {source['dir']} ({done['copied']} files)" if done["copied"]
               else f"already at {source['dir']}, nothing copied"))


class AIStudio(Backend):
    name = "aistudio"
    secrets_from_env = False  # typed into the task form (form.md lists them), never sent by rlaunch
    resume_hint = "a run directory is never reused (the run script refuses its RUN_ID): launch a new RUN_ID"

    def render(self, spec: Spec) -> dict[str, str]:
        files = artifacts.common(spec)
        env = runtime_env(spec)
        files["runtime_env.json"] = render_template("aistudio/runtime_env.json.j2", runtime_env=env)
        # run.sh and startup.sh get their headers here, not in artifacts.finish: the startup command
        # carries the SHA-256 of the run script's final text, and form.md the command's final text.
        setup = setup_script(spec)
        run = with_header(spec, "run.sh", render_template(
            "aistudio/run.sh.j2", spec=spec, pins=pins_env(spec), env=job_env(spec), prepare=bool(setup),
            target_steps=target_steps(spec), checkout=checkout(spec), manifests=manifests(spec),
            code_manifest=codepack.MANIFEST,
            modules=verify.job_modules(spec.framework.name), rules=accel.rules_for(spec.framework.name, spec.cluster.accelerator)))
        startup = with_header(spec, "startup.sh", render_template(
            "aistudio/startup.sh.j2", spec=spec, launch_rel=launch_rel(spec),
            run_sha256=hashlib.sha256(run.encode()).hexdigest()))
        values = form(spec)
        if setup:
            files["setup.sh"] = setup
        files.update({
            "run.sh": run,
            "startup.sh": startup,
            "form.json": render_template("aistudio/form.json.j2", form=values),
            "form.md": render_template("aistudio/form.md.j2", spec=spec, form=values, runtime_env=env,
                                       prepare=launch_dir(spec) if setup else "",
                                       free_gib=space_needed(spec)[0], sites=run_inputs.sites(spec),
                                       startup=startup),
        })
        return files

    def check(self, spec: Spec, files: dict[str, str]) -> list[str]:
        env = json.loads(files["runtime_env.json"])
        lines = validate_runtime_env(env, spec)
        lines += bash_syntax(files)
        return lines

    def plan(self, spec: Spec, files: dict[str, str]) -> list[str]:
        root = install_root(spec)
        prepare = ([f"(once) prepare the inputs where the storage is mounted and {run_inputs.sites(spec)} "
                    "are reachable "
                    f"(AICoder): cd {launch_dir(spec)}/home && bash ../setup.sh   "
                    f"# checks {space_needed(spec)[0]} GiB free, "
                    f"{'' if spec.code.command else 'clones the pinned checkout, '}prepares the inputs as listed "
                    "above (downloads, SHA256SUMS); a second run downloads nothing"]
                   if "setup.sh" in files else [])
        staged = ([f"stage CODE's pack into WORK_ROOT at {spec.paths.code_dir} (kept when there: the name is the "
                 "hash); run.sh checks every file and the hash before anything starts"] if spec.paths.code_dir else [])
        if spec.pins.source.get("kind") == "local":
            staged.append(f"stage DATA={spec.pins.source['local']} into WORK_ROOT at {spec.pins.source['dir']} (kept "
                        f"when its {run_inputs.MANIFEST} matches: the name is the content hash); run.sh checks it")
        return [
            f"install into WORK_ROOT {root}/{launch_rel(spec)}/: run.sh, job.sh, spec.json, "
            f"rlaunch's tools (home/), SHA256SUMS (refused if a different version is there)",
            *staged,
            *prepare,
            "print the three things to paste: the RuntimeEnv JSON, the startup command, the form values "
            f"({spec.run.out}/form.md)",
            "you submit the task in the AIStudio console (no public submit API): the run script then "
            "checks inputs, runs preflight, the job, postflight",
        ]

    def inputs_now(self, spec: Spec, files: dict[str, str]) -> list[str]:
        """Decided where the storage is mounted: this machine does not see it."""
        if "setup.sh" not in files:
            return []
        return ["prepared or not: decided by the prepare step (`bash ../setup.sh` where the storage is mounted: "
                "a matching stamp reads nothing), and run.sh checks the stamps again"]

    def place(self, spec: Config) -> Place:
        return Place(spec.infra.name, storage=spec.storage.mount, storage_here=spec.infra.install_root)

    def kind(self, spec: Spec) -> str:
        return "launch"

    def resource_name(self, infra: str, run_id: str) -> str:
        return f"{LAUNCHES}/{run_id}"  # the launch directory, under the shared storage

    def launch(self, plan: LaunchPlan) -> int:
        spec, files = plan.spec, plan.rendered  # what plan checked and wrote: installed as is
        target, existed = install(spec, files)
        packed = codepack.of(spec)  # the plan's hash, or exit 2; run.sh checks it again on the platform
        if packed is not None:
            dest = install_root(spec) / Path(spec.paths.code_dir).relative_to(spec.storage.mount)
            print(f"aistudio: code {packed.hash[:12]} {'staged' if codepack.stage(packed, dest) else 'already'} "
                  f"at {spec.paths.code_dir}")
        if spec.pins.source.get("kind") == "local":
            print(stage_data(spec))
        if not (target / RunHandle.FILE).is_file():
            # Beside the launch (not in its SHA256SUMS): any machine with the storage finds the run.
            self.handle(plan).write(target)
        print(paste_text(spec, files, target, existed))
        return 0

    # --- from the run id alone: the launch directory on the shared storage answers ----------------

    def handle_of(self, run_id: str, place: Place, **defaults: Any) -> RunHandle:
        """The handle the launch left beside its files on the shared storage; without one, a handle
        that says so (kind "": status/logs/down/dashboard then say nothing is there)."""
        path = _storage_root(place) / LAUNCHES / run_id / RunHandle.FILE
        if path.is_file():
            return _read_handle(path, place)
        return super().handle_of(run_id, place, **defaults)

    def runs(self, place: Place) -> Answer:
        launches = _storage_root(place) / LAUNCHES
        runs = [_launch_run(_read_handle(path, place), path.parent)
                for path in sorted(launches.glob(f"*/{RunHandle.FILE}"))]
        return Answer(f"{launches}/*/{RunHandle.FILE}", tuple(runs))

    def find(self, run: RunHandle) -> Answer:
        found = self._which(run, "")
        path = _storage_root(run.place) / LAUNCHES / run.run_id
        return Answer(str(path / RunHandle.FILE), (_launch_run(found, path),) if found else ())

    def _which(self, run: RunHandle, verb: str) -> RunHandle | None:
        """The launch's handle: this one when it says what it is, else the one on the shared storage
        (None: not there, said on stdout where a verb asks)."""
        if run.kind:
            return run
        found = self.handle_of(run.run_id, run.place)
        if not found.kind:
            if verb:
                print(f"aistudio: nothing of run {run.run_id} on the shared storage: no "
                      f"{_storage_root(run.place) / LAUNCHES / run.run_id / RunHandle.FILE}"
                      + (": nothing to do" if verb == "down" else ""))
            return None
        return found

    def status(self, run: RunHandle) -> int:
        found = self._which(run, "status")
        if found is None:
            return 1
        print(where_text(found))
        for name in ("preflight.json", "verification.json"):
            report = _run_path(found) / name
            if report.is_file():
                passed = json.loads(report.read_text(encoding="utf-8")).get("passed")
                print(f"aistudio: {name}: {'passed' if passed else 'FAILED'} ({report})")
        return 0

    def logs(self, run: RunHandle) -> int:
        found = self._which(run, "logs")
        if found is None:
            return 1
        logs = [_run_path(found) / "driver.log", _run_path(found) / "logs" / "job.log"]
        log = next((p for p in logs if p.is_file()), None)
        if log is not None:
            print(f"aistudio: last lines of {log} (the platform's task page shows the live log):")
            print("".join(log.read_text(encoding="utf-8", errors="replace").splitlines(True)[-40:]), end="")
        else:
            print(f"aistudio: no {logs[0]} yet: follow the task's log on its AIStudio page")
        return 0

    def down(self, run: RunHandle) -> int:
        found = self._which(run, "down")
        if found is None:
            return 0
        print(f"aistudio: stop the task in the AIStudio console (rlaunch cannot: no public API). The launch "
              f"({_storage_root(found.place, check=False)}/{found.name}) and the run's outputs ({_run_path(found)}) "
              "stay on the shared storage; delete them there if you no longer need them.")
        return 0

    def dashboard(self, run: RunHandle, port: int | None = None) -> int:
        found = self._which(run, "dashboard")
        if found is None:
            return 1
        print("aistudio: open the task's page in the AIStudio console: it links the Ray dashboard and "
              f"TensorBoard ({tensorboard_path(found.run_dir)})")
        return 0


def _storage_root(place: Place, check: bool = True) -> Path:
    """The shared storage as this machine sees it, or MissingPrerequisite."""
    root = Path(place.storage_here or place.storage)
    if check and not root.is_dir():
        raise MissingPrerequisite(f"the AIStudio shared storage at {root}",
                                  f"mount the storage the tasks mount at {place.storage} (WORK_ROOT) "
                                  "at the same path here, or say where it is mounted here: "
                                  "SET=infra.install_root=<path>")
    return root


def _read_handle(path: Path, here: Place) -> RunHandle:
    """A launch's handle from the shared storage, with the storage where this machine sees it."""
    found = RunHandle.read(path)
    return dataclasses.replace(found, place=dataclasses.replace(found.place, storage_here=here.storage_here))


def _launch_run(run: RunHandle, launch: Path) -> Run:
    run_dir = _run_path(run)
    try:
        passed = json.loads((run_dir / "verification.json").read_text(encoding="utf-8")).get("passed")
        state = "passed" if passed else "FAILED"
    except (OSError, ValueError):
        state = "started" if run_dir.is_dir() else "installed, not started"
    return Run(run_id=run.run_id, infra="aistudio", state=state, where=f"launch {launch}",
               nodes=run.nodes, gpus_per_node=run.gpus_per_node, accelerator=run.accelerator,
               created=launch.stat().st_mtime, kind="launch", active=state in ("started", "installed, not started"))


def _run_path(run: RunHandle) -> Path:
    """The run directory as this machine sees it (under WORK_ROOT)."""
    return _storage_root(run.place, check=False) / Path(run.run_dir).relative_to(run.place.storage)


def where_text(run: RunHandle) -> str:
    run_dir = _run_path(run)
    state = "exists (the task has started)" if run_dir.exists() else "not created yet (the task has not started)"
    return (f"aistudio: the task's state is on its AIStudio page (no public API). Run directory {run_dir}: "
            f"{state}.")


def paste_text(spec: Spec, files: dict[str, str], target: Path, existed: bool) -> str:
    """What `make launch` prints: where it installed, and the three things to paste, verbatim."""
    env = json.loads(files["runtime_env.json"])
    values = form(spec)
    rule = "-" * 72
    lines = [
        f"aistudio: {'already installed, unchanged' if existed else 'installed'}: {target}",
        "aistudio: submission is manual: AIStudio has no public submit API. Create a training task in its "
        "console with these three things:",
        rule, "1. Task form", rule,
        f"resource: {'Spot' if values['spot'] else 'on-demand'}; distributed framework: Ray; workers: "
        f"{values['workers']}; GPUs per worker: {values['gpus_per_worker']} {values['gpu'] or '(CPU only)'}; RDMA: "
        f"{'on' if values['rdma'] else 'off'}; auto restart: off",
        f"image: {values['image']} (as imported into your tenant's registry)",
        f"shared storage: mounted at {values['storage_mount']} in every worker",
        *[f"env: {name}={value}" for name, value in values["env"].items()],
        *[f"env: {name}=<your secret; rlaunch never writes it>" for name in values["secrets"]],
        f"TensorBoard path: {values['tensorboard_path']}",
        rule, "2. Ray RuntimeEnv (JSON)", rule,
        json.dumps(env, indent=2),
        rule, "3. Startup command", rule,
        files["startup.sh"].rstrip("\n"),
        rule,
        f"The same, as Markdown: {spec.run.out}/form.md. The run's log prints "
        "RLAUNCH_RUN_STATUS=passed once postflight verified it; then: make status / make logs "
        f"RUN_ID={spec.run.id}.",
    ]
    return "\n".join(lines)


BACKEND = AIStudio()

