"""RLinf (0.3, pinned commit): examples/reasoning/main_grpo.py with a YAML rlaunch renders.

Placement keys with commas ("actor,rollout: 0-3") cannot go on Hydra's command line, so the whole
config is one rendered file, passed with --config-path/--config-name. Its settings follow RLinf's
end-to-end test config tests/e2e_tests/reasoning/qwen2.5-1.5b-grpo-pipeline-fsdp-sgl.yaml at the
pinned commit (with examples/reasoning/config/hybrid_engines/fsdp.yaml folded in), which seed 003
starts from; both live only in RLinf's git repository, not in its PyPI package, so the file is
complete on its own and the validator composes exactly what the run reads. Seed 003's placement:
rollout + reward on resource rank 0, inference on 1, the FSDP actor on 2-3, scaled to the cluster.

CMD= (issue 47, seed 003's form): the user's script and config from CODE (an RLinf checkout, or their
own tree), `--config-path <dir in CODE> --config-name <name> k=v ...` as given, Hydra composing it
with its `../hybrid_engines/...` defaults; rlaunch adds only its own keys (cmd_keys). The nodes are the
config's cluster.num_nodes (rlaunch.config.command), its placement checked as the preset's is.
"""

from __future__ import annotations

import copy
import posixpath
import shlex
from typing import TYPE_CHECKING, Any

import yaml

from rlaunch.config import cmdfacts, code, dotted
from rlaunch.config import command as user_command
from rlaunch.config import pins
from rlaunch.config import inputs as run_inputs
from rlaunch.errors import ConfigError
from rlaunch.config.overrides import Owned
from rlaunch.config import topology
from rlaunch.frameworks.rlinf.placement import default_placement, parse_ranks, placement as check_placement
from rlaunch.frameworks.base import ARTIFACTS, Framework
from rlaunch.frameworks.rlinf import datacheck
from rlaunch.validate import loaders

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

CONFIG_DIR = "rlinf"
CONFIG_NAME = "rlaunch-grpo"
ENTRY = "examples/reasoning/main_grpo.py"

# hybrid_engines/fsdp.yaml at the pinned commit, with the e2e config's actor.fsdp_config on top.
FSDP = {
    "strategy": "fsdp", "sharding_strategy": "full_shard", "gradient_checkpointing": False,
    "cpu_offload": False, "offload_pin_memory": False, "reshard_after_forward": True,
    "enable_gradient_accumulation": True, "forward_prefetch": False, "limit_all_gathers": False,
    "backward_prefetch": None, "use_orig_params": False, "use_liger_kernel": False,
    "mixed_precision": {"param_dtype": None, "reduce_dtype": None, "buffer_dtype": None},
    "amp_autocast": {"enabled": False, "precision": "bf16"}, "grad_scaler": {"enabled": False},
}
ACTOR_FSDP = {**FSDP, "forward_prefetch": True, "backward_prefetch": "pre", "use_liger_kernel": True,
              "mixed_precision": {"param_dtype": "fp16", "reduce_dtype": "fp16", "buffer_dtype": "fp32"},
              "amp_autocast": {"enabled": False, "precision": "fp16"}, "grad_scaler": {"enabled": True}}


def checkout(spec: Spec) -> str:
    """The pinned RLinf checkout on the shared storage (seed 003's layout)."""
    return f"{spec.storage.mount}/code/checkouts/{spec.pins.framework_commit}"


def _tenth(value: float) -> float:
    """value / 10 without the binary rounding noise (2e-5 / 10 is 2.0000000000000003e-06, not 2e-06)."""
    return float(f"{value / 10:.12g}")


def get_dotted(tree: dict[str, Any], key: str) -> Any:
    return dotted.get(tree, key, None)


_RUN_DIR = "the run directory, which postflight and every restart read"
# RLinf's keys that rlaunch renders from its own (base()): an override of one is that key's value.
OWNED = {
    "cluster.num_nodes": Owned("cluster.nodes"),
    "runner.max_epochs": Owned("train.epochs"),
    "runner.max_steps": Owned("train.steps", convert=lambda steps: max(int(steps), 0)),  # -1: the epochs
    "runner.save_interval": Owned("train.save_freq"),
    "runner.val_check_interval": Owned("train.test_freq"),
    "algorithm.group_size": Owned("algo.group_size"),
    "algorithm.training_batch_size_per_gpu": Owned("train.micro_batch_size_per_gpu"),
    "algorithm.n_minibatches": Owned("train.mini_batch_size", "rlaunch renders train.batch_size / "
                                     "train.mini_batch_size minibatches"),
    "rollout.gpu_memory_utilization": Owned("rollout.gpu_memory_utilization"),
    "rollout.rollout_backend": Owned("rollout.backend"),
    "rollout.model.model_path": Owned("model.path"),
    "inference.model.model_path": Owned("model.path"),
    "runner.logger.log_path": Owned("storage.mount", f"logs are in {_RUN_DIR}"),
    "runner.output_dir": Owned("storage.mount", f"outputs are in {_RUN_DIR}"),
    "runner.experiment_name": Owned("run.id", f"it names {_RUN_DIR}"),
    "runner.resume_dir": Owned("storage.mount", "auto: every restart resumes from the run's checkpoints"),
}


class Rlinf(Framework):
    name = "rlinf"
    owned = OWNED

    def checkout(self, spec: Spec) -> str:
        return checkout(spec)

    def data_file(self, spec: Spec) -> str:
        if spec.pins.source:  # DATA=: its train file, found by name
            return run_inputs.data_files(spec)["train"][0]
        name = spec.pins.dataset.get("file") or "train.jsonl"
        return f"{run_inputs.data_dir(spec)}/{name}"

    def base(self, spec: Spec) -> dict[str, Any]:
        run, algo, train, paths = spec.run, spec.algo, spec.train, spec.paths
        model, data_file = spec.paths.model, self.data_file(spec)
        seq = spec.data.max_prompt_length + spec.data.max_response_length
        steps = train.steps if train.steps > 0 else -1
        save = train.save_freq if train.save_freq > 0 else steps  # -1: only at the end
        val = train.test_freq if train.test_freq > 0 else 1
        if train.smoke:  # SMOKE=1: a few steps, validated and saved from step 1 on
            steps, save, val = train.smoke_steps, 1, 1
        loggers = ["tensorboard"] + (["wandb"] if spec.logging.wandb else [])
        tokenizer = {"tokenizer_model": model, "use_fast": True, "trust_remote_code": True,
                     "padding_side": "right"}
        return {
            "defaults": [{"override hydra/job_logging": "stdout"}],
            "hydra": {"run": {"dir": f"{paths.run_dir}/hydra"}, "output_subdir": ".hydra",
                      "job": {"chdir": False}},
            "cluster": {"num_nodes": spec.cluster.nodes, "component_placement": default_placement(spec)},
            "runner": {
                "task_type": "reasoning",
                "logger": {"log_path": paths.run_dir, "project_name": spec.logging.project,
                           "experiment_name": run.id, "logger_backends": loggers},
                "max_epochs": train.epochs, "max_steps": steps,
                "val_check_interval": val,
                "save_interval": save, "seq_length": seq, "enable_dynamic_batch_size": False,
                # auto: the highest checkpoints/global_step_N under logger.log_path (the run directory);
                # rlaunch.job.checkpoints sets incomplete ones aside before a restart.
                "max_tokens_per_mbs": seq, "resume_dir": "auto", "per_worker_log": True,
                # output_dir/experiment_name is the run directory (job/layouts.py).
                "experiment_name": run.id, "output_dir": posixpath.dirname(paths.run_dir),
            },
            "algorithm": {
                "group_size": algo.group_size,
                "n_minibatches": max(train.batch_size // train.mini_batch_size, 1),
                "training_batch_size_per_gpu": train.micro_batch_size_per_gpu,
                "rollout_batch_size_per_gpu": None, "logprob_forward_micro_batch_size": 1,
                "val_rollout_batch_size_per_gpu": 4, "recompute_logprobs": True, "shuffle_rollout": False,
                "max_num_gen_batches": 1, "loss_type": "actor", "loss_agg_func": "token-mean",
                "kl_beta": algo.kl_coef if algo.use_kl_loss else 0.0, "kl_penalty_type": "low_var_kl",
                "ratio_clip_eps": 0.2, "entropy_bonus": 0.0, "calculate_entropy": True, "clip_ratio_c": None,
                "clip_ratio_low": None, "clip_ratio_high": None, "adv_type": "grpo",
                "normalize_advantages": False, "early_stop_imp_ratio": 5.0, "use_valid_token_scale": True,
                "sampling_params": {"do_sample": True, "temperature": 1.0, "top_k": 1000000, "top_p": 1.0,
                                    "repetition_penalty": 1.0,
                                    "max_new_tokens": "${subtract:${runner.seq_length}, ${data.max_prompt_length}}",
                                    "min_new_tokens": 1},
            },
            "inference": {"group_name": "InferenceGroup", "load_from_actor": True,
                          "model": {"model_path": model, "model_type": "qwen2.5", "precision": "fp16",
                                    "is_lora": False},
                          "tokenizer": {**tokenizer, "tokenizer_model": "${inference.model.model_path}"},
                          "fsdp_config": copy.deepcopy(FSDP)},
            "rollout": {
                "group_name": "RolloutGroup", "gpu_memory_utilization": spec.rollout.gpu_memory_utilization,
                "model": {"model_path": model, "model_type": "qwen2.5", "precision": "fp16"},
                "enforce_eager": False, "distributed_executor_backend": "mp", "disable_log_stats": False,
                "detokenize": False, "padding": None, "eos": None, "rollout_backend": spec.rollout.backend,
                "sglang": {"attention_backend": "triton", "decode_log_interval": 500000,
                           "use_torch_compile": False, "torch_compile_max_bs": 128},
                "vllm": {"attention_backend": "FLASH_ATTN", "enable_chunked_prefill": True,
                         "enable_prefix_caching": True, "enable_flash_infer_sampler": True,
                         "max_num_batched_tokens": None, "torch_profiler_dir": None},
                "return_logprobs": "${not:${algorithm.recompute_logprobs}}",
                "tensor_parallel_size": spec.rollout.tp, "pipeline_parallel_size": 1,
                "validate_weight": False, "validate_save_dir": None, "print_outputs": False,
                "sglang_decode_log_interval": 500000, "max_running_requests": 64, "cuda_graph_max_bs": 128,
                "use_torch_compile": False, "torch_compile_max_bs": 128,
            },
            "data": {"type": "math", "dataset_name": spec.data.dataset,
                     "max_prompt_length": spec.data.max_prompt_length,
                     "rollout_batch_size": train.batch_size, "val_rollout_batch_size": None, "num_workers": 2,
                     "prompt_key": "prompt", "answer_key": "solutions", "apply_chat_template": False,
                     "shuffle": True, "validation_shuffle": True, "seed": 1234,
                     "train_data_paths": [data_file], "val_data_paths": [data_file]},
            "actor": {
                "group_name": "ActorGroup", "training_backend": "fsdp", "enable_offload": train.offload,
                "seed": 1234,
                "model": {"model_path": model, "model_type": "qwen2.5", "precision": "fp32",
                          "add_bias_linear": False, "is_lora": False, "tensor_model_parallel_size": 1,
                          "pipeline_model_parallel_size": 1, "activation": "swiglu", "sequence_parallel": False,
                          "recompute_method": "block", "recompute_granularity": "full", "recompute_num_layers": 20,
                          "seq_length": "${runner.seq_length}", "encoder_seq_length": "${runner.seq_length}",
                          "normalization": "rmsnorm", "position_embedding_type": "rope", "apply_rope_fusion": True,
                          "bias_dropout_fusion": False, "persist_layer_norm": False,
                          "bias_activation_fusion": False, "attention_softmax_in_fp32": True,
                          "batch_p2p_comm": False, "variable_seq_lengths": True,
                          "gradient_accumulation_fusion": False, "moe_token_dispatcher_type": "alltoall",
                          "use_cpu_initialization": False},
                "optim": {"optimizer": "adam", "bf16": False, "fp16": True, "lr": algo.lr,
                          "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1.0e-05, "min_lr": _tenth(algo.lr),
                          "weight_decay": 0.05, "use_distributed_optimizer": True, "overlap_grad_reduce": True,
                          "overlap_param_gather": True, "optimizer_enable_pin": False,
                          "overlap_param_gather_with_optimizer_step": False, "clip_grad": 0.8,
                          "loss_scale": 65536},
                "lr_sched": {"lr_warmup_fraction": 0.01, "lr_warmup_init": 0.0, "lr_warmup_iters": 0,
                             "max_lr": algo.lr, "min_lr": 0.0, "lr_decay_style": "constant",
                             "lr_decay_iters": 10},
                "tokenizer": tokenizer,
                # Seed 003: sharded (DCP) checkpoints only; postflight counts the *.distcp shards.
                "fsdp_config": {**copy.deepcopy(ACTOR_FSDP), "save_full_model_weights": False},
            },
            "reward": {"group_name": "RewardGroup", "use_reward_model": False, "reward_type": "math",
                       "reward_scale": 5.0,
                       "tokenizer": {k: f"${{actor.tokenizer.{k}}}" for k in tokenizer}},
            "critic": {"use_critic_model": False},
        }

    def config(self, spec: Spec) -> dict[str, Any]:
        """base() with framework.overrides applied (YAML values: 2-3 stays a string, 4 an int)."""
        cfg = self.base(spec)
        for key, raw in topology.parse_overrides(spec.framework.overrides).items():
            try:
                value = yaml.safe_load(raw) if raw != "" else ""
            except yaml.YAMLError:
                value = raw
            try:
                dotted.put(cfg, key, value)
            except TypeError as err:
                raise ConfigError(f"framework.overrides[{key}]", value, str(err)) from None
        return cfg

    def command(self, spec: Spec) -> list[str]:
        if spec.code.command:  # CMD=: the user's script and config dir, absolute (Hydra's is the script's)
            cmd, home = user_command.parse(spec.code.command), spec.paths.code_dir
            return ["python", f"{home}/{cmd.script}", "--config-path", f"{home}/{cmd.config_path}",
                    "--config-name", cmd.config_name, *cmd.args, *self.cmd_keys(spec)]
        return ["python", f"{checkout(spec)}/{ENTRY}", "--config-path", f"{ARTIFACTS}/{CONFIG_DIR}",
                "--config-name", CONFIG_NAME]

    def cmd_keys(self, spec: Spec) -> list[str]:
        """What rlaunch owns in a run of the user's config, forced after CMD's own: the run directory
        (outputs, logs postflight reads, Hydra's), its name, resuming from its checkpoints."""
        run_dir = spec.paths.run_dir
        return [f"++runner.output_dir={posixpath.dirname(run_dir)}", f"++runner.experiment_name={spec.run.id}",
                f"++runner.logger.log_path={run_dir}", "++runner.resume_dir=auto", *cmdfacts.model_keys(spec),
                f"hydra.run.dir={run_dir}/hydra"]

    def files(self, spec: Spec) -> dict[str, str]:
        if spec.code.command:  # the user's config is in CODE
            return {}
        return {f"{CONFIG_DIR}/{CONFIG_NAME}.yaml":
                yaml.safe_dump(self.config(spec), sort_keys=False, default_flow_style=False)}

    def env(self, spec: Spec) -> dict[str, str]:
        repo = spec.paths.code_dir if spec.code.command else checkout(spec)  # CMD=: CODE is the checkout
        env = {"REPO_PATH": repo, "RLINF_CATCH_FAILURE": "0", "RLINF_CODE_WORKING_DIR": "0",
               "CUDA_DEVICE_MAX_CONNECTIONS": "1", "TOKENIZERS_PARALLELISM": "false"}
        return env

    def pythonpath(self, spec: Spec) -> list[str]:
        # The official image's Megatron-LM (seed 003); the rlaunch image is built on it.
        return [str(p) for p in pins.get("images.rlinf.facts.pythonpath")]

    def setup(self, spec: Spec) -> list[str]:
        if spec.code.command:  # CODE is the program; the model its config names (rlaunch.config.cmdfacts)
            return run_inputs.setup_lines(spec)
        repo, commit = spec.pins.framework_repo, spec.pins.framework_commit
        q = shlex.quote(checkout(spec))
        return [
            f"if [[ ! -d {q}/.git ]]; then git clone --quiet {shlex.quote(repo)} {q} && "
            f"git -C {q} checkout --quiet --detach {commit}; fi",
            f'test "$(git -C {q} rev-parse HEAD)" = {commit}',
            *run_inputs.setup_lines(spec),
        ]

    def data_check(self, spec: Spec) -> list[str]:
        if not spec.pins.source:
            return []
        # CMD=: the rows its own config names, as RLinf composes it; else rlaunch's rendered config.
        root = code.here(spec)  # CMD= of RLinf needs CODE (config.load)
        cfg = (user_command.read_config(spec.code.command, user_command.parse(spec.code.command), root)
               if spec.code.command and root is not None else self.config(spec))
        return datacheck.lines(spec, cfg)

    def own_inputs(self, spec: Spec) -> bool:
        return bool(spec.code.command)  # the config CMD names says its model and data

    def inputs(self, spec: Spec) -> list[str]:
        if spec.code.command:
            return []
        return [f"{checkout(spec)}/{ENTRY}", f"{spec.paths.model}/config.json", self.data_file(spec)]

    def check_command(self, spec: Spec) -> None:
        """CMD=: the script and config in CODE, the user's paths, the config's placement on the cluster."""
        cmd = user_command.parse(spec.code.command)
        root = code.here(spec)
        assert root is not None  # load refuses CMD= of RLinf without CODE
        for rel, what in ((cmd.script, "the script"), (user_command.config_file(cmd), "--config-name")):
            code.require(spec, [rel], "code.command", f"{what} {rel}")
        for arg in cmd.args:
            key, _, value = arg.partition("=")
            code.check_paths(spec, f"code.command[{key.lstrip('+~')}]", value)
        cmdfacts.check(spec)  # the paths the config names: models, data
        cfg = user_command.read_config(spec.code.command, cmd, root)
        placement = get_dotted(cfg, "cluster.component_placement")
        if not isinstance(placement, dict) or not any("actor" in str(k).split(",") for k in placement):
            raise ConfigError(f"code.command[{user_command.config_file(cmd)}: cluster.component_placement]",
                              placement, "a mapping of component -> resource ranks that places the actor")
        check_placement(spec, placement)

    def check(self, spec: Spec) -> None:
        topology.require_gpus(spec, "RLinf")
        if spec.code.command:
            self.check_command(spec)
            return
        if spec.pins.source and not self.data_file(spec).endswith((".json", ".jsonl")):
            # RLinf's math dataset lists a directory's .json/.jsonl files and skips any other, silently.
            raise ConfigError("data.source", spec.data.source, f"a dataset whose train file is .json or .jsonl for "
                              f"RLinf (it skips others without a word); found {self.data_file(spec).rsplit('/', 1)[-1]}")
        if not spec.pins.framework_commit:
            raise ConfigError("framework.name", "rlinf", "a pinned commit in configs/versions.yaml "
                              "frameworks.rlinf.commit (the entrypoint comes from that checkout)")
        eff = topology.parse_overrides(spec.framework.overrides)
        cfg = self.config(spec)

        def key(name: str, fallback: str) -> str:
            return f"framework.overrides[{name}]" if name in eff else fallback

        n = get_dotted(cfg, "algorithm.group_size")
        topology.group_size(spec, key("algorithm.group_size", "algo.group_size"), n)
        placement = get_dotted(cfg, "cluster.component_placement") or {}
        if not isinstance(placement, dict) or "actor" not in placement and not any(
                "actor" in k for k in placement):
            raise ConfigError("framework.overrides[cluster.component_placement]", placement,
                              "a mapping of component -> resource ranks that places the actor")
        check_placement(spec, placement)
        if int(get_dotted(cfg, "cluster.num_nodes")) != spec.cluster.nodes:
            raise ConfigError(key("cluster.num_nodes", "cluster.nodes"), get_dotted(cfg, "cluster.num_nodes"),
                              f"cluster.nodes={spec.cluster.nodes} (RLinf waits forever for missing nodes)")
        topology.rollout_backend(spec, key("rollout.rollout_backend", "rollout.backend"),
                                 get_dotted(cfg, "rollout.rollout_backend"))
        topology.rollout_tp(spec, key("rollout.tensor_parallel_size", "rollout.tp"),
                            get_dotted(cfg, "rollout.tensor_parallel_size"))
        # validate_reasoning_cfg: global batch = rollout batch x group / n_minibatches, split over the actor.
        batch = topology.as_int("train.batch_size", get_dotted(cfg, "data.rollout_batch_size"))
        n_mini = topology.as_int("train.mini_batch_size", get_dotted(cfg, "algorithm.n_minibatches"))
        micro = topology.as_int("train.micro_batch_size_per_gpu",
                                get_dotted(cfg, "algorithm.training_batch_size_per_gpu"))
        actor_gpus = len(parse_ranks("cluster.component_placement.actor", next(
            v for k, v in placement.items() if "actor" in k.split(","))))
        if spec.train.mini_batch_size > spec.train.batch_size:
            raise ConfigError("train.mini_batch_size", spec.train.mini_batch_size,
                              f"<= the train batch (train.batch_size={spec.train.batch_size})")
        global_batch = batch * int(n) // n_mini
        if (batch * int(n)) % n_mini or global_batch % (actor_gpus * micro):
            raise ConfigError("train.micro_batch_size_per_gpu", micro,
                              f"a size that splits the actor's global batch {batch} x {n} / {n_mini} "
                              f"minibatches = {global_batch} evenly over {actor_gpus} actor GPUs")
        steps, save = get_dotted(cfg, "runner.max_steps"), get_dotted(cfg, "runner.save_interval")
        val = get_dotted(cfg, "runner.val_check_interval")
        if isinstance(save, int) and save > 0 and isinstance(val, int) and val > 0 and save % val:
            raise ConfigError(key("runner.save_interval", "train.save_freq"), save,
                              f"a multiple of runner.val_check_interval={val} (RLinf saves on validation steps)")
        if isinstance(steps, int) and steps > 0 and isinstance(save, int) and save > 0 and steps % save:
            raise ConfigError(key("runner.save_interval", "train.save_freq"), save,
                              f"a divisor of runner.max_steps={steps}, so the last step is saved")
        topology.metrics_logger(key("runner.logger.logger_backends", "logging.wandb"),
                                list(get_dotted(cfg, "runner.logger.logger_backends") or []), "tensorboard")
        for path_key, what in (("runner.output_dir", "checkpoints"), ("runner.logger.log_path", "TensorBoard logs")):
            topology.under_mount(spec, key(path_key, "storage.mount"), str(get_dotted(cfg, path_key)), what)

    def loader_check(self, spec: Spec, files: dict[str, str]) -> str:
        """RLinf's loader on the config; with CMD=, also the paths of the config as Hydra composes it
        (its defaults' files too), in the same loader process (rlaunch.config.cmdfacts)."""
        if not spec.code.command:
            return super().loader_check(spec, files)
        request = self.loader_request(spec)
        answer, tree = loaders.run(self.name, [request, {**request, "compose_only": True}], spec.run.id)
        if tree.get("ok") and isinstance(tree.get("config"), dict):
            cmdfacts.check(spec, tree["config"])
        return loaders.result_line(self.name, answer)

    def loader_request(self, spec: Spec) -> dict[str, Any]:
        if spec.code.command:  # Hydra composes the user's config dir in CODE here, as @hydra.main would
            cmd, root = user_command.parse(spec.code.command), code.here(spec)
            return {**code.loader_fields(spec), "config_dir": f"{root}/{cmd.config_path}",
                    "config_name": cmd.config_name, "env": {"REPO_PATH": str(root)},
                    "overrides": [*cmd.args, *(k for k in self.cmd_keys(spec) if not k.startswith("hydra."))]}
        return {"config_text": self.files(spec)[f"{CONFIG_DIR}/{CONFIG_NAME}.yaml"], "config_name": CONFIG_NAME,
                "overrides": []}


ADAPTER = Rlinf()
