"""CODE= (issue 47): the user's code packed deterministically, named by its content, pinned in the
spec, refused when dirty without the opt-in, staged once per hash and checked on the nodes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch.config import code
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.verify import probes

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def tree(root: Path) -> Path:
    """A user's project: a package, a script, what ignore rules and caches leave out."""
    files = {
        "pkg/__init__.py": "", "pkg/reward.py": "def score(x):\n    return 1.0\n", "run.sh": "#!/bin/sh\n",
        ".gitignore": "*.log\nout/\n", "train.log": "noise", "out/model.bin": "big",
        "pkg/__pycache__/reward.cpython-311.pyc": "x", "pkg/old.pyc": "x", ".venv-x/lib.py": "x",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "run.sh").chmod(0o755)
    return root


def repo(root: Path) -> Path:
    tree(root)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    return root


def load(**knobs):
    return config.load("rehearsal", {"RUN_ID": "t", **knobs})


KEPT = [".gitignore", "pkg/__init__.py", "pkg/reward.py", "run.sh"]


def test_a_walk_packs_what_the_ignore_rules_keep_and_names_the_rule(tmp_path):
    packed = code.pack(tree(tmp_path))
    assert [e.path for e in packed.entries] == KEPT
    assert [e.executable for e in packed.entries] == [False, False, False, True]
    assert packed.dropped == {"train.log": ".gitignore: *.log", "out/model.bin": ".gitignore: out/"}
    assert packed.commit == "" and not packed.dirty
    assert code.ignore_rule(tmp_path, "out/model.bin") == ".gitignore: out/"
    assert code.ignore_rule(tmp_path, "pkg/reward.py") == ""


def test_the_hash_is_the_manifests_and_follows_content_alone(tmp_path):
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    os.utime(b / "pkg" / "reward.py", (1, 1))  # times never count
    first = code.pack(a)
    assert first.hash == code.pack(b).hash == hashlib.sha256(first.manifest.encode()).hexdigest()
    assert first.manifest.splitlines()[-1].endswith(" x run.sh")
    assert first.tar_gz() == code.pack(b).tar_gz()  # byte for byte: the transports carry it
    (b / "pkg" / "reward.py").write_text("def score(x):\n    return 0.0\n")
    assert code.pack(b).hash != first.hash
    (a / "run.sh").chmod(0o644)  # the x bit counts
    assert code.pack(a).hash != first.hash


def test_a_git_tree_packs_gits_list_with_its_commit(tmp_path):
    root = repo(tmp_path)
    packed = code.pack(root)
    assert [e.path for e in packed.entries] == KEPT
    assert packed.commit == git(root, "rev-parse", "HEAD") and not packed.dirty
    assert packed.hash == code.pack(tree(tmp_path.parent / f"{tmp_path.name}-walk")).hash
    assert code.ignore_rule(root, "train.log") == ".gitignore: *.log"


def test_a_dirty_tree_is_refused_naming_code_and_the_fix_unless_allowed(tmp_path):
    root = repo(tmp_path / "user")
    (root / "pkg" / "reward.py").write_text("def score(x):\n    return 2.0\n")
    with pytest.raises(ConfigError) as err:
        load(CODE=str(root))
    assert err.value.key == "code.dir" and err.value.source == "CODE"
    assert "CODE_DIRTY=1" in str(err.value) and "pkg/reward.py" in str(err.value)
    spec = load(CODE=str(root), CODE_DIRTY="1")
    assert spec.pins.code["dirty"] is True and len(str(spec.pins.code["diff_sha256"])) == 64
    (root / "pkg" / "reward.py").unlink()  # deleted, not committed: out of the pack
    assert "pkg/reward.py" not in [e.path for e in code.pack(root, allow_dirty=True).entries]


def test_the_spec_pins_code_at_the_same_path_on_every_node(tmp_path, monkeypatch):
    root = repo(tmp_path / "user")
    monkeypatch.chdir(tmp_path)
    spec = load(CODE="user")  # relative to where make runs
    packed = code.pack(root)
    assert spec.code.dir == str(root)
    assert spec.paths.code_dir == f"{spec.storage.mount}/code/{packed.hash}"
    assert spec.pins.code == {"hash": packed.hash, "commit": packed.commit, "dirty": False, "diff_sha256": "",
                              "files": 4, "bytes": packed.size}
    assert load().paths.code_dir == "" and load().pins.code == {}
    # SkyPilot mounts the bucket after it syncs file mounts: the pack goes beside it, on each node's disk.
    assert load(CODE="user", INFRA="gcp").paths.code_dir == f"/rlaunch/code/{packed.hash}"
    with pytest.raises(ConfigError, match="code.dir='nowhere'.*a directory on this machine"):
        load(CODE="nowhere")


def test_a_git_url_at_a_commit_is_fetched_once(tmp_path):
    root = repo(tmp_path / "upstream")
    commit = git(root, "rev-parse", "HEAD")
    cache = tmp_path / "cache"
    first = code.resolve(f"file://{root}@{commit}", cache)
    assert code.pack(first).hash == code.pack(root).hash and code.pack(first).commit == commit
    assert code.resolve(f"file://{root}@{commit}", cache) == first
    with pytest.raises(ConfigError, match="a git repository this machine can fetch"):
        code.resolve(f"file://{root}@{'0' * 40}", cache)
    assert sorted(p.name for p in first.parent.iterdir()) == [commit]  # a failed fetch leaves nothing


def test_staging_is_atomic_idempotent_and_the_nodes_check_the_manifest(tmp_path):
    packed = code.pack(tree(tmp_path / "user"))
    dest = tmp_path / "mount" / "code" / packed.hash
    assert code.stage(packed, dest) is True
    assert code.stage(packed, dest) is False  # the same hash: kept, nothing copied
    assert probes.probe_code(str(dest), code.MANIFEST) == {"path": str(dest), "hash": packed.hash, "problems": []}
    assert os.access(dest / "run.sh", os.X_OK)
    assert [p.name for p in dest.parent.iterdir()] == [packed.hash]
    (dest / "pkg" / "reward.py").write_text("tampered")
    (dest / "run.sh").unlink()
    assert probes.probe_code(str(dest), code.MANIFEST)["problems"] == ["pkg/reward.py differs from the manifest",
                                                                      "run.sh missing"]


def test_the_plan_line_says_hash_files_size_commit_and_state():
    line = code.describe({"hash": "a" * 64, "commit": "b" * 40, "dirty": False, "diff_sha256": "",
                          "files": 3, "bytes": 2048}, "/src")
    assert line == f"/src -> hash {'a' * 12}, 3 files, 2.0 KiB, commit {'b' * 12}, clean"


# ---------------------------------------------------------------- the files the framework opens on every node

REWARD = "reward.custom_reward_function.path"
VERL = "verl-grpo-math-7b"


def verl(tmp_path, path: str, key: str = REWARD, infra: str = "gcp", **knobs):
    spec = config.load(VERL, {"RUN_ID": "t", "INFRA": infra, **knobs}, [f"framework.overrides=[{key}={path}]"])
    from rlaunch.registry import frameworks

    return spec, frameworks.get("verl").command(spec)


def test_skypilots_storage_check_takes_codes_own_mount_and_still_refuses_a_path_outside(tmp_path):
    from rlaunch.backends.skypilot import backend as sky
    from rlaunch.errors import CheckError
    from rlaunch.plan import artifacts
    from rlaunch.validate import skypilot as v

    spec, argv = verl(tmp_path, "pkg/reward.py", CODE=str(repo(tmp_path / "user")), OUT=str(tmp_path / "out"))
    task = v.parse_task(artifacts.finish(spec, sky.BACKEND.render(spec))["task.yaml"])
    line = v.check_storage(spec, task, [*argv, f"data.train_files={spec.paths.code_dir}/d/train.parquet"], {},
                           sky.ARTIFACTS_MOUNT)
    assert f"2 in CODE's file mount {spec.paths.code_dir}" in line  # paths.code_dir and the file in it
    with pytest.raises(CheckError, match="'/opt/elsewhere/train.parquet' is not under storage.mount"):
        v.check_storage(spec, task, [*argv, "data.train_files=/opt/elsewhere/train.parquet"], {}, sky.ARTIFACTS_MOUNT)


@pytest.mark.parametrize(("path", "needle"), [
    ("~/my_reward.py", "the framework does not expand ~"),
    ("/home/me/my_reward.py", "/home/me/my_reward.py is on this machine, outside storage.mount and outside CODE"),
    ("rewards/mine.py", "a path relative to CODE= (not set)"),
])
def test_a_reward_no_node_would_find_is_refused_naming_the_argument_and_the_fix(tmp_path, path, needle):
    with pytest.raises(ConfigError) as err:
        verl(tmp_path, path)
    assert err.value.key == f"framework.overrides[{REWARD}]" and err.value.value == path
    assert needle in str(err.value) and "put the file in CODE and give its path relative to CODE" in str(err.value)


def test_a_reward_relative_to_code_reaches_verl_at_the_code_dir_on_every_node(tmp_path):
    root = repo(tmp_path / "user")
    spec, argv = verl(tmp_path, "pkg/reward.py", CODE=str(root))
    assert f"{REWARD}={spec.paths.code_dir}/pkg/reward.py" in argv
    spec, argv = verl(tmp_path, str(root / "pkg" / "reward.py"), CODE=str(root))  # its path here: the same file
    assert f"{REWARD}={spec.paths.code_dir}/pkg/reward.py" in argv
    spec, argv = verl(tmp_path, "/storage/rewards/r.py", CODE=str(root))  # on the shared storage: as is
    assert f"{REWARD}=/storage/rewards/r.py" in argv
    spec, argv = verl(tmp_path, "pkg/reward.py", key="data.custom_cls.path", CODE=str(root))
    assert f"data.custom_cls.path={spec.paths.code_dir}/pkg/reward.py" in argv
    _, argv = verl(tmp_path, str(tmp_path / "r.py"), infra="local", NODES="1", GPUS_PER_NODE="1",
                   ACCELERATOR="H100")  # local: every node shares this disk
    assert f"{REWARD}={tmp_path / 'r.py'}" in argv


def test_a_file_missing_from_code_or_dropped_by_an_ignore_rule_is_named(tmp_path):
    root = repo(tmp_path / "user")
    with pytest.raises(ConfigError, match=f"a file in CODE: pkg/missing.py is not in {root}"):
        verl(tmp_path, "pkg/missing.py", key="data.custom_cls.path", CODE=str(root))
    (root / "out" / "reward.py").write_text("def compute_score(): ...\n")
    with pytest.raises(ConfigError) as err:
        verl(tmp_path, "out/reward.py", CODE=str(root))
    assert "out/reward.py is in" in str(err.value) and "left out by .gitignore: out/" in str(err.value)
    with pytest.raises(ConfigError, match="a path inside CODE"):
        verl(tmp_path, "../elsewhere.py", CODE=str(root))


def test_a_code_over_the_transports_limit_is_refused_naming_the_size_and_the_limit(tmp_path):
    root = tmp_path / "user"
    root.mkdir()
    (root / "weights.bin").write_bytes(os.urandom(1024 * 1024))  # does not compress
    with pytest.raises(ConfigError) as err:
        config.load("verl-ppo-gsm8k-0.5b", {"RUN_ID": "t", "INFRA": "kuberay", "CODE": str(root)})
    assert err.value.key == "code.dir" and err.value.source == "CODE"
    assert "at most 900 KiB compressed on INFRA=kuberay" in str(err.value) and "this one is 1024 KiB" in str(err.value)
    # The hint that works there (test_kuberay_fetches_a_git_code_over_the_configmap_limit_in_the_inputs_job)
    assert "push it where the cluster can fetch it and give CODE=<its url>@<40-hex commit> (any size)" in str(err.value)
    assert config.load("verl-ppo-gsm8k-0.5b", {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(root)}).pins.code


def test_the_trl_reward_from_code_must_be_in_it(tmp_path):
    root = repo(tmp_path / "user")
    sets = ["framework.overrides=[reward=pkg.reward:score]"]
    spec = config.load("rehearsal", {"RUN_ID": "t", "CODE": str(root)}, sets)
    from rlaunch.registry import frameworks

    assert frameworks.get("trl").train_config(spec)["reward"] == "pkg.reward:score"
    with pytest.raises(ConfigError, match="a file in CODE: nope/mod.py or nope/mod/__init__.py is not in"):
        config.load("rehearsal", {"RUN_ID": "t", "CODE": str(root)}, ["framework.overrides=[reward=nope.mod:f]"])
    with pytest.raises(ConfigError, match=r"framework.overrides\[reward\].*<module>:<function>"):
        config.load("rehearsal", {"RUN_ID": "t"}, ["framework.overrides=[reward=not-a-module]"])


def test_a_refused_code_exits_2_and_writes_nothing(tmp_path):
    root = repo(tmp_path / "user")
    (root / "new.py").write_text("")
    out = tmp_path / "out"
    env = {**os.environ, "RLAUNCH_KNOB_CODE": str(root), "RLAUNCH_KNOB_OUT": str(out), "RLAUNCH_KNOB_RUN_ID": "t"}
    done = subprocess.run([sys.executable, "-m", "rlaunch", "plan"], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "CODE_DIRTY=1" in done.stderr and done.stderr.count("\n") == 1
    assert not out.exists()


# ---------------------------------------------------------------- the transports (goldens show the rest)


def test_kuberay_carries_the_pack_in_a_configmap_the_inputs_job_extracts(tmp_path):
    import base64

    import yaml

    from rlaunch.backends.kuberay import manifests

    root = repo(tmp_path / "user")
    mount = tmp_path / "volume"
    spec = config.load("rehearsal", {"RUN_ID": "t", "INFRA": "kuberay", "CODE": str(root),
                                     "WORK_ROOT": str(mount)})
    cm = manifests.code_configmap_manifest(spec)
    assert cm["metadata"]["name"] == "t-code" and list(cm["binaryData"]) == ["code.tar.gz"]
    archive = tmp_path / "code.tar.gz"
    archive.write_bytes(base64.b64decode(cm["binaryData"]["code.tar.gz"]))
    files = manifests.render(spec)
    job = yaml.safe_load(files["kuberay/inputs.yaml"])["spec"]["template"]["spec"]
    assert {"name": "code", "mountPath": "/opt/rlaunch-code", "readOnly": True} in job["containers"][0]["volumeMounts"]
    assert "t-code" in [v.get("configMap", {}).get("name") for v in job["volumes"]]
    assert f"{spec.paths.code_dir}:${{PYTHONPATH}}" in files["kuberay/rayjob.yaml"]
    # setup.sh's lines, run here against the "volume": the pack lands whole at code_dir, once.
    script = "set -Eeuo pipefail\n" + "\n".join(code.unpack_lines(spec, str(archive))) + "\n"
    for _ in range(2):
        subprocess.run(["bash", "-c", script], check=True)
    assert probes.probe_code(spec.paths.code_dir, code.MANIFEST) == {
        "path": spec.paths.code_dir, "hash": spec.pins.code["hash"], "problems": []}
    assert sorted(p.name for p in (mount / "code").iterdir()) == [spec.pins.code["hash"]]


@pytest.fixture()
def big_git(tmp_path, monkeypatch):
    """CODE=file://<bare repo>@<commit> whose pack is over KubeRay's ConfigMap limit, fetched at plan time
    into a cache of this test's own."""
    from gitcode import URL, bare_repo, git_env

    bare = tmp_path / "big.git"
    monkeypatch.setenv("RLAUNCH_CODE_CACHE", str(tmp_path / "plan-cache"))
    commit = bare_repo(bare)
    for name, value in git_env(bare).items():  # URL, a remote one, is the bare repository for git
        monkeypatch.setenv(name, value)
    return f"{URL}@{commit}"


def test_kuberay_fetches_a_git_code_over_the_configmap_limit_in_the_inputs_job(tmp_path, big_git):
    import yaml

    from rlaunch import ROOT
    from rlaunch.backends.kuberay import manifests
    from rlaunch.registry import backends

    mount = tmp_path / "volume"
    spec = config.load("rehearsal", {"RUN_ID": "t", "INFRA": "kuberay", "CODE": big_git, "WORK_ROOT": str(mount)})
    assert code.by_fetch(spec) and code.packed_size(spec) > backends.infra("kuberay").code_limit
    # No ConfigMap carries it: the inputs Job mounts none, and fetches it instead.
    assert manifests.carried_keys(spec) == [] and manifests.code_configmap_manifest(spec) is None
    files = manifests.render(spec)
    job = yaml.safe_load(files["kuberay/inputs.yaml"])["spec"]["template"]["spec"]
    assert [v["name"] for v in job["volumes"]] == ["shared", "artifacts", "tmp"]
    lines = code.fetch_lines(spec, str(tmp_path / "pod-tmp"))
    assert "\n".join(code.fetch_lines(spec, manifests.CODE_FETCH_CACHE)) in files["setup.sh"]
    url, commit = big_git.rsplit("@", 1)
    said = "\n".join(backends.get("kuberay").plan(spec, files))
    assert f"CODE: fetched by the inputs Job from {url} at {commit[:12]}, 1.1 MiB compressed" in said
    assert "ConfigMap t-code" not in said
    # setup.sh's lines, run here with real git against the "volume": the commit lands at code_dir with the
    # plan's hash (the tracked file its .gitignore names too, as the plan packed it), once.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tools"), "RLAUNCH_PYTHON": sys.executable}
    for _ in range(2):
        done = subprocess.run(["bash", "-c", "set -Eeuo pipefail\n" + "\n".join(lines)], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert "kept" in done.stdout
    assert probes.probe_code(spec.paths.code_dir, code.MANIFEST) == {
        "path": spec.paths.code_dir, "hash": spec.pins.code["hash"], "problems": []}
    staged = sorted(str(p.relative_to(spec.paths.code_dir)) for p in Path(spec.paths.code_dir).rglob("*")
                    if p.is_file())
    assert staged == [".gitignore", code.MANIFEST, "assets/table.bin", "pkg/__init__.py", "pkg/reward.py",
                      "tracked.log"]
    assert sorted(p.name for p in (mount / "code").iterdir()) == [spec.pins.code["hash"]]


def test_a_repository_on_this_machine_over_the_configmap_limit_is_refused_naming_the_fix(tmp_path, big_git):
    local = f"file://{tmp_path / 'big.git'}@{big_git.rsplit('@', 1)[1]}"  # the cluster cannot fetch it
    with pytest.raises(ConfigError, match="a repository the cluster can fetch .* is on this machine; push it"):
        config.load("rehearsal", {"RUN_ID": "t", "INFRA": "kuberay", "CODE": local})
    assert config.load("rehearsal", {"RUN_ID": "t", "INFRA": "gcp", "CODE": local}).pins.code  # a pack travels


def test_a_small_git_code_keeps_kuberays_configmap(tmp_path, monkeypatch):
    from rlaunch.backends.kuberay import manifests

    root = repo(tmp_path / "upstream")
    monkeypatch.setenv("RLAUNCH_CODE_CACHE", str(tmp_path / "cache"))
    spec = config.load("rehearsal", {"RUN_ID": "t", "INFRA": "kuberay",
                                     "CODE": f"file://{root}@{git(root, 'rev-parse', 'HEAD')}"})
    assert not code.by_fetch(spec) and manifests.carried_keys(spec) == ["code.tar.gz"]


def test_a_fetched_code_leaves_the_configmap_to_data_alone(big_git):
    from rlaunch.backends.kuberay import manifests
    from rlaunch.registry import backends

    data = str(Path(__file__).resolve().parents[1] / "fixtures" / "data" / "gsm8k-parquet")
    spec = config.load("verl-ppo-gsm8k-0.5b", {"RUN_ID": "t", "INFRA": "kuberay", "CODE": big_git, "DATA": data})
    assert manifests.carried_keys(spec) == ["data.tar.gz"]  # not refused as CODE's 1.1 MiB plus DATA's
    assert list(manifests.code_configmap_manifest(spec)["binaryData"]) == ["data.tar.gz"]
    said = backends.get("kuberay").plan(spec, manifests.render(spec))
    assert any(line.startswith("kubectl apply") and "# ConfigMap t-code: DATA's files" in line for line in said)


@pytest.mark.parametrize(("change", "needle"), [
    ("hash", "packs to content hash {got} here, the plan pinned {bad}"),
    ("commit", "a git repository this machine can fetch with that full commit"),
], ids=["another-hash", "another-commit"])
def test_the_inputs_jobs_fetch_fails_on_another_commit_or_hash_naming_both(tmp_path, big_git, capsys,
                                                                           change, needle):
    from rlaunch.job import codefetch

    url, commit = big_git.rsplit("@", 1)
    got = code.pack(code.resolve(big_git, tmp_path)).hash
    bad = "0" * 64 if change == "hash" else got
    commit = "0" * 40 if change == "commit" else commit
    dest = tmp_path / "volume" / "code" / bad
    args = [f"--url={url}", f"--commit={commit}", f"--hash={bad}", f"--dest={dest}", f"--cache={tmp_path / 'pod'}"]
    assert codefetch.main(args) == 1
    assert needle.format(got=got, bad=bad) in capsys.readouterr().err
    assert not dest.parent.exists()  # nothing staged


def test_aistudio_stages_under_work_root_and_its_run_script_checks_the_hash(tmp_path):
    from rlaunch.backends.aistudio import backend as aistudio

    root = repo(tmp_path / "user")
    spec = config.load("rehearsal", {"RUN_ID": "t", "INFRA": "aistudio", "CODE": str(root),
                                     "WORK_ROOT": str(tmp_path / "mnt")})
    run = aistudio.AIStudio().render(spec)["run.sh"]
    lines = run.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("# CODE's pack"))
    last = next(i for i, line in enumerate(lines) if line.startswith('say "CODE:'))
    check = "\n".join(['die() { echo "$2"; exit "$1"; }', "say() { echo \"$*\"; }", *lines[first:last + 1]])
    assert code.stage(code.pack(root), spec.paths.code_dir)
    done = subprocess.run(["bash", "-c", check], capture_output=True, text=True)
    assert done.returncode == 0 and f"hash {spec.pins.code['hash'][:12]}, 4 files match" in done.stdout
    (Path(spec.paths.code_dir) / "pkg" / "reward.py").write_text("changed")
    done = subprocess.run(["bash", "-c", check], capture_output=True, text=True)
    assert done.returncode == 3 and "pkg/reward.py missing or altered" in done.stdout
    (Path(spec.paths.code_dir) / code.MANIFEST).write_text("")
    done = subprocess.run(["bash", "-c", check], capture_output=True, text=True)
    assert done.returncode == 3 and "missing (make launch stages it)" in done.stdout


# ---------------------------------------------------------------- CMD= (verl)


def test_cmd_names_verls_entry_and_its_key_values_are_overrides_under_the_same_rules(tmp_path):
    root = repo(tmp_path / "user")
    cmd = ("python3 -m verl.experimental.fully_async_policy.fully_async_main data.train_batch_size=64 "
           "reward.custom_reward_function.path=pkg/reward.py trainer.resume_mode=auto")
    spec = config.load(VERL, {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(root), "CMD": cmd})
    from rlaunch.registry import frameworks

    argv = frameworks.get("verl").command(spec)
    assert argv[:3] == ["python3", "-m", "verl.experimental.fully_async_policy.fully_async_main"]
    assert spec.train.batch_size == 64  # the owned-key table applied: rlaunch's key, checked as such
    assert f"{REWARD}={spec.paths.code_dir}/pkg/reward.py" in argv and argv.count("trainer.resume_mode=auto") == 1



def cmd_knobs(tmp_path: Path) -> dict[str, str]:
    """The knobs of a CMD= launch from a user's repository (CMD added by each test)."""
    return {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(repo(tmp_path / "user"))}


def test_a_zero_batch_reaches_verls_fully_async_trainer_as_given_and_main_ppo_still_refuses_it(tmp_path):
    knobs = cmd_knobs(tmp_path)
    cmd = ("python3 -m verl.experimental.fully_async_policy.fully_async_main data.train_batch_size=0 "
           "data.gen_batch_size=1 actor_rollout_ref.actor.ppo_mini_batch_size=32 async_training.require_batches=2")
    spec = config.load(VERL, {**knobs, "CMD": cmd})
    from rlaunch.registry import frameworks

    argv = frameworks.get("verl").command(spec)
    assert [a for a in argv if a.startswith("data.train_batch_size=")] == ["data.train_batch_size=0"]
    assert spec.train.mini_batch_size == 32  # the other keys still map onto rlaunch's
    with pytest.raises(ConfigError, match=r"train_batch_size\]='0'.*fully_async_main"):
        config.load(VERL, {**knobs, "CMD": cmd.replace("experimental.fully_async_policy.fully_async_main",
                                                       "trainer.main_ppo")})



def test_one_step_off_sizes_the_cluster_for_the_trainer_and_rollout_pools_its_command_places(tmp_path):
    from rlaunch.frameworks.verl.adapter import ADAPTER

    knobs = cmd_knobs(tmp_path)
    cmd = ("python3 -m verl.experimental.one_step_off_policy.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=6 "
           "rollout.nnodes=2 rollout.n_gpus_per_node=2 data.train_batch_size=48 "
           "actor_rollout_ref.actor.ppo_mini_batch_size=24")
    spec = config.load(VERL, {**knobs, "CMD": cmd})
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == (2, 8)  # each node holds 6 + 2
    argv = ADAPTER.command(spec)
    for arg in ("trainer.nnodes=2", "trainer.n_gpus_per_node=6", "rollout.n_gpus_per_node=2"):
        assert argv.count(arg) == 1, arg
    assert not [a for a in argv if a.startswith("trainer.n_gpus_per_node=") and a != "trainer.n_gpus_per_node=6"]
    with pytest.raises(ConfigError, match=r"cluster\.gpus_per_node.*8, what CMD's trainer\.\* and rollout\.\*"):
        config.load(VERL, {**knobs, "CMD": cmd, "GPUS_PER_NODE": "6"})
    with pytest.raises(ConfigError, match=r"rollout\.nnodes=1 equal to trainer\.nnodes=2"):
        config.load(VERL, {**knobs, "CMD": cmd.replace("rollout.nnodes=2", "rollout.nnodes=1")})



def test_verls_hydra_check_composes_the_entry_modules_own_config_where_code_holds_it(tmp_path, monkeypatch):
    from rlaunch.frameworks.verl.adapter import ADAPTER

    monkeypatch.setenv("RLAUNCH_VALIDATORS", str(tmp_path / "none"))  # no pinned verl: only CODE's entries
    knobs = cmd_knobs(tmp_path)
    entry = Path(knobs["CODE"]) / "verl/experimental/one_step_off_policy/main_ppo.py"
    entry.parent.mkdir(parents=True)
    entry.write_text('import hydra\n\n\n@hydra.main(config_path="config", config_name="one_step_off_ppo_trainer", '
                     'version_base=None)\ndef main(config):\n    pass\n')
    git(Path(knobs["CODE"]), "add", ".")
    git(Path(knobs["CODE"]), "commit", "-qm", "entry")
    cmd = "python3 -m verl.experimental.one_step_off_policy.main_ppo rollout.n_gpus_per_node=4 trainer.n_gpus_per_node=4"
    request = ADAPTER.loader_request(config.load(VERL, {**knobs, "CMD": cmd}))
    assert (request["config_dir"], request["config_name"]) == (str(entry.parent / "config"), "one_step_off_ppo_trainer")
    request = ADAPTER.loader_request(config.load(VERL, {**knobs, "CMD": cmd.replace("one_step_off", "fully_async")
                                                        .replace("main_ppo", "fully_async_main")}))
    assert "config_name" not in request  # in neither CODE nor a pinned verl: ppo_trainer (the check is skipped)


def test_without_a_verl_checkout_verls_own_entry_composes_its_config_from_the_pinned_verl(tmp_path, monkeypatch):
    """fully_async_main with CODE that holds no verl (or no CODE): the image's verl runs it, so Hydra's check
    composes its @hydra.main config from .venv-verl's verl (a stand-in here), not ppo_trainer."""
    from rlaunch.frameworks.verl.adapter import ADAPTER

    packages = tmp_path / "validators" / ".venv-verl" / "lib" / "python3.11" / "site-packages"
    entry = packages / "verl/experimental/fully_async_policy/fully_async_main.py"
    for path, text in ((packages / "verl/trainer/ppo/core_algos.py", ""), (entry, (
            '@hydra.main(config_path="config", config_name="fully_async_ppo_trainer", version_base=None)\n'))):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    monkeypatch.setenv("RLAUNCH_VALIDATORS", str(tmp_path / "validators"))
    cmd = ("python3 -m verl.experimental.fully_async_policy.fully_async_main trainer.nnodes=1 trainer.n_gpus_per_node=4 "
           "rollout.nnodes=1 rollout.n_gpus_per_node=4")
    user = cmd_knobs(tmp_path)
    for knobs in (user, {"RUN_ID": "t", "INFRA": "gcp"}):
        request = ADAPTER.loader_request(config.load(VERL, {**knobs, "CMD": cmd}))
        assert (request["config_dir"], request["config_name"]) == (str(entry.parent / "config"), "fully_async_ppo_trainer")
    request = ADAPTER.loader_request(config.load(VERL, {**user, "CMD": cmd.replace(
        "experimental.fully_async_policy.fully_async_main", "trainer.main_ppo").split(" rollout.")[0]}))
    assert "config_name" not in request  # main_ppo: verl's ppo_trainer


def test_cmds_checkpoint_dir_and_resume_mode_give_way_to_rlaunchs_and_the_plan_says_so(tmp_path):
    from rlaunch.frameworks.verl.adapter import ADAPTER, replaced_lines

    cmd = "python3 -m verl.trainer.main_ppo trainer.default_local_dir=/storage/ckpts/mine trainer.resume_mode=disable"
    spec = config.load(VERL, {**cmd_knobs(tmp_path), "CMD": cmd})
    argv = ADAPTER.command(spec)
    assert [a for a in argv if a.startswith(("trainer.default_local_dir=", "trainer.resume_mode="))] == \
        [f"trainer.default_local_dir={spec.paths.ckpt_dir}", "trainer.resume_mode=auto"]
    lines = replaced_lines(spec)
    assert len(lines) == 2 and "CMD's trainer.default_local_dir=/storage/ckpts/mine is rlaunch's own" in lines[0]
    with pytest.raises(ConfigError, match="set storage.mount instead"):  # a preset's overrides: still refused
        config.load(VERL, {"RUN_ID": "t", "INFRA": "gcp"}, ["framework.overrides=[trainer.default_local_dir=/x]"])


def test_fully_async_reads_verls_top_level_reward_keys_and_main_ppo_still_refuses_them(tmp_path):
    knobs = cmd_knobs(tmp_path)
    spec = config.load(VERL, {**knobs, "CMD": "python3 -m verl.experimental.fully_async_policy.fully_async_main "
                              "rollout.n_gpus_per_node=8 custom_reward_function.path=pkg/reward.py"})
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == (2, 8)  # verl's 1 x 8 and rollout's 8: two nodes
    from rlaunch.registry import frameworks

    argv = frameworks.get("verl").command(spec)
    assert f"custom_reward_function.path={spec.paths.code_dir}/pkg/reward.py" in argv
    with pytest.raises(ConfigError, match="main_ppo reads the reward function from reward.custom_reward_function"):
        config.load(VERL, {**knobs, "CMD": "python3 -m verl.trainer.main_ppo custom_reward_function.path=pkg/reward.py"})


@pytest.mark.parametrize(("cmd", "key", "needle"), [
    ("bash train.sh", "code.command", "python3 -m <module> key=value"),
    ("python3 -m verl.trainer.main_ppo --config-path x", "code.command", "--config-path and --config-name go together"),
    ("python3 -m verl.trainer.main_ppo --lr 3", "code.command", "'--lr' is not key=value"),
    ("python3 -m verl.trainer.main_ppo --config-path /home/me/cfg --config-name x", "code.command",
     "--config-path /home/me/cfg: a path relative to CODE"),
    ("python3 -m verl.trainer.main_ppo data.custom_cls.path=~/ds.py", "framework.overrides[data.custom_cls.path]",
     "does not expand ~"),
    ("python3 -m verl.trainer.main_ppo +ray_kwargs.ray_init.runtime_env.working_dir=/home/me/proj",
     "framework.overrides[ray_kwargs.ray_init.runtime_env.working_dir]", "outside storage.mount and outside CODE"),
])
def test_cmd_refusals_name_the_argument(cmd, key, needle):
    with pytest.raises(ConfigError) as err:
        config.load(VERL, {"RUN_ID": "t", "INFRA": "gcp", "CMD": cmd})
    assert err.value.key == key and needle in str(err.value) and err.value.source == "CMD"


def test_a_preset_of_another_framework_than_the_commands_is_refused_naming_one_that_fits():
    with pytest.raises(ConfigError, match="a preset of verl, the framework CMD runs .*PRESET=verl-grpo-math-7b") as err:
        config.load("rehearsal", {"RUN_ID": "t", "CMD": "python3 -m verl.trainer.main_ppo"})
    assert err.value.key == "PRESET"


def test_the_rehearsals_reward_check_reads_a_reward_relative_to_code_where_it_is(tmp_path):
    from rlaunch.frameworks.verl.cpu import plan as cpu_plan

    root = repo(tmp_path / "user")
    spec = config.load(VERL, {"RUN_ID": "t", "REHEARSE": "1", "CODE": str(root)},
                       [f"framework.overrides=[{REWARD}=pkg/reward.py,reward.custom_reward_function.name=score]"])
    assert cpu_plan.reward_function(spec)[:2] == (str(root / "pkg" / "reward.py"), "score")


def test_a_directory_its_repository_ignores_is_walked_not_emptied(tmp_path):
    root = repo(tmp_path / "user")  # its .gitignore drops out/
    (root / "out" / "job").mkdir()
    (root / "out" / "job" / "train.py").write_text("print(1)\n")
    packed = code.pack(root / "out" / "job")
    assert [e.path for e in packed.entries] == ["train.py"] and packed.commit == ""
