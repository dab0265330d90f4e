"""INFRA=gcp | aws | azure | k8s | sky: one SkyPilot task per run, launched with the `sky` CLI.

render() writes task.yaml next to the common artifacts: resources (infra, accelerators, image
`docker:<pin>`, the dashboard port, autostop), num_nodes, envs, secrets as null references,
file_mounts for the shared storage and for the rendered artifacts, the rlaunch repository as
workdir, setup (rank 0 runs inputs-check.sh: the inputs checked by their stamps) and run
(scripts/ray-up on every node, job.sh once on rank 0). SPOT=1 makes it a managed job (`sky jobs
launch`) with job_recovery.

Inputs never wait on GPUs (issue 46): a CPU step, inputs.sky.yaml (one small CPU instance on the same
infra, the same storage mounted), runs setup.sh first: it downloads, converts and hashes what is
missing and stamps it (rlaunch.job.data). `make launch` runs it with `sky launch --down` and waits for
it before the GPU task; with SPOT=1 both are one managed-job pipeline (pipeline.sky.yaml, the CPU task
first). The GPU task's setup only checks the stamps; a mismatch there runs the full check (it says how
many bytes it reads) and never a download.

The artifacts directory (build/<run_id>) is .gitignore'd, so SkyPilot's workdir upload skips it;
it reaches the nodes as a file mount at /rlaunch/run instead, and the workdir upload stays the
small repository (no .venv, no build/). With framework.image=rlaunch the image carries rlaunch at
/opt/rlaunch and there is no workdir at all.

Launch first makes sure this environment has the target cloud's SkyPilot clients: `make setup`
leaves Azure's (~1.1 GB) to its first launch (rlaunch.backends.skypilot.extras). `sky` runs with its own bin
directory first on PATH: SkyPilot's checks call programs installed beside it (`az`, `aws`), and the
local API server it starts keeps that PATH.

Every cluster carries the label rlaunch-run=<run_id> (GCP label keys allow no '/' or '.'), and the
cluster or managed job is named after the run: status/logs/down/dashboard of a run known only by
its id ask SkyPilot's API server (`sky status -u -o json NAME`, `sky jobs queue -u -o json`). That
server knows what was launched through it: a run launched on another machine is found through that
machine's server or a shared one (`sky api login -e URL`).

Env (launch, status, logs, down, dashboard, runs):
    RLAUNCH_SKY  the sky executable (default: `sky` on PATH, else the one beside this Python)
    RLAUNCH_INPUTS_DEADLINE_S  launch: seconds the CPU step may take (default 10800: a 66 GB model at
                 ~10 MB/s from the hub, with margin)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import ROOT
from rlaunch.backends.base import Answer, Backend, LaunchPlan, Place, Run, RunHandle
from rlaunch.backends.skypilot import extras as skyextras
from rlaunch.config import code, inputs, knobs
from rlaunch.errors import CheckError, ConfigError, MissingPrerequisite
from rlaunch.plan import artifacts, catalog, imagecheck, jobenv
from rlaunch.plan.render import parse_back, render_template, shjoin
from rlaunch.registry import backends, frameworks
from rlaunch.validate import skypilot as v
from rlaunch.job import objects  # stdlib at import: the cloud clients load only when asked

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

ARTIFACTS_MOUNT = "/rlaunch/run"
IMAGE_HOME = "/opt/rlaunch"  # where rlaunch images (docker/<framework>) carry the repository
# The store of the bucket SkyPilot creates when the config names none; k8s follows the seed (gcs).
DEFAULT_STORE = {"gcp": "gcs", "aws": "s3", "azure": "azure", "kubernetes": "gcs"}
# `sky jobs cancel` when there is nothing to cancel: no controller, or no such job.
NOTHING_TO_CANCEL = ("All managed jobs should have finished", "No running job found", "not up")
# `sky jobs queue` when the jobs controller is not up: then no managed job is in progress.
NO_JOBS_CONTROLLER = ("No in-progress managed jobs", "All managed jobs should have finished")
RUN_LABEL = "rlaunch-run"  # on every cluster of a run: `make runs` picks rlaunch's clusters by it
FINISHED_JOB_STATES = {"SUCCEEDED", "CANCELLED", "FAILED", "FAILED_SETUP", "FAILED_PRECHECKS",
                       "FAILED_NO_RESOURCE", "FAILED_CONTROLLER"}
# The CPU step (issue 46): its task, the managed-job pipeline of SPOT=1, the GPU task's check-only setup.
INPUTS_TASK = "inputs.sky.yaml"
PIPELINE = "pipeline.sky.yaml"
CHECK_SCRIPT = "inputs-check.sh"
INPUTS_SUFFIX = "-inputs"  # the CPU step's cluster: <cluster>-inputs
OBJECT_SCHEMES = {"gcs": "gs", "s3": "s3", "r2": "r2"}  # stores whose object versions the CPU step records
PLAN_LOOK_S = 5.0  # `make plan`'s look at the inputs' records: a few seconds, never more
INPUTS_DIRS = ("models", "data")  # under storage.mount: the pinned and downloaded inputs (config.load)
# Downloads and hashing: a few cores and page cache. SkyPilot's own default CPU node is 8+ vCPUs.
INPUTS_RESOURCES = {"cpus": "4+", "memory": "16+"}
INPUTS_DEADLINE_S = 3 * 3600
# SkyPilot's cloud names (`sky status` records) -> the INFRA= value.
INFRA_OF_CLOUD = {cloud: name for name, cloud in backends.sky_clouds().items() if cloud}


def infra_string(spec: Spec) -> str:
    """INFRA_SPEC when given (config checked its syntax and that its cloud is INFRA's), else INFRA."""
    return spec.infra.sky_infra or spec.infra.name


def cloud(spec: Spec) -> str:
    """'gcp', 'aws', 'azure', 'kubernetes', another SkyPilot cloud, or '' for the wildcard '*'."""
    return knobs.sky_cloud(infra_string(spec))


def on_k8s(spec: Spec) -> bool:
    return cloud(spec) == "kubernetes"


def cluster_name(spec: Spec) -> str:
    """The SkyPilot cluster (and managed job) name: the run id, which must start with a letter."""
    return backends.infra(spec.infra.name).cluster_name(spec.run.id)


def storage_entry(spec: Spec) -> dict[str, str]:
    """file_mounts[storage.mount]: an existing bucket (source, mode) or a new one (name, store, mode)."""
    storage = spec.storage
    if storage.source:
        return {"source": storage.source, "mode": storage.mode}
    store = storage.store or DEFAULT_STORE[cloud(spec)]  # rules: a store for any other cloud
    return {"name": storage.bucket or f"rlaunch-{spec.run.id}", "store": store,
            "mode": storage.mode}


def sky_user_hash() -> str:
    """SkyPilot's user hash, found as its own get_user_hash() (sky.utils.common_utils) finds it:
    SKYPILOT_USER_ID (CI sets it from a repository variable), else ~/.sky/user_hash, else the one
    SkyPilot will generate on its first use here (computed, never written: rendering is pure)."""
    cached = Path.home() / ".sky" / "user_hash"
    for value in (os.environ.get("SKYPILOT_USER_ID", ""), cached.read_text() if cached.is_file() else ""):
        if re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9-]*", value.strip()):
            return value.strip()
    from sky.utils import common_utils  # lazy and seconds: only where SkyPilot never ran

    return str(common_utils.generate_user_hash())


def inputs_bucket_mounts(spec: Spec) -> dict[str, dict[str, Any]]:
    """Inputs outlive a run: with the default per-run bucket, <mount>/models and <mount>/data (where
    the pinned and downloaded inputs live, config.load's paths) are the user's inputs bucket instead,
    rlaunch-inputs-<SkyPilot user hash>, one prefix of it each, mounted over the per-run bucket at the
    same paths. It is created on first use, kept by `sky down` (persistent), shared by that user's
    runs. A named bucket (storage.bucket, storage.source) outlives the run itself: none then."""
    if spec.storage.source or spec.storage.bucket:
        return {}
    mount = spec.storage.mount.rstrip("/")
    used = [d for d in INPUTS_DIRS for path in (spec.paths.model_dir, spec.paths.data_dir)
            if path.startswith(f"{mount}/{d}/")]
    name = f"rlaunch-inputs-{sky_user_hash().lower()}"[:63].rstrip("-")
    store = storage_entry(spec)["store"]
    # _bucket_sub_path: SkyPilot's own prefix-of-a-bucket mount (its managed jobs' buckets use it).
    return {f"{mount}/{d}": {"name": name, "store": store, "mode": spec.storage.mode, "persistent": True,
                             "_bucket_sub_path": d} for d in dict.fromkeys(used)}


def object_url(spec: Spec, path: str) -> str:
    """gs://, s3:// or r2://BUCKET/KEY of a directory on the shared storage, where the launcher can
    list its objects; "" on this run's new bucket, or on a store whose versions are not recorded here."""
    mount, storage = spec.storage.mount.rstrip("/"), spec.storage
    for target, entry in inputs_bucket_mounts(spec).items():
        if path.startswith(target + "/"):
            base, path = f"{OBJECT_SCHEMES.get(entry['store'], '')}://{entry['name']}/{entry['_bucket_sub_path']}", \
                path[len(target) + 1:]
            break
    else:
        if storage.source:
            base = storage.source.rstrip("/")
        elif storage.bucket:
            base = f"{OBJECT_SCHEMES.get(storage_entry(spec)['store'], '')}://{storage.bucket}"
        else:
            return ""
        if not path.startswith(mount + "/"):
            return ""
        path = path[len(mount) + 1:]
    return f"{base}/{path.strip('/')}" if base.split("://")[0] in OBJECT_SCHEMES.values() else ""


def _unrecorded(spec: Spec, path: str) -> str:
    """Why the launcher cannot ask the storage for the versions of `path` (object_url's "")."""
    storage = spec.storage
    store = storage.source.split("://")[0] if storage.source else storage_entry(spec)["store"]
    if store not in OBJECT_SCHEMES and store not in OBJECT_SCHEMES.values():
        return f"not checked: {store} buckets get no record of object versions ({', '.join(OBJECT_SCHEMES)} do)"
    mount = storage.mount.rstrip("/")
    return f"not checked: {path} is on this run's new bucket (outside {mount}/models and {mount}/data)"


def _matched(count: int) -> str:
    return f"prepared ({count} object{'s' if count != 1 else ''} match its {objects.RECORD})"


def record_lines(spec: Spec) -> list[str]:
    """The CPU step's last lines: the storage's own versions of what it prepared, beside SHA256SUMS,
    for the next launch's metadata check (rlaunch.job.objects)."""
    return [f"{inputs.PY} -m rlaunch.job.objects record {shjoin([url, item.dir])}"
            for item in inputs.of(spec) if (url := object_url(spec, item.dir))]


def task_envs(spec: Spec) -> dict[str, str]:
    """Non-secret env of every node: ray-up's settings, job.sh's, and the framework's own (which
    every raylet needs, not only the driver: env set on a driver does not reach raylets)."""
    cluster = spec.cluster
    envs = {
        "RUN_ID": spec.run.id,
        "RLAUNCH_ARTIFACTS": ARTIFACTS_MOUNT,
        "RLAUNCH_PYTHON": "python3",
        "RLAUNCH_RAY_PORT": str(cluster.ray_port),
        "RLAUNCH_DASHBOARD_PORT": str(cluster.dashboard_port),
        "RLAUNCH_DEADLINE_S": str(cluster.formation_timeout_s),
    }
    if spec.framework.image == "rlaunch":
        envs["RLAUNCH_HOME"] = IMAGE_HOME
    envs.update(spec.derived.ray_health_env)  # cluster.health_check: read by the head's GCS (ray-up)
    # run.sh sets W&B's run id from SKYPILOT_TASK_ID, so a recovered managed job logs into the same run.
    return jobenv.job_env(spec, envs, tracker=False)


def secret_args(spec: Spec) -> list[str]:
    return [arg for name in spec.secrets for arg in ("--secret", name)]


def has_inputs_step(spec: Spec) -> bool:
    """A CPU step prepares the inputs when the framework has lines that prepare them."""
    return bool(frameworks.get(spec.framework.name).setup(spec))


def inputs_name(spec: Spec) -> str:
    return f"{cluster_name(spec)}{INPUTS_SUFFIX}"


def launch_argv(spec: Spec, out: Path | str) -> list[str]:
    task = str(Path(out) / "task.yaml")
    if spec.infra.spot:
        task = str(Path(out) / PIPELINE) if has_inputs_step(spec) else task
        return ["jobs", "launch", "-n", cluster_name(spec), task, *secret_args(spec), "-y"]
    return ["launch", "-c", cluster_name(spec), task, *secret_args(spec), "-y"]


def inputs_argv(spec: Spec, out: Path | str) -> list[str]:
    """The CPU step of a cluster launch: its own small cluster, taken down when its run ends."""
    return ["launch", "--down", "-c", inputs_name(spec), str(Path(out) / INPUTS_TASK), *secret_args(spec), "-y"]


def _inputs_pick(spec: Spec) -> catalog.Instance | str | None:
    """The CPU step's instance as SkyPilot's catalog would choose it; why not known; None where it is
    chosen at launch (any cloud, Kubernetes)."""
    where = cloud(spec)
    if where in ("", "kubernetes"):
        return None
    parts = infra_string(spec).split("/")
    return catalog.cpu_instance(where, INPUTS_RESOURCES["cpus"], INPUTS_RESOURCES["memory"],
                                parts[1] if len(parts) > 1 and parts[1] else None)


def inputs_resources_line(spec: Spec) -> str:
    """The CPU step's instance and hourly price, from SkyPilot's catalog as it would choose it."""
    where, wanted, pick = cloud(spec), ", ".join(f"{k} {v}" for k, v in INPUTS_RESOURCES.items()), _inputs_pick(spec)
    if pick is None:
        return f"1 x ({wanted}): the instance is chosen at launch ({where or 'any cloud'})"
    if isinstance(pick, str):
        return f"1 x ({wanted}): warning: instance and price not known: {pick}"
    price = f"${pick.price:,.2f}/h on demand" if pick.price is not None else "not priced"
    return (f"1 x {where} {pick.name} ({pick.vcpus:g} vCPUs, {pick.memory_gib:g} GiB; the cheapest for "
            f"{wanted}): {price}")


def _inputs_instance(spec: Spec) -> str:
    """The CPU step's instance and price in a few words, for the plan's inputs lines."""
    pick = _inputs_pick(spec)
    if pick is None:
        return "a small CPU instance chosen at launch"
    if isinstance(pick, str):
        return f"{INPUTS_RESOURCES['cpus']} CPUs, {INPUTS_RESOURCES['memory']} GB: instance and price not known"
    return f"{cloud(spec)} {pick.name}" + (f", ~${pick.price:,.2f}/h" if pick.price is not None else "")


def _resources(spec: Spec) -> dict[str, Any]:
    c = spec.cluster
    spot = spec.infra.spot
    return {
        "accelerators": f"{c.accelerator}:{c.gpus_per_node}" if c.gpus_per_node else "",
        # "N+" is a lower bound, as in the seeds: SkyPilot picks the cheapest instance that has it.
        "cpus": f"{c.cpus_per_node}+" if c.cpus_per_node else "",
        "memory": f"{c.memory_gb}+" if c.memory_gb else "",
        "image_id": f"docker:{spec.pins.image}",
        "network_tier": "best" if spec.infra.rdma and not on_k8s(spec) else "",
        "use_spot": spot and not on_k8s(spec),  # a managed job on Kubernetes recovers failed pods
        "autostop": spec.infra.autostop_idle_minutes > 0,
        "labels": {RUN_LABEL: spec.run.id},
    }


def resources_line(spec: Spec) -> str:
    """The instance type SkyPilot's catalog would pick for the task (the cheapest that satisfies it)
    and the whole cluster's hourly price, on demand and spot, from the same catalog."""
    c, where = spec.cluster, cloud(spec)
    wanted = ", ".join(f"{k} {v}" for k, v in _resources(spec).items() if k in ("accelerators", "cpus", "memory") and v)
    if not c.gpus_per_node or where in ("", "kubernetes"):
        return f"{c.nodes} x ({wanted or 'any'}): the instance is chosen at launch ({where or 'any cloud'})"
    parts = infra_string(spec).split("/")
    got = catalog.instances(where, c.accelerator, c.gpus_per_node, _resources(spec)["cpus"] or None,
                            _resources(spec)["memory"] or None, parts[1] if len(parts) > 1 and parts[1] else None)
    if isinstance(got, str):
        return f"{c.nodes} x ({wanted}): warning: instance and price not known: {got}"
    pick, n = got[0], c.nodes

    def cost(price: float | None) -> str:
        return f"${price * n:,.2f}/h" if price is not None else "not priced"

    return (f"{n} x {where} {pick.name} ({pick.vcpus:g} vCPUs, {pick.memory_gib:g} GiB; the cheapest of "
            f"{len(got)} for {wanted}): {cost(pick.price)} on demand, {cost(pick.spot_price)} spot for the cluster")


def _inputs_home(spec: Spec) -> str:
    """Where the prepared inputs live, and whether the next run finds them."""
    if spec.storage.source or spec.storage.bucket:
        return "a run that names the same storage finds them prepared (its CPU step checks stamps only)"
    kept = inputs_bucket_mounts(spec)
    if not kept:
        return "this run's own bucket (model.path and data.path name directories outside models/ and data/)"
    entry = next(iter(kept.values()))
    return (f"{' and '.join(kept)} on {entry['store']} bucket {entry['name']} (yours: SkyPilot user hash; "
            f"created on first use, kept by `make down`): a second launch of the same model and data "
            f"downloads nothing (its CPU step checks stamps only). storage.source=<bucket URL> names "
            f"another place")


def _json_tail(text: str, kind: type = dict) -> Any:
    """The JSON object (or list) `sky ... -o json` printed, skipping any log lines before it."""
    opener = "{" if kind is dict else "["
    for i, char in enumerate(text):
        if char == opener and (i == 0 or text[i - 1] == "\n"):
            try:
                data = json.loads(text[i:])
            except json.JSONDecodeError:
                continue
            return data if isinstance(data, kind) else kind()
    return kind()


def _gpus(accelerators: object) -> tuple[str, int | None]:
    """(type, count per node) from SkyPilot's accelerators: a dict, its str() ("{'H100': 1}") or a
    resources string ("2x[H100:1]"); ("", 0) for none, ("", None) when it cannot tell."""
    if isinstance(accelerators, dict):
        items = list(accelerators.items())
    else:
        items = re.findall(r"'?([A-Za-z][\w.-]*)'?\s*[:]\s*([\d.]+)", str(accelerators or ""))
    for name, count in items:
        if name.upper() not in ("CPU", "CPUS", "MEM", "MEMORY", "DISK"):
            return str(name), int(float(count))
    return ("", 0) if accelerators in (None, "", {}) or items else ("", None)


def _cluster_run(record: dict[str, Any], run_id: str = "") -> Run:
    labels = record.get("labels") or {}
    accelerator, gpus = _gpus(record.get("accelerators"))
    return Run(run_id=run_id or labels.get(RUN_LABEL, record.get("name", "")),
               infra=INFRA_OF_CLOUD.get(str(record.get("cloud") or "").lower(), str(record.get("cloud") or "sky").lower()),
               state=str(record.get("status") or "?"), where=f"sky cluster {record.get('name')}",
               nodes=record.get("nodes"), gpus_per_node=gpus, accelerator=accelerator,
               created=record.get("launched_at"), kind="cluster")


def _job_run(job: dict[str, Any], run_id: str = "") -> Run:
    labels = job.get("labels") or {}
    resources = str(job.get("resources") or "")
    nodes = re.match(r"\s*(\d+)x", resources)
    accelerator, gpus = _gpus(job.get("accelerators") or resources)
    state = str(job.get("status") or "?")
    cloud = str(job.get("cloud") or "").lower()
    return Run(run_id=run_id or labels.get(RUN_LABEL, job.get("job_name") or ""),
               infra=INFRA_OF_CLOUD.get(cloud, cloud if cloud not in ("", "-") else "sky"), state=state,
               where=f"sky managed job {job.get('job_id')} {job.get('job_name')}",
               nodes=int(nodes.group(1)) if nodes else (1 if resources else None), gpus_per_node=gpus,
               accelerator=accelerator, created=job.get("submitted_at"), kind="managed-job",
               active=state not in FINISHED_JOB_STATES)


SETUP_RUNNER = """The CPU step runs it (inputs.sky.yaml `run`: one writer, before any
# GPU is requested). The lines are the framework adapter's, verbatim."""
CHECK_RUNNER = """Check only: the GPU task's rank 0 runs it (task.yaml `setup`) on what
# the CPU step prepared: a matching stamp reads no file; a mismatch runs the full check, never a download."""


class SkyPilot(Backend):
    name = "skypilot"
    resume_hint = "a managed job (SPOT=1) resumes from the run's checkpoints when SkyPilot recovers it"

    def rules(self, spec: Spec) -> None:
        if spec.infra.name == "sky" and not spec.infra.sky_infra:
            raise ConfigError("infra.sky_infra", "", "a SkyPilot infra string for INFRA=sky, e.g. "
                              "gcp/us-central1 or k8s/my-context (INFRA_SPEC=...)")
        storage = spec.storage
        if not storage.source and not storage.store and cloud(spec) not in DEFAULT_STORE:
            raise ConfigError("storage.store", "", f"a bucket store for infra {infra_string(spec)!r} (gcs, s3, "
                              "azure, r2, ibm, oci), or storage.source=<bucket URL> to mount an existing one")
        for key in frameworks.get(spec.framework.name).env(spec):
            if key in spec.secrets:
                raise ConfigError("secrets", key, "a secret is passed by `--secret`, never as a framework env")

    # --- render (pure) ------------------------------------------------------------------------

    def render(self, spec: Spec) -> dict[str, str]:
        files = artifacts.common(spec)
        fw = frameworks.get(spec.framework.name)
        setup_lines = fw.setup(spec)
        image_mode = spec.framework.image == "rlaunch"
        check_lines = inputs.check_lines(spec) if setup_lines else []
        kept = inputs_bucket_mounts(spec) if setup_lines else {}
        if setup_lines:
            files["setup.sh"] = render_template("common/setup.sh.j2", spec=spec, lines=setup_lines + record_lines(spec),
                                                runner=SETUP_RUNNER)
            files[INPUTS_TASK] = render_template(
                "skypilot/inputs.yaml.j2", spec=spec, task_name=inputs_name(spec), infra=infra_string(spec),
                envs=task_envs(spec), storage=storage_entry(spec), artifacts_mount=ARTIFACTS_MOUNT,
                inputs_mounts=kept, uploads=inputs.uploads(spec), workdir="" if image_mode else str(ROOT),
                image_id=_resources(spec)["image_id"],
                labels=_resources(spec)["labels"], launch_command="sky " + shjoin(inputs_argv(spec, spec.run.out)),
                **INPUTS_RESOURCES)
        if check_lines:
            files[CHECK_SCRIPT] = render_template("common/setup.sh.j2", spec=spec, lines=check_lines,
                                                  runner=CHECK_RUNNER)
        files["task.yaml"] = render_template(
            "skypilot/task.yaml.j2", spec=spec, task_name=cluster_name(spec), infra=infra_string(spec),
            envs=task_envs(spec), storage=storage_entry(spec), artifacts_mount=ARTIFACTS_MOUNT,
            inputs_mounts=kept, workdir="" if image_mode else str(ROOT), spot=spec.infra.spot,
            code_outbox=code.outbox(spec) if spec.paths.code_dir else "",
            rdma_k8s=spec.infra.rdma and on_k8s(spec),
            launch_command="sky " + shjoin(launch_argv(spec, spec.run.out)),
            setup=bool(check_lines), setup_script=CHECK_SCRIPT, inputs_task=INPUTS_TASK,
            run=render_template("skypilot/run.sh.j2", spec=spec, spot=spec.infra.spot,
                                install=imagecheck.install_lines(spec)),
            **_resources(spec))
        if spec.infra.spot and setup_lines:
            # SkyPilot's managed-job pipeline: a first document with the name alone, then the tasks,
            # run one after the other, each on its own cluster (sky.utils.dag_utils).
            files[PIPELINE] = (f"# SkyPilot managed-job pipeline of rlaunch run {spec.run.id}: the CPU step, then "
                               f"the GPU task.\nname: {json.dumps(cluster_name(spec))}\n---\n"
                               f"{files[INPUTS_TASK]}---\n{files['task.yaml']}")
        return files

    # --- check (offline) -----------------------------------------------------------------------

    def check(self, spec: Spec, files: dict[str, str]) -> list[str]:
        task = v.parse_task(files["task.yaml"])
        fw = frameworks.get(spec.framework.name)
        framework_files = {}
        for rel, text in files.items():
            if rel not in ("task.yaml", "spec.json") and rel.endswith((".yaml", ".yml", ".json")):
                parsed = parse_back(rel, text)
                framework_files[rel] = parsed[0] if isinstance(parsed, list) and len(parsed) == 1 else parsed
        # rlaunch's own rules first: they are cheap, SkyPilot's parser costs a few seconds.
        ours = [
            v.check_image(task),
            v.check_storage(spec, task, fw.command(spec), framework_files, ARTIFACTS_MOUNT),
            v.check_secrets(spec, task, files),
            v.check_kubernetes(task, on_k8s(spec)),
        ]
        steps = {rel: files[rel] for rel in ("task.yaml", INPUTS_TASK, PIPELINE) if rel in files}
        if INPUTS_TASK in files:
            ours.append(v.check_image(v.parse_task(files[INPUTS_TASK])))
        facts = v.skypilot_facts(steps)  # one child process: `import sky` once for every file
        for rel, result in facts["tasks"].items():
            if not result["ok"]:
                parser = "sky's chain-DAG loader" if rel == PIPELINE else "sky.Task.from_yaml"
                raise CheckError("skypilot", f"{parser} rejected {rel}: {result['error']}")
        result = facts["tasks"]["task.yaml"]
        lines: list[str | None] = [
            f"task.yaml accepted by sky.Task.from_yaml (skypilot {facts['skypilot']}, isolated HOME): "
            f"{result['num_nodes']} x {', '.join(result['resources'])}"]
        if INPUTS_TASK in facts["tasks"]:
            lines.append(f"{INPUTS_TASK} accepted by sky.Task.from_yaml: "
                         f"{', '.join(facts['tasks'][INPUTS_TASK]['resources'])}")
        if PIPELINE in facts["tasks"]:
            chain = " -> ".join(facts["tasks"][PIPELINE]["chain"])
            lines.append(f"{PIPELINE} accepted by sky's chain-DAG loader: {chain}")
        lines += [
            v.check_accelerator(task, facts),
            v.check_recovery(task, facts),
            *(v.check_skypilot_storage(r) for r in facts["tasks"].values()),
            *ours,
        ]
        return [line for line in dict.fromkeys(lines) if line]

    def plan(self, spec: Spec, files: dict[str, str]) -> list[str]:
        out, name = spec.run.out, cluster_name(spec)
        storage = storage_entry(spec)
        where = (f"{storage['source']} ({storage['mode']})" if "source" in storage else
                 f"{storage['store']} bucket {storage['name']} ({storage['mode']}; SkyPilot creates it if "
                 f"missing); it stays after `make down`: `sky storage delete {storage['name']}` removes it")
        target = cloud(spec) or "any enabled infra"
        setup = "setup (rank 0 checks the inputs' stamps), " if "\nsetup:" in files["task.yaml"] else ""
        c = spec.cluster
        lines = []
        if cloud(spec) in skyextras.ON_FIRST_USE and skyextras.missing(skyextras.EXTRAS[cloud(spec)]):
            lines.append(f"first use of {cloud(spec)}: pip install SkyPilot's {cloud(spec)} extra into this venv "
                         f"({skyextras.ON_FIRST_USE[cloud(spec)]})")
        lines.append(f"sky check -o json {cloud(spec)}".rstrip() + f"   (SkyPilot must have {target} enabled)")
        if INPUTS_TASK in files:
            lines += [
                (f"step 1, inputs on CPU: the first task of {PIPELINE}" if spec.infra.spot else
                 "step 1, inputs on CPU: sky " + shjoin(inputs_argv(spec, out)) + "   (waited for, then down)"),
                f"  resources {inputs_resources_line(spec)}",
                f"  runs setup.sh on {spec.storage.mount}: downloads what is missing, stamps what it verified, "
                f"records the objects' versions ({', '.join(OBJECT_SCHEMES)}); launch skips this step when "
                "a listing from here matches that record",
                "step 2, the GPU task" + (f" (the second task of {PIPELINE}: one managed job for both)"
                                          if spec.infra.spot else "") + ":",
            ]
        lines += [
            "sky " + shjoin(launch_argv(spec, out)) + "   (follows the logs)",
            f"  resources {resources_line(spec)}",
            f"  shared storage {spec.storage.mount} <- {where}",
            *([f"  inputs live on it: {_inputs_home(spec)}"] if INPUTS_TASK in files else []),
            *([f"  code {spec.paths.code_dir} <- file mount of {code.outbox(spec)} (CODE's pack, staged there "
               "first)"] if spec.paths.code_dir else []),
            f"  every node: {setup}scripts/ray-up ({c.nodes} nodes, Ray {c.ray_port}/"
            f"{c.dashboard_port}); rank 0: bash {ARTIFACTS_MOUNT}/job.sh",
        ]
        if spec.infra.spot:
            lines.append(f"  managed job: job_recovery {spec.infra.recovery_strategy}; recoveries "
                         f"resume from {spec.paths.ckpt_dir}; W&B run id from SKYPILOT_TASK_ID")
        lines.append(f"then: make status / make logs / make dashboard / make down RUN_ID={spec.run.id}"
                     f"   (sky {'jobs ' if spec.infra.spot else ''}name {name})")
        return lines

    # --- act --------------------------------------------------------------------------------

    def _sky(self) -> str:
        wanted = os.environ.get("RLAUNCH_SKY", "")
        found = shutil.which(wanted or "sky")
        if not found and not wanted:
            beside = Path(sys.executable).parent / "sky"
            found = str(beside) if beside.exists() else None
        if not found:
            raise MissingPrerequisite(f"the sky CLI ({wanted or 'sky'})",
                                      "run `make setup` (it installs skypilot into .venv), or set RLAUNCH_SKY")
        return found

    def _run(self, *args: str, capture: bool = False, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        # argv only, never a shell string; the environment (with any secret) passes through unchanged,
        # but for PATH: SkyPilot runs `az` and `aws` from where the venv installed them, beside `sky`.
        argv = [self._sky(), *args]
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(argv[0]).parent), env.get("PATH", "")]).rstrip(os.pathsep)
        if capture:
            return subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=timeout)
        return subprocess.run(argv, check=False, text=True, env=env, timeout=timeout)

    def _require_clients(self, spec: Spec) -> None:
        """The cloud's SkyPilot extra in this venv; azure's installs here on its first launch."""
        if Path(self._sky()).parent != Path(sys.executable).parent:
            return  # another environment's sky: its own `sky check` says what it lacks
        skyextras.ensure(cloud(spec))

    def _require_cloud(self, spec: Spec) -> None:
        """SkyPilot must have the target infra enabled, or launch fails late and less clearly."""
        target = cloud(spec)
        proc = self._run("check", "-o", "json", *([target] if target else []), capture=True)
        result = _json_tail(proc.stdout) if proc.returncode == 0 else {}
        enabled = {c.lower() for clouds in result.values() if isinstance(clouds, dict)
                   for c, caps in clouds.items() if "compute" in caps}
        if (target and target not in enabled) or not enabled:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] if proc.returncode else []
            raise MissingPrerequisite(
                f"SkyPilot access to {target or 'any infra'}" + (f" ({last[0]})" if last else ""),
                f"run `{' '.join(['sky', 'check', *([target] if target else [])])}` and follow its hints "
                "(credentials, kubeconfig), then `make launch` again")

    def launch(self, plan: LaunchPlan) -> int:
        spec, out = plan.spec, plan.out
        self._sky()
        self.require_secrets(spec)
        self._require_clients(spec)
        self._require_cloud(spec)
        packed = code.of(spec)  # the plan's hash, or exit 2: the file mount uploads it from here
        if packed is not None:
            code.stage(packed, code.outbox(spec))
        argv = launch_argv(spec, out)
        if INPUTS_TASK in plan.files:
            matched, why = self._inputs_prepared(spec)
            if matched is not None:
                print(f"skypilot: inputs prepared ({matched} objects match): CPU step skipped")
                if spec.infra.spot:  # the GPU task alone, not the pipeline whose first task is the step
                    argv = [str(out / "task.yaml") if a.endswith(PIPELINE) else a for a in argv]
            elif spec.infra.spot:
                print(f"skypilot: the CPU step runs, as the managed-job pipeline's first task: {why}")
            else:
                print(f"skypilot: the CPU step runs: {why}")
                rc = self._inputs_step(spec, out)
                if rc:
                    return rc
        rc = self._run(*argv).returncode
        print(f"skypilot: {'managed job' if spec.infra.spot else 'cluster'} {cluster_name(spec)}; run dir "
              f"{spec.paths.run_dir} on the shared storage; make status / logs / down "
              f"RUN_ID={spec.run.id}")
        return rc

    def _inputs_prepared(self, spec: Spec) -> tuple[int | None, str]:
        """(objects matched, "") when every input's objects are what a CPU step recorded; else (None, why).
        Asked of the store with its own client here; never refuses: a doubt runs the step."""
        urls = []
        for item in inputs.of(spec):
            urls.append(object_url(spec, item.dir))
            if not urls[-1]:
                return None, f"the {item.what}: {_unrecorded(spec, item.dir)}"
        return objects.compare(*urls)

    def inputs_now(self, spec: Spec, files: dict[str, str]) -> list[str]:
        """Per input, whether the CPU step will find it prepared: the launcher's own check, asked
        within PLAN_LOOK_S with the credentials found here (rlaunch.job.objects.look)."""
        if INPUTS_TASK not in files:
            return []
        items = inputs.of(spec)
        urls = [object_url(spec, item.dir) for item in items]
        asked = iter(objects.look([url for url in urls if url], PLAN_LOOK_S))
        answers = [next(asked) if url else (None, _unrecorded(spec, item.dir)) for item, url in zip(items, urls)]
        if all(count is not None for count, _ in answers):
            return [f"{item.what}: {_matched(count or 0)}: the CPU step will be skipped"
                    for item, (count, _) in zip(items, answers)]
        step = (f"the managed job runs the CPU step first ({_inputs_instance(spec)})" if spec.infra.spot else
                f"make launch runs the CPU step ({_inputs_instance(spec)})")
        return [f"{item.what}: {'' if why.startswith('not checked') else 'not prepared: '}{why}: {step}"
                if count is None else
                f"{item.what}: {_matched(count)}: the CPU step keeps it (its stamp checked, no byte read)"
                for item, (count, why) in zip(items, answers)]

    def _inputs_step(self, spec: Spec, out: Path) -> int:
        """The CPU step, to its end (sky launch --down), within its deadline; 0 when the inputs are ready."""
        raw = os.environ.get("RLAUNCH_INPUTS_DEADLINE_S", str(INPUTS_DEADLINE_S))
        if not raw.isdigit() or int(raw) < 1:
            raise ConfigError("RLAUNCH_INPUTS_DEADLINE_S", raw, "a whole number of seconds >= 1")
        deadline, name = int(raw), inputs_name(spec)
        print(f"skypilot: step 1: the inputs on a CPU instance (cluster {name}), at most {deadline} s; "
              "no GPU is requested before it ends")
        try:
            rc = self._run(*inputs_argv(spec, out), timeout=deadline).returncode
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as stopped:
            # Stopped before its --down: the CPU instance is taken down here, so nothing is left behind.
            late = isinstance(stopped, subprocess.TimeoutExpired)
            why = f"did not end within {deadline} s (RLAUNCH_INPUTS_DEADLINE_S)" if late else "was interrupted"
            print(f"skypilot: the inputs step {why}; no GPU was requested; taking its CPU cluster {name} down",
                  file=sys.stderr)
            self._down(name)
            if not late:
                raise
            return 1
        if rc:
            # --down takes the cluster down with its logs: sky launch printed them above.
            print(f"skypilot: the inputs step failed ({rc}); no GPU was requested. Its log is above (cluster "
                  f"{name} is taken down after its run)",
                  file=sys.stderr)
        return rc

    # --- what SkyPilot knows: its API server answers ------------------------------------------

    def _ask(self, *args: str) -> str:
        """stdout of `sky ARGS`; MissingPrerequisite when SkyPilot cannot answer."""
        proc = self._run(*args, capture=True)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise MissingPrerequisite(f"an answer from SkyPilot (`sky {' '.join(args)}` exited {proc.returncode}"
                                      + (f": {lines[-1]}" if lines else "") + ")",
                                      "`sky api info` shows the API server it talks to, `sky check` the clouds")
        return proc.stdout

    def _clusters(self, *names: str) -> list[dict[str, Any]]:
        return [c for c in _json_tail(self._ask("status", "-u", "-o", "json", *names), list) if isinstance(c, dict)]

    def _jobs(self) -> list[dict[str, Any]]:
        proc = self._run("jobs", "queue", "-u", "-o", "json", capture=True)
        if proc.returncode != 0 and any(s in proc.stdout + proc.stderr for s in NO_JOBS_CONTROLLER):
            return []  # the jobs controller is not up: no managed job is in progress
        if proc.returncode != 0:
            return [c for c in _json_tail(self._ask("jobs", "queue", "-u", "-o", "json"), list) if isinstance(c, dict)]
        return [j for j in _json_tail(proc.stdout, list) if isinstance(j, dict)]

    def _asking(self) -> None:
        # Each sky call takes seconds (the first one starts SkyPilot's local API server): say so.
        print("skypilot: asking SkyPilot's API server (sky status, sky jobs queue)", file=sys.stderr)

    def kind(self, spec: Spec) -> str:
        return "managed-job" if spec.infra.spot else "cluster"

    def runs(self, place: Place) -> Answer:
        self._asking()
        clusters = [_cluster_run(c) for c in self._clusters() if RUN_LABEL in (c.get("labels") or {})]
        jobs = self._jobs()
        ours = [_job_run(j) for j in jobs if RUN_LABEL in (j.get("labels") or {})]
        unlabelled = sum(1 for j in jobs if not j.get("labels"))
        note = (f"skypilot: {unlabelled} managed job(s) report no labels (SkyPilot gives them only while the "
                "job's cluster is up): `sky jobs queue -u` lists them" if unlabelled else "")
        return Answer("sky status -u -o json; sky jobs queue -u -o json", tuple(clusters + ours), note)

    def find(self, run: RunHandle) -> Answer:
        self._asking()
        name, step = run.name, f"{run.name}{INPUTS_SUFFIX}"
        clusters = [_cluster_run(c, run.run_id) for c in self._clusters(name, step) if c.get("name") in (name, step)]
        jobs = [_job_run(j, run.run_id) for j in self._jobs() if j.get("job_name") == name]
        return Answer(f"sky status -u -o json {name} {step}; sky jobs queue -u -o json", tuple(clusters + jobs))

    def _nothing(self, run: RunHandle, answer: Answer, what: str, verdict: str = "") -> str:
        """The line for "SkyPilot knows nothing of this run", naming what was asked and where."""
        finished = [r for r in answer.runs if not r.active]
        server = _json_tail(self._run("api", "info", "-o", "json", capture=True).stdout).get("server") or {}
        url = server.get("url", "?")
        local = any(host in url for host in ("127.0.0.1", "localhost", "[::1]"))
        return (f"skypilot: no {what} of run {run.run_id}: `{answer.asked.replace('; ', '` and `')}` "
                f"(API server {url}) found none"
                + (f"; finished: {', '.join(f'{r.where} {r.state}' for r in finished)}" if finished else "")
                + verdict
                + (". That server is this machine's own and knows only what was launched through it: for a run "
                   "launched elsewhere, `sky api login -e <that server's URL>` first" if local else ""))

    # --- status, logs, dashboard, down ------------------------------------------------------------
    # A run whose handle says what it is (launched here) is asked of by name; one known only by its
    # id (kind "") is looked up first.

    def status(self, run: RunHandle) -> int:
        if run.kind:
            if run.kind == "managed-job":
                return self._run("jobs", "queue").returncode
            # The CPU step's cluster too: SkyPilot lists it only while it exists (a step still running,
            # or one left behind by a launch killed before its --down).
            return self._run("status", run.name, f"{run.name}{INPUTS_SUFFIX}").returncode
        answer = self.find(run)
        if not answer.runs:
            print(self._nothing(run, answer, "cluster or managed job"))
            return 1
        rc = 0
        for found in answer.runs:
            print(f"skypilot: run {found.run_id}: {found.where}: {found.state}, {found.shape()}")
            args = ("status", found.where.split()[-1]) if found.kind == "cluster" else ("jobs", "queue", "-u")
            rc = self._run(*args).returncode or rc
        return rc

    def logs(self, run: RunHandle) -> int:
        kinds = {run.kind} if run.kind else {r.kind for r in self._found(run, "cluster or managed job")}
        if not kinds:
            return 1
        if "cluster" in kinds:
            return self._run("logs", run.name).returncode
        return self._run("jobs", "logs", "-n", run.name).returncode

    def dashboard(self, run: RunHandle, port: int | None = None) -> int:
        kinds = self._kinds(run)
        if not kinds:
            return 1
        if "cluster" not in kinds:
            print(f"skypilot: a managed job's cluster belongs to the jobs controller and has no endpoint "
                  f"command; follow the job with `make logs RUN_ID={run.run_id}`")
            return 0
        # The task opens the dashboard port (resources.ports); SkyPilot knows its public endpoint.
        proc = self._run("status", "--endpoint", str(run.dashboard_port), run.name, capture=True)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        endpoint = proc.stdout.strip().splitlines()[-1].strip() if proc.stdout.strip() else ""
        if proc.returncode == 0 and endpoint and " " not in endpoint:
            url = endpoint if "://" in endpoint else f"http://{endpoint}"
            print(f"skypilot: Ray dashboard of run {run.run_id}: open {url}")
        return proc.returncode

    def _kinds(self, run: RunHandle) -> set[str]:
        """What the run is: its handle's kind (launched here), else the active runs SkyPilot knows
        (empty: none, said on stderr)."""
        if run.kind:
            return {run.kind}
        return {r.kind for r in self._found(run, "cluster or managed job", active=True)}

    def ssh(self, run: RunHandle, command: list[str] | None = None) -> int:
        """`ssh <cluster>` (the alias SkyPilot writes to ~/.ssh/config): a shell on the head node, or
        `command` run there, as seed 001 checks its cluster."""
        kinds = self._kinds(run)
        if not kinds:
            return 1
        if "cluster" not in kinds:
            print(f"skypilot: a managed job's cluster belongs to the jobs controller, not to an ssh alias of "
                  f"yours; follow the job with `make logs RUN_ID={run.run_id}`", file=sys.stderr)
            return 1
        ssh = shutil.which("ssh")
        if ssh is None:
            raise MissingPrerequisite("the ssh client", "install OpenSSH's client (apt-get install openssh-client)")
        return subprocess.run([ssh, run.name, *(command or [])], check=False).returncode

    def ray_status(self, run: RunHandle) -> int:
        """Seed 001's look at a running cluster: `ray status` and `ray summary tasks` on the head, asked
        of rlaunch's Ray (its GCS and dashboard ports), not SkyPilot's own Ray on 6380/8266."""
        gcs, dash = run.ray_port, run.dashboard_port
        return self.ssh(run, [f"ray status --address 127.0.0.1:{gcs} && "
                              f"ray summary tasks --address http://127.0.0.1:{dash}"])

    def _found(self, run: RunHandle, what: str, active: bool = False) -> list[Run]:
        answer = self.find(run)
        runs = [r for r in answer.runs if r.active or not active]
        if not runs:
            print(self._nothing(run, answer, what), file=sys.stderr)
        return runs

    def down(self, run: RunHandle) -> int:
        """The run's cluster or managed job, and a CPU step's cluster left behind. Only `sky down` and
        `sky jobs cancel`: buckets (a storage.source, the inputs bucket) are SkyPilot's to keep."""
        if run.kind == "managed-job":
            return self._cancel(run.name)  # its CPU step is the pipeline's first task: cancelled with it
        if run.kind:
            return self._down(run.name) or self._down_leftover_step(run)
        answer = self.find(run)
        live = [r for r in answer.runs if r.active]
        if not live:
            print(self._nothing(run, answer, "cluster or in-progress managed job", ": nothing to do"))
            return 0
        rc = 0
        for found in live:
            print(f"skypilot: taking down {found.where} ({found.state})")
            rc = (self._down(found.where.split()[-1]) if found.kind == "cluster" else self._cancel(run.name)) or rc
        return rc

    def _down_leftover_step(self, run: RunHandle) -> int:
        """`sky down` of the run's CPU-step cluster when SkyPilot still lists it (a launch killed before
        the step's --down); says so. Nothing listed, or SkyPilot not answering: nothing to do here."""
        step = f"{run.name}{INPUTS_SUFFIX}"
        try:
            left = [c for c in self._clusters(step) if c.get("name") == step]
        except MissingPrerequisite as err:
            print(f"skypilot: could not look for the CPU step's cluster {step}: {err}; `sky status {step}` "
                  f"shows it, `sky down {step}` removes it", file=sys.stderr)
            return 0
        if not left:
            return 0
        print(f"skypilot: taking down {step}, the run's CPU step ({left[0].get('status') or '?'}), left behind "
              "by a launch stopped before its --down; the buckets stay")
        return self._down(step)

    def _down(self, name: str) -> int:
        return self._run("down", "-y", name).returncode  # "not found" exits 0

    def _cancel(self, name: str) -> int:
        proc = self._run("jobs", "cancel", "-y", "-n", name, capture=True)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        if proc.returncode and any(s in proc.stdout + proc.stderr for s in NOTHING_TO_CANCEL):
            print(f"skypilot: no managed job {name} is running: nothing to cancel")
            return 0
        return proc.returncode


BACKEND = SkyPilot()
