"""The presets follow the seeds' values (the source documents in ../shared/seeds/, Chinese), except
where rlaunch differs on purpose, and each such difference is explained in a comment of the preset.

The seeds' values are data here, each with its seed file, line and the text as the seed writes it
(seeds 000 and 001 are single-line files that lost their `=` signs: `data.train_batch_size256`). What is
compared is what runs: the overrides verl gets, AReaL's experiment YAML and command line, the rendered
RayJob's resources and env. Where the seeds' files are beside the checkout, each citation is checked
against its line too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.frameworks.areal import adapter as areal
from rlaunch.frameworks.verl import adapter as verl
from rlaunch.registry import backends

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"
PRESETS = ROOT / "configs" / "presets"

S000, S001, S002, S004 = ("000_aaee728e66015258.txt", "001_287bfd3586888074.txt", "002_af64121035cb1e56.txt",
                          "004_5ceedb51f8c7b5a0.txt")

# verl keys the seeds set that rlaunch leaves to verl: the value is verl 0.9.1's own default
# (verl/trainer/config/_generated_ppo_trainer.yaml), so leaving them out changes nothing.
VERL_DEFAULTS = {"trainer.default_hdfs_dir": "null", "actor_rollout_ref.actor.ppo_epochs": "1",
                 "actor_rollout_ref.actor.entropy_coeff": "0"}

# case -> how the preset is launched for that seed, the seed's settings (key, value, line, as written),
# and the differences (key, the seed's value, rlaunch's, line, the text a comment of the preset holds).
CASES = {
    "002-vke-ppo": {
        "preset": "verl-ppo-gsm8k-0.5b", "knobs": {"INFRA": "kuberay"}, "seed": S002,
        "sets": "model.path=/data/Qwen2.5-0.5B-Instruct data.path=/data/data/gsm8k",  # the seed's uploads
        "verl": [
            ("data.train_files", "/data/data/gsm8k/train.parquet", 203, "data.train_files=/data/data/gsm8k/train.parquet"),
            ("data.val_files", "/data/data/gsm8k/test.parquet", 204, "data.val_files=/data/data/gsm8k/test.parquet"),
            ("data.train_batch_size", "256", 205, "data.train_batch_size=256"),
            ("data.max_prompt_length", "512", 206, "data.max_prompt_length=512"),
            ("data.max_response_length", "256", 207, "data.max_response_length=256"),
            ("actor_rollout_ref.model.path", "/data/Qwen2.5-0.5B-Instruct", 208, "model.path=/data/Qwen2.5-0.5B-Instruct"),
            ("actor_rollout_ref.actor.optim.lr", "1e-6", 209, "actor.optim.lr=1e-6"),
            ("actor_rollout_ref.actor.ppo_mini_batch_size", "64", 210, "ppo_mini_batch_size=64"),
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "4", 211, "actor.ppo_micro_batch_size_per_gpu=4"),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "8", 212,
             "rollout.log_prob_micro_batch_size_per_gpu=8"),
            ("actor_rollout_ref.rollout.tensor_model_parallel_size", "1", 213, "tensor_model_parallel_size=1"),
            ("actor_rollout_ref.rollout.gpu_memory_utilization", "0.4", 214, "gpu_memory_utilization=0.4"),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "4", 215, "ref.log_prob_micro_batch_size_per_gpu=4"),
            ("critic.optim.lr", "1e-5", 216, "critic.optim.lr=1e-5"),
            ("critic.model.path", "/data/Qwen2.5-0.5B-Instruct", 217, "critic.model.path=/data/Qwen2.5-0.5B-Instruct"),
            ("critic.ppo_micro_batch_size_per_gpu", "4", 218, "critic.ppo_micro_batch_size_per_gpu=4"),
            ("algorithm.kl_ctrl.kl_coef", "0.001", 219, "kl_ctrl.kl_coef=0.001"),
            ("trainer.default_hdfs_dir", "null", 221, "trainer.default_hdfs_dir=null"),
            ("trainer.n_gpus_per_node", "2", 222, "trainer.n_gpus_per_node=2"),
            ("trainer.nnodes", "2", 223, "trainer.nnodes=2"),
            ("trainer.save_freq", "10", 224, "trainer.save_freq=10"),
            ("trainer.test_freq", "10", 225, "trainer.test_freq=10"),
            ("trainer.total_epochs", "15", 226, "trainer.total_epochs=15"),
        ],
        "pods": [  # (role, resource, value, line, as written)
            ("worker", "nvidia.com/gpu", "2", 158, "nvidia.com/gpu: 2"), ("worker", "cpu", "30", 156, 'cpu: "30"'),
            ("worker", "memory", "100Gi", 157, "memory: 100Gi"), ("head", "nvidia.com/gpu", "2", 117, "nvidia.com/gpu: 2"),
            ("workers", "replicas", "1", 141, "replicas: 1"),
        ],
        "differs": [
            ("trainer.logger", "['console']", "[console,file]", 220, "trainer.logger=['console']",
             "trainer.logger adds `file`"),
            ("algorithm.use_kl_in_reward", "False (verl's default)", "True", 219, "kl_ctrl.kl_coef=0.001",
             "algorithm.use_kl_in_reward=True"),
            ("maxReplicas", "3", "1", 143, "maxReplicas: 3", "maxReplicas 3"),
        ],
    },
    "001-ppo": {
        "preset": "verl-ppo-gsm8k-0.5b", "knobs": {"INFRA": "gcp"}, "seed": S001, "sets": "",
        "verl": [(k, v, 3, q) for k, v, q in [
            ("data.train_batch_size", "256", "data.train_batch_size256"),
            ("data.max_prompt_length", "512", "data.max_prompt_length512"),
            ("data.max_response_length", "256", "data.max_response_length256"),
            ("actor_rollout_ref.actor.optim.lr", "1e-6", "actor.optim.lr1e-6"),
            ("actor_rollout_ref.actor.ppo_mini_batch_size", "64", "ppo_mini_batch_size64"),
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "4", "actor.ppo_micro_batch_size_per_gpu4"),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "8", "rollout.log_prob_micro_batch_size_per_gpu8"),
            ("actor_rollout_ref.rollout.tensor_model_parallel_size", "1", "tensor_model_parallel_size1"),
            ("actor_rollout_ref.rollout.name", "vllm", "rollout.namevllm"),
            ("actor_rollout_ref.rollout.gpu_memory_utilization", "0.4", "gpu_memory_utilization0.4"),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "4", "ref.log_prob_micro_batch_size_per_gpu4"),
            ("critic.optim.lr", "1e-5", "critic.optim.lr1e-5"),
            ("critic.ppo_micro_batch_size_per_gpu", "4", "critic.ppo_micro_batch_size_per_gpu4"),
            ("algorithm.kl_ctrl.kl_coef", "0.001", "kl_ctrl.kl_coef0.001"),
            ("trainer.val_before_train", "False", "trainer.val_before_trainFalse"),
            ("trainer.default_hdfs_dir", "null", "trainer.default_hdfs_dirnull"),
            ("trainer.n_gpus_per_node", "1", "trainer.n_gpus_per_node1"),
            ("trainer.nnodes", "2", "trainer.nnodes2"),
            ("trainer.save_freq", "20", "trainer.save_freq20"),
            ("trainer.test_freq", "20", "trainer.test_freq20"),
            ("trainer.total_epochs", "2", "trainer.total_epochs2"),
        ]],
        "differs": [
            ("trainer.logger", "[console,wandb]", "[console,file]", 3, "trainer.logger[console,wandb]",
             "trainer.logger adds `file`"),
            ("trainer.project_name", "verl_examples", "rlaunch", 3, "trainer.project_nameverl_examples",
             "trainer.project_name and experiment_name"),
            ("algorithm.use_kl_in_reward", "False (verl's default)", "True", 3, "kl_ctrl.kl_coef0.001",
             "algorithm.use_kl_in_reward=True"),
            ("actor_rollout_ref.model.path", "Qwen/Qwen2.5-0.5B-Instruct", "<pinned model dir>", 3,
             "model.pathQwen/Qwen2.5-0.5B-Instruct", "the model and data come from the shared storage"),
            ("data.train_files", "$HOME/data/gsm8k/train.parquet", "<pinned data dir>/train.parquet", 3,
             "data.train_files$HOME/data/gsm8k/train.parquet", "not each node's $HOME"),
        ],
    },
    "001-grpo-7b": {
        "preset": "verl-grpo-math-7b", "knobs": {"INFRA": "gcp"}, "seed": S001, "sets": "",
        "verl": [(k, v, 3, q) for k, v, q in [
            ("algorithm.adv_estimator", "grpo", "algorithm.adv_estimatorgrpo"),
            ("data.train_batch_size", "32", "data.train_batch_size32"),
            ("data.max_prompt_length", "256", "data.max_prompt_length256"),
            ("data.max_response_length", "256", "data.max_response_length256 \\ data.filter"),
            ("data.filter_overlong_prompts", "True", "data.filter_overlong_promptsTrue"),
            ("data.truncation", "error", "data.truncationerror"),
            ("actor_rollout_ref.actor.optim.lr", "1e-6", "actor.optim.lr1e-6 \\ actor_rollout_ref.model.use_remove"),
            ("actor_rollout_ref.model.use_remove_padding", "True", "model.use_remove_paddingTrue"),
            ("actor_rollout_ref.actor.ppo_mini_batch_size", "16", "ppo_mini_batch_size16"),
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "4", "actor.ppo_micro_batch_size_per_gpu4 \\ actor_rollout_ref.actor.ppo_epochs1"),
            ("actor_rollout_ref.actor.ppo_epochs", "1", "actor.ppo_epochs1"),
            ("actor_rollout_ref.actor.use_kl_loss", "False", "actor.use_kl_lossFalse"),
            ("actor_rollout_ref.actor.entropy_coeff", "0", "actor.entropy_coeff0"),
            ("actor_rollout_ref.model.enable_gradient_checkpointing", "True", "enable_gradient_checkpointingTrue"),
            ("actor_rollout_ref.actor.fsdp_config.param_offload", "True", "actor.fsdp_config.param_offloadTrue"),
            ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", "True", "optimizer_offloadTrue"),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "16", "rollout.log_prob_micro_batch_size_per_gpu16"),
            ("actor_rollout_ref.rollout.tensor_model_parallel_size", "1", "tensor_model_parallel_size1 \\ actor_rollout_ref.rollout.namevllm \\ actor_rollout_ref.rollout.gpu_memory_utilization0.4 \\ actor_rollout_ref.rollout.n1"),
            ("actor_rollout_ref.rollout.name", "vllm", "rollout.namevllm"),
            ("actor_rollout_ref.rollout.gpu_memory_utilization", "0.4", "gpu_memory_utilization0.4"),
            ("actor_rollout_ref.rollout.enable_chunked_prefill", "True", "enable_chunked_prefillTrue"),
            ("actor_rollout_ref.rollout.max_num_batched_tokens", "2048", "max_num_batched_tokens2048"),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "16", "ref.log_prob_micro_batch_size_per_gpu16"),
            ("actor_rollout_ref.ref.fsdp_config.param_offload", "True", "ref.fsdp_config.param_offloadTrue"),
            ("algorithm.use_kl_in_reward", "False", "algorithm.use_kl_in_rewardFalse"),
            ("trainer.critic_warmup", "0", "trainer.critic_warmup0"),
            ("trainer.save_freq", "-1", "trainer.save_freq-1"),
            ("trainer.test_freq", "-1", "trainer.test_freq-1"),
            ("trainer.total_epochs", "1", "trainer.total_epochs1与"),
        ]],
        "differs": [
            ("actor_rollout_ref.rollout.n", "1", "8", 3, "actor_rollout_ref.rollout.n1", "rollout.n=8"),
            ("trainer.logger", "[console,wandb]", "[console,file]", 3, "trainer.logger[console,wandb]",
             "trainer.logger adds `file`"),
            ("trainer.experiment_name", "qwen25_7b_grpo", "verl-grpo-math-7b", 3, "experiment_nameqwen25_7b_grpo",
             "trainer.project_name and experiment_name"),
            ("actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct", "<pinned model dir>", 3,
             "model.pathQwen/Qwen2.5-7B-Instruct", "not each node's $HOME or the Hub"),
        ],
    },
    "004-gke-a4x-grpo-32b": {
        "preset": "verl-grpo-gsm8k-32b", "knobs": {"INFRA": "kuberay"}, "seed": S004,
        "sets": "model.path=/data/Qwen2.5-32B-Instruct data.path=/data/gsm8k",  # the seed's uploads
        "verl": [(k, v, 269, q) for k, v, q in [
            ("algorithm.adv_estimator", "grpo", "algorithm.adv_estimator=grpo"),
            ("data.train_files", "/data/gsm8k/train.parquet", "data.train_files=/data/gsm8k/train.parquet"),
            ("data.val_files", "/data/gsm8k/test.parquet", "data.val_files=/data/gsm8k/test.parquet"),
            ("data.train_batch_size", "256", "data.train_batch_size=256"),
            ("data.max_prompt_length", "512", "data.max_prompt_length=512"),
            ("data.max_response_length", "512", "data.max_response_length=512"),
            ("actor_rollout_ref.model.path", "/data/Qwen2.5-32B-Instruct", "model.path=/data/Qwen2.5-32B-Instruct"),
            ("actor_rollout_ref.actor.optim.lr", "1e-5", "actor.optim.lr=1e-5"),
            ("actor_rollout_ref.actor.ppo_mini_batch_size", "64", "ppo_mini_batch_size=64"),
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "8", "actor.ppo_micro_batch_size_per_gpu=8"),
            ("actor_rollout_ref.actor.use_kl_loss", "True", "actor.use_kl_loss=True"),
            ("actor_rollout_ref.actor.strategy", "fsdp2", "actor.strategy=fsdp2"),
            ("actor_rollout_ref.rollout.name", "vllm", "rollout.name=vllm"),
            ("actor_rollout_ref.rollout.tensor_model_parallel_size", "4", "tensor_model_parallel_size=4"),
            ("actor_rollout_ref.rollout.gpu_memory_utilization", "0.6", "gpu_memory_utilization=0.6"),
            ("actor_rollout_ref.rollout.n", "8", "rollout.n=8"),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "16", "rollout.log_prob_micro_batch_size_per_gpu=16"),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "16", "ref.log_prob_micro_batch_size_per_gpu=16"),
            ("algorithm.kl_ctrl.kl_coef", "0.001", "kl_ctrl.kl_coef=0.001"),
            ("trainer.n_gpus_per_node", "4", "trainer.n_gpus_per_node=4"),
            ("trainer.nnodes", "4", "trainer.nnodes=4"),
            ("trainer.save_freq", "10", "trainer.save_freq=10"),
            ("trainer.test_freq", "10", "trainer.test_freq=10"),
            ("trainer.total_epochs", "2", "trainer.total_epochs=2"),
        ]],
        "pods": [
            ("head", "cpu", "12", 212, 'cpu: "12" memory: 32Gi ephemeral-storage: 20Gi'),
            ("head", "memory", "32Gi", 212, "memory: 32Gi"), ("head", "ephemeral-storage", "20Gi", 212, "ephemeral-storage: 20Gi"),
            ("worker", "cpu", "120", 212, 'cpu: "120"'), ("worker", "memory", "600Gi", 212, "memory: 600Gi"),
            ("worker", "nvidia.com/gpu", "4", 212, 'nvidia.com/gpu: "4"'),
            ("worker", "ephemeral-storage", "500Gi", 212, "ephemeral-storage: 500Gi"),
            ("worker", "shm", "200Gi", 212, "sizeLimit: 200Gi"), ("workers", "replicas", "4", 97, "NUM_GPU_NODES=4"),
        ],
        "env": [(k, v, 268, f'{k}: "{v}"') for k, v in [
            ("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64:/usr/local/gib/lib64"), ("NCCL_DEBUG", "INFO"),
            ("NCCL_ENV_PLUGIN", "gcp"), ("GLOO_SOCKET_IFNAME", "eth0")]],
        "differs": [
            ("trainer.default_local_dir", "/data/verl/checkpoints", "<run dir>/checkpoints", 269,
             "trainer.default_local_dir=/data/verl/checkpoints", "not the seed's /data/verl/checkpoints"),
            ("trainer.logger", "console", "[console,file]", 269, "trainer.logger=console", "trainer.logger adds `file`"),
            ("num-cpus (head)", "0", "12", 212, 'num-cpus: "0"', "not the seed's num-cpus \"0\""),
            ("PYTHONPATH", "/data/verl", "(the image's)", 268, 'PYTHONPATH: "/data/verl"', "PYTHONPATH=/data/verl"),
        ],
    },
    "000-areal-2gpu": {
        "preset": "areal-grpo-gsm8k", "knobs": {"INFRA": "gcp"}, "seed": S000, "sets": "",
        "areal_cli": [(k, v, 1, q) for k, v, q in [
            ("scheduler.type", "local", "scheduler.typelocal"), ("cluster.n_nodes", "1", "cluster.n_nodes1"),
            ("rollout.backend", "sglang:d1", "rollout.backendsglang:d1"), ("actor.backend", "fsdp:d1", "actor.backendfsdp:d1"),
        ]],
        "areal_yaml": [(k, v, 1, q) for k, v, q in [
            ("train_dataset.batch_size", "4", "train_dataset.batch_size4"),
            ("actor.mb_spec.max_tokens_per_mb", "4096", "actor.mb_spec.max_tokens_per_mb4096"),
            ("gconfig.n_samples", "4", "gconfig.n_samples4"), ("actor.eps_clip", "0.4", "actor.eps_clip0.4"),
            ("actor.reward_scaling", "10.0", "actor.reward_scaling10.0"), ("actor.kl_ctl", "0.0", "actor.kl_ctl0.0"),
            ("actor.rejection_sampling.metric", "ratio", "actor.rejection_sampling.metricratio"),
            ("gconfig.max_new_tokens", "1024", "gconfig.max_new_tokens: 1024"),
            ("actor.use_decoupled_loss", "True", "actor.use_decoupled_loss: true"),
            ("cluster.n_gpus_per_node", "2", "此处为 2"),
        ]],
        "cluster": [(k, v, 1, q) for k, v, q in [
            ("gpus_per_node", "2", "accelerators: A100:2"), ("accelerator", "A100", "A100:2"),
            ("cpus_per_node", "8", "cpus: 8"), ("memory_gb", "32", "memory: 32GB"),
        ]],
        "differs": [
            ("experiment_name", "gsm8k-grpo", "<the run's name>", 1, "experiment_namegsm8k-grpo", "experiment_name"),
            ("trial_name", "trial0", "<the run id>", 1, "trial_nametrial0", "trial_name are the run's name and id"),
            ("cluster.fileroot", "/storage/experiments", "<run dir>", 1, "cluster.fileroot: /storage/experiments",
             "not /storage/experiments for every run"),
        ],
    },
}


def launch(case: dict):
    knobs = {"RUN_ID": "seed", **case["knobs"]}
    spec = config.load(case["preset"], knobs, case["sets"])
    return spec, artifacts.finish(spec, backends.get(spec.infra.name).render(spec))


def same(seed_value: str, ours) -> bool:
    a, b = str(seed_value), str(ours)
    if a.lower() in ("true", "false") or b.lower() in ("true", "false"):
        return a.lower() == b.lower()
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def verl_overrides(spec: dict) -> dict[str, str]:
    return dict(o.split("=", 1) for o in verl.ADAPTER.overrides(spec))


def dotted(tree: dict, key: str):
    for part in key.split("."):
        tree = tree[part]
    return tree


def comments(case: dict) -> str:
    """Every comment line of the preset's files (the preset and its overlay for the case's infra)."""
    files = [PRESETS / f"{case['preset']}.yaml", PRESETS / f"{case['preset']}@{case['knobs']['INFRA']}.yaml"]
    return "\n".join(line for f in files if f.exists() for line in f.read_text().splitlines()
                     if line.lstrip().startswith("#") or " # " in line)


def pods(files: dict) -> dict:
    cluster = yaml.safe_load(files["kuberay/rayjob.yaml"])["spec"]["rayClusterSpec"]
    worker = cluster["workerGroupSpecs"][0]
    return {"head": cluster["headGroupSpec"]["template"]["spec"], "worker": worker["template"]["spec"],
            "group": worker, "head_params": cluster["headGroupSpec"]["rayStartParams"]}


@pytest.mark.parametrize("name", CASES)
def test_the_preset_runs_with_the_seeds_values(name):
    case = CASES[name]
    spec, files = launch(case)
    got: list[tuple[str, str, object]] = []
    if "verl" in case:
        rendered = verl_overrides(spec)
        for key, value, _, _ in case["verl"]:
            if key in VERL_DEFAULTS and key not in rendered:
                assert VERL_DEFAULTS[key] == value, key  # left to verl, whose default is the seed's
                continue
            got.append((key, value, rendered.get(key)))
    for key, value, _, _ in case.get("areal_cli", []):
        got.append((key, value, dict(o.split("=", 1) for o in areal.ADAPTER.cli(spec)).get(key)))
    for key, value, _, _ in case.get("areal_yaml", []):
        got.append((key, value, dotted(yaml.safe_load(files["areal.yaml"]), key)))
    for key, value, _, _ in case.get("cluster", []):
        got.append((f"cluster.{key}", value, getattr(spec.cluster, key)))
    if "pods" in case or "env" in case:
        p = pods(files)
        for role, key, value, _, _ in case.get("pods", []):
            if role == "workers":
                ours = p["group"][key]
            elif key == "shm":
                ours = next(v for v in p[role]["volumes"] if v["name"] == "shm")["emptyDir"]["sizeLimit"]
            else:
                ours = p[role]["containers"][0]["resources"]["limits"][key]
            got.append((f"{role}.{key}", value, ours))
        env = {e["name"]: e.get("value") for e in p["worker"]["containers"][0]["env"]}
        for key, value, _, _ in case.get("env", []):
            got.append((f"env.{key}", value, env.get(key)))
    wrong = [f"{key}: the seed has {value}, the preset {ours}" for key, value, ours in got if not same(value, ours)]
    assert not wrong, f"{case['preset']} ({name}) differs from seed {case['seed']} without a reason:\n" + "\n".join(wrong)


@pytest.mark.parametrize("name", CASES)
def test_each_deliberate_difference_is_explained_in_the_preset(name):
    case = CASES[name]
    spec, files = launch(case)
    text = comments(case)
    rendered = verl_overrides(spec) if "verl" in case else {}
    for key, seed_value, ours, _, _, why in case["differs"]:
        assert why in text, f"{case['preset']}: no comment explains {key} ({why!r})"
        if key in rendered and not ours.startswith("<"):
            assert same(ours, rendered[key]) and not same(seed_value, rendered[key]), (key, rendered[key])
    if name == "004-gke-a4x-grpo-32b":
        assert pods(files)["head_params"]["num-cpus"] == "12"
    if name == "002-vke-ppo":
        group = pods(files)["group"]
        assert group["maxReplicas"] == group["replicas"] == 1


def seed_line(seed: str, line: int) -> str:
    lines = (SEEDS / seed).read_text(encoding="utf-8").split("\n")
    return lines[line - 1]


@pytest.mark.parametrize("name", CASES)
def test_every_citation_is_on_the_seed_line_it_names(name):
    if not SEEDS.is_dir():
        pytest.skip(f"the seeds are not beside this checkout ({SEEDS}): the values above are checked without them")
    case = CASES[name]
    rows = [(r[-2], r[-1]) for group in ("verl", "areal_cli", "areal_yaml", "cluster", "env") for r in case.get(group, [])]
    rows += [(r[3], r[4]) for r in case.get("pods", [])] + [(r[3], r[4]) for r in case["differs"]]
    for line, quote in rows:
        assert quote in seed_line(case["seed"], line), f"{case['seed']} line {line} does not say {quote!r}"
