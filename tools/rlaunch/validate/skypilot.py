"""Offline validation of a rendered SkyPilot task: SkyPilot's own parser, then rlaunch's rules.

SkyPilot's parser is `sky.Task.from_yaml`: schema, resources, storage, secrets, env names and infra
strings, all offline. It runs in a child process with HOME set to a fresh temp dir, because importing
sky writes ~/.sky and reads ~/.sky/config.yaml (a user's config must not change the verdict), and
because `import sky` costs ~4 s and ~160 MB that the launcher's own process need not pay.

What SkyPilot only finds out on a server or a cloud, rlaunch checks here:
- accelerator names: against SkyPilot's own offline list (sky.utils.gpu_names, the common GPUs of
  sky.catalog, TPUs); the full catalogs are downloaded at run time, so they are not used;
- `image_id` must be `docker:<reference>` (without the prefix SkyPilot takes it for a VM image);
- `job_recovery.strategy` must be a strategy SkyPilot registers (FAILOVER, EAGER_NEXT_REGION);
- shared storage: the task mounts storage.mount, and every path the framework writes or reads
  (data, checkpoints, logs, AReaL's cluster.fileroot, ...) is an absolute path under it;
- each storage mount passes the checks SkyPilot itself runs only when it creates the storage at
  launch (`Storage._validate_source`: scheme, no sub-path in MOUNT modes; each store's
  `validate_name` for a new bucket), called here offline;
- Kubernetes cannot stop a cluster or rent spot instances;
- secrets are references (null values) only, and no secret value from the environment is in a file.

CLI (the child process; prints one JSON object):
    HOME=$(mktemp -d) python -m rlaunch.validate.skypilot TASK.yaml [TASK.yaml ...]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import dotted, hub
from rlaunch.errors import CheckError

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

TIMEOUT_S = 120
# Keys whose values are paths a framework reads or writes: they must live on the shared mount, or
# multi-node runs scatter checkpoints over node-local disks (verl issues 625, 1535).
STORAGE_KEYS = ("default_local_dir", "fileroot", "train_files", "val_files", "output_dir", "log_path",
                "run_dir", "save_dir", "ckpt_dir", "checkpoint_dir", "data_dir")
MIN_SECRET_LEN = 6  # shorter values would match by chance


# --- the child process: ask SkyPilot ------------------------------------------------------------

def _facts(paths: list[str]) -> dict[str, Any]:
    """Parse each task with SkyPilot and collect the offline registries rlaunch checks against."""
    import sky
    import sky.jobs.recovery_strategy  # noqa: F401 - registers the strategies
    from sky import catalog
    from sky.utils import gpu_names, registry

    out: dict[str, Any] = {
        "skypilot": getattr(sky, "__version__", "?"),
        "accelerators": sorted(set(gpu_names.CANONICAL_GPU_NAMES) | set(catalog.get_common_gpus())),
        "tpus": catalog.get_tpus(),
        "recovery_strategies": sorted(k.upper() for k in registry.JOBS_RECOVERY_STRATEGY_REGISTRY.keys()),
        "tasks": {},
    }
    from sky.utils import dag_utils

    for path in paths:
        try:
            # A managed-job pipeline (several YAML documents) goes through SkyPilot's chain loader;
            # its last task is the one the result describes, every task's storage is checked.
            chain = "\n---" in Path(path).read_text(encoding="utf-8")
            tasks = list(dag_utils.load_chain_dag_from_yaml(path).tasks) if chain else [sky.Task.from_yaml(path)]
        except Exception as err:  # SkyPilot's own message is the point: pass it on verbatim
            out["tasks"][path] = {"ok": False, "error": f"{type(err).__name__}: {err}".strip()}
            continue
        task = tasks[-1]
        out["tasks"][path] = {
            "ok": True,
            "num_nodes": task.num_nodes,
            "resources": [str(r) for r in task.resources],
            "storage_mounts": sorted(task.storage_mounts),
            "storage_errors": {k: v for t in tasks for k, v in _storage_errors(t).items()},
            "chain": [str(t.name) for t in tasks],
        }
    return out


def _storage_errors(task: Any) -> dict[str, str]:
    """mount path -> what SkyPilot's launch-time storage checks say (offline: no bucket is touched)."""
    from sky import exceptions
    from sky.data import storage as st

    classes = {st.StoreType.GCS: st.GcsStore, st.StoreType.AZURE: st.AzureBlobStore,
               st.StoreType.IBM: st.IBMCosStore, st.StoreType.OCI: st.OciStore}
    errors = {}
    for mount, storage in task.storage_mounts.items():
        try:
            if isinstance(storage.source, str):
                st.Storage._validate_source(storage.source, storage.mode, False)
            for store_type in storage.stores:
                cls = classes.get(store_type) or st._S3_COMPATIBLE_STORES.get(store_type.value)
                if cls is not None and storage.name:
                    cls.validate_name(storage.name)
        except (exceptions.StorageError, exceptions.StorageSpecError) as err:
            errors[mount] = f"{type(err).__name__}: {err}"
    return errors


def check_skypilot_storage(result: dict[str, Any]) -> str:
    errors = result.get("storage_errors") or {}
    if errors:
        mount = min(errors)
        raise CheckError("storage", f"SkyPilot would refuse file_mounts {mount} at launch: {errors[mount]}")
    return "storage: SkyPilot's own source and bucket-name checks pass (offline)"


def facts(*tasks: str) -> None:
    """Print, as one JSON object, what SkyPilot's own parsers say of each TASK.yaml (the child)."""
    print(json.dumps(_facts([str(task) for task in tasks])))


# --- the launcher's side --------------------------------------------------------------------------

def _child_env(home: str) -> dict[str, str]:
    """Only what the child needs: no secrets, no SKYPILOT_* settings of the caller, a fresh HOME."""
    return {"HOME": home, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "SKYPILOT_DISABLE_USAGE_COLLECTION": "1", "LC_ALL": "C.UTF-8"}


def skypilot_facts(tasks: dict[str, str]) -> dict[str, Any]:
    """Run SkyPilot's parser on each task text (name -> YAML) in an isolated HOME; name -> result."""
    with tempfile.TemporaryDirectory(prefix="rlaunch-sky-") as home:
        paths = {}
        for i, (name, text) in enumerate(tasks.items()):
            path = Path(home) / f"task{i}.yaml"
            path.write_text(text, encoding="utf-8")
            paths[str(path)] = name
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "rlaunch.validate.skypilot", *paths], env=_child_env(home),
                capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise CheckError("skypilot", f"sky.Task.from_yaml did not finish within {TIMEOUT_S} s") from None
        try:
            facts: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise CheckError("skypilot", "could not run SkyPilot's parser (is skypilot installed? `make "
                             "setup`): " + " | ".join(tail)) from None
    facts["tasks"] = {paths[p]: result for p, result in facts["tasks"].items()}
    return facts


def parse_task(text: str) -> dict[str, Any]:
    import yaml

    task = yaml.safe_load(text)
    if not isinstance(task, dict):
        raise CheckError("task.yaml", "not a mapping")
    return task


def check_accelerator(task: dict[str, Any], facts: dict[str, Any]) -> str:
    """resources.accelerators must name an accelerator SkyPilot knows (case as SkyPilot spells it)."""
    acc = (task.get("resources") or {}).get("accelerators")
    if not acc:
        return "accelerators: none (CPU nodes)"
    name, _, count = str(acc).partition(":")
    known = {a.lower(): a for a in facts["accelerators"]}
    if name.lower().startswith("tpu-"):
        if name.lower() not in {t.lower() for t in facts["tpus"]}:
            raise CheckError("accelerator", f"cluster.accelerator={name!r} is not a TPU SkyPilot lists "
                             f"offline; known: {', '.join(facts['tpus'])}")
    elif name.lower() not in known:  # SkyPilot matches names case-insensitively, so do we
        raise CheckError("accelerator", f"cluster.accelerator={name!r} is not an accelerator SkyPilot "
                         f"knows; one of: {', '.join(facts['accelerators'])}")
    if not re.fullmatch(r"[1-9][0-9]*", count):
        raise CheckError("accelerator", f"resources.accelerators={acc!r}: need NAME:COUNT with COUNT >= 1 "
                         "(cluster.gpus_per_node)")
    return f"accelerators {acc} known to SkyPilot"


def check_image(task: dict[str, Any]) -> str:
    """SkyPilot reads an image_id without `docker:` as a cloud VM image: the container would be lost."""
    image = str((task.get("resources") or {}).get("image_id") or "")
    ref = image[len("docker:"):] if image.startswith("docker:") else ""
    if not ref or ref.startswith("docker:") or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*", ref):
        raise CheckError("image", f"resources.image_id={image!r}: need 'docker:<image reference>' (the pin "
                         "in configs/versions.yaml images.<framework>.<framework.image>, without a prefix)")
    return f"image_id {image}"


def check_recovery(task: dict[str, Any], facts: dict[str, Any]) -> str | None:
    recovery = (task.get("resources") or {}).get("job_recovery")
    if recovery is None:
        return None
    strategy = recovery.get("strategy") if isinstance(recovery, dict) else recovery
    if str(strategy).upper() not in facts["recovery_strategies"]:
        raise CheckError("job_recovery", f"infra.recovery_strategy={strategy!r}: SkyPilot's strategies are "
                         f"{', '.join(facts['recovery_strategies'])}")
    restarts = recovery.get("max_restarts_on_errors", 0) if isinstance(recovery, dict) else 0
    return f"job_recovery {str(strategy).upper()}, {restarts} restarts on errors"


def _storage_values(node: object, key: str = "") -> list[tuple[str, str]]:
    """(key, value) for every storage-like key in a parsed framework file (YAML/JSON), any depth."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            found += _storage_values(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list):
        for v in node:
            found += _storage_values(v, key)
    elif key.rsplit(".", 1)[-1] in STORAGE_KEYS and isinstance(node, str) and node:
        found.append((key, node))
    return found


def _lookup(doc: object, key: str) -> str | int | float | None:
    node = dotted.get(doc, key, None)
    return node if isinstance(node, (str, int, float)) else None


def _resolved(doc: object, value: str) -> str | None:
    """OmegaConf-style `${a.b}` references (AReaL, RLinf YAML) resolved within the same file; None
    when one does not resolve here (an env var, a resolver): the key it names is checked itself."""
    for _ in range(10):
        match = re.search(r"\$\{([A-Za-z_][\w.]*)\}", value)
        if not match:
            return None if "${" in value else value
        found = _lookup(doc, match.group(1))
        if found is None:
            return None
        value = value[:match.start()] + str(found) + value[match.end():]
    return None


def _argv_storage_values(argv: list[str]) -> list[tuple[str, str]]:
    """Hydra-style overrides `a.b.train_files=[x,y]` among a command's words."""
    found = []
    for word in argv:
        key, sep, value = str(word).lstrip("+").partition("=")
        if sep and key.rsplit(".", 1)[-1] in STORAGE_KEYS:
            for item in value.strip("[]").split(","):
                item = item.strip().strip("'\"")
                if item:
                    found.append((key, item))
    return found


def _under(path: str, mount: str) -> bool:
    return os.path.normpath(path).startswith(mount.rstrip("/") + "/")


def check_storage(spec: Spec, task: dict[str, Any], argv: list[str], framework_files: dict[str, object],
                  artifacts_mount: str) -> str:
    """One mount path: the task mounts storage.mount, and every framework path lives under it."""
    mount = spec.storage.mount
    mounts = task.get("file_mounts") or {}
    if mount not in mounts or not isinstance(mounts[mount], dict):
        raise CheckError("storage", f"task.yaml mounts shared storage at {sorted(mounts)}, but the framework "
                         f"paths use storage.mount={mount!r}: they must be the same path")
    if _under(artifacts_mount, mount) or _under(mount, artifacts_mount) or mount == artifacts_mount:
        raise CheckError("storage", f"storage.mount={mount!r} overlaps the artifacts mount {artifacts_mount}")
    source = mounts[artifacts_mount] if artifacts_mount in mounts else None
    if source != spec.run.out:
        raise CheckError("storage", f"task.yaml mounts {source!r} at {artifacts_mount}, not the rendered "
                         f"artifacts {spec.run.out}")
    paths = [(f"paths.{k}", v) for k, v in spec.paths.dump().items() if v]
    paths += _argv_storage_values(argv) + _argv_storage_values(spec.framework.overrides)
    for relpath, parsed in framework_files.items():
        for key, value in _storage_values(parsed):
            resolved = _resolved(parsed, value)
            if resolved is not None:
                paths.append((f"{relpath}:{key}", resolved))
    # CODE's pack reaches every node by a file mount of its own, on each node's disk (rlaunch.config.code).
    code = spec.paths.code_dir if spec.paths.code_dir in mounts else ""
    in_code = 0
    for key, value in paths:
        if "://" in value:
            continue  # a remote URL (hdfs://, s3://) is shared by definition
        if code and (value == code or _under(value, code)):
            in_code += 1
            continue
        if not value.startswith("/") or not _under(value, mount):
            raise CheckError("storage", f"{key}={value!r} is not under storage.mount={mount!r}: data, "
                             "checkpoints and logs must be on the shared mount every node sees")
    shared = f"storage: {len(paths) - in_code} framework paths under {mount} (the task's shared mount)"
    return shared + (f", {in_code} in CODE's file mount {code}" if in_code else "")


def check_kubernetes(task: dict[str, Any], on_k8s: bool) -> str | None:
    if not on_k8s:
        return None
    resources = task.get("resources") or {}
    autostop = resources.get("autostop")
    if isinstance(autostop, dict) and not autostop.get("down", False):
        raise CheckError("kubernetes", "infra.autostop_down=false: Kubernetes cannot stop a cluster, only "
                         "tear it down (set infra.autostop_down=true, or infra.autostop_idle_minutes=0)")
    if resources.get("use_spot"):
        raise CheckError("kubernetes", "use_spot: SkyPilot rents no spot instances on Kubernetes")
    return "kubernetes: autodown only, no spot instances"


def check_secrets(spec: Spec, task: dict[str, Any], files: dict[str, str]) -> str:
    """References only: the value comes from the launcher's environment via `--secret NAME`."""
    secrets = task.get("secrets") or {}
    inline = sorted(k for k, v in secrets.items() if v is not None)
    if inline:
        raise CheckError("secrets", f"task.yaml holds values for {', '.join(inline)}; secrets must be null "
                         "references filled by `sky launch --secret NAME`")
    if sorted(secrets) != sorted(spec.secrets):
        raise CheckError("secrets", f"task.yaml references {sorted(secrets)}, the spec names "
                         f"{sorted(spec.secrets)}")
    for name in set(spec.secrets) | {"WANDB_API_KEY", *(h["token"] for h in hub.HUBS.values())}:
        value = os.environ.get(name, "")
        if len(value) >= MIN_SECRET_LEN:
            leaked = sorted(rel for rel, text in files.items() if value in text)
            if leaked:
                raise CheckError("secrets", f"the value of {name} is in {', '.join(leaked)}")
    return f"secrets by reference only: {', '.join(spec.secrets) or '(none)'}"


if __name__ == "__main__":
    from rlaunch import firecli  # the paths reach facts() as fire gives them; it str()s each

    sys.exit(firecli.run(facts, "rlaunch.validate.skypilot", "skypilot"))
