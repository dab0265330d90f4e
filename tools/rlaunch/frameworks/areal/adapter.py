"""AReaL (1.0.4): examples/math/gsm8k_rl.py with an experiment YAML rlaunch renders, or the user's
own entry script and YAML from CODE (CMD=, issue 47).

With CMD= the script, its YAML and its key=value are the user's, passed as given (paths made CODE's
on the nodes); rlaunch adds only its own keys after them (cmd_keys: the run's names, fileroot and
name records, the stats logger postflight reads, recovery, the scheduler where the command names
none). The nodes and GPUs are the YAML's (cluster.*, the command's on top: rlaunch.config.command),
and its allocation (rollout.backend, actor.backend) is checked against them, never replaced.
Through AReaL's SPMD launcher (`python3 -m areal.infra.launcher.<local|ray> <script> --config ...`) the
launcher runs as the job's driver on rlaunch's cluster: the Ray launcher joins the Ray cluster rlaunch
formed (its ray.init()) and places the rollout servers and trainer processes by `allocation_mode`, which
is then what is checked against the GPUs (its sum equal to them: areal/infra/utils/launcher.py at 1.0.4);
rlaunch sets no scheduler.type there (the launcher schedules; its trainers run with AREAL_SPMD_MODE=1).

The experiment YAML follows AReaL's examples/math/gsm8k_grpo.yaml at the pinned version (it is in
AReaL's git repository and its image at /AReaL, but in no PyPI artifact, so rlaunch writes the whole
file: the launch and the validator read the very same bytes). Seed 000's per-launch settings stay on
the command line: one node runs AReaL's local scheduler (scheduler.type=local), several nodes its Ray
scheduler (scheduler.type=ray on a config that has a `scheduler` section, and Ray name resolution).
Seed 000's multi-node form, `scheduler.type=ray` on a config without that section, is rejected by
AReaL's loader (tests/unit/test_loaders.py shows it).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import yaml

from rlaunch.config import cmdfacts, code, dotted, pins
from rlaunch.config import command as user_command
from rlaunch.config import inputs as run_inputs
from rlaunch.errors import ConfigError
from rlaunch.config.overrides import Owned
from rlaunch.config import topology
from rlaunch.frameworks.areal.allocation import allocation_gpus
from rlaunch.frameworks.base import ARTIFACTS, Framework
from rlaunch.frameworks.areal import datacheck
from rlaunch.validate import imports

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

AREAL_HOME = "/AReaL"  # AReaL's source in its runtime image (Dockerfile: COPY . /AReaL)
ENTRY = "examples/math/gsm8k_rl.py"
CONFIG = "areal.yaml"
SCHEDULERS = ("local", "ray")
MAX_TOKENS_PER_MB = 10240  # gsm8k_grpo.yaml's actor.mb_spec at the pin (train.max_tokens_per_mb: 0)
ENGINES = {"rollout.backend": ("sglang", "vllm"), "actor.backend": ("fsdp", "megatron", "archon")}


# AReaL's keys that rlaunch renders from its own (experiment(), cli()): an override of one is that key's value.
OWNED = {
    "train_dataset.batch_size": Owned("train.batch_size"),
    "train_dataset.max_length": Owned("data.max_prompt_length"),
    "train_dataset.path": Owned("data.path"),
    "valid_dataset.path": Owned("data.path"),
    "gconfig.max_new_tokens": Owned("data.max_response_length"),
    "gconfig.n_samples": Owned("algo.group_size"),
    "actor.path": Owned("model.path"),
    "tokenizer_path": Owned("model.path", "the tokenizer is the actor's model's"),
    "actor.optimizer.lr": Owned("algo.lr"),
    "actor.mb_spec.max_tokens_per_mb": Owned("train.max_tokens_per_mb"),
    "actor.ppo_n_minibatches": Owned("train.mini_batch_size", "rlaunch renders train.batch_size / "
                                     "train.mini_batch_size minibatches"),
    "total_train_epochs": Owned("train.epochs"),
    "total_train_steps": Owned("train.steps"),
    "cluster.n_nodes": Owned("cluster.nodes"),
    "cluster.n_gpus_per_node": Owned("cluster.gpus_per_node"),
    "saver.freq_steps": Owned("train.save_freq"),
    "vllm.gpu_memory_utilization": Owned("rollout.gpu_memory_utilization"),
    "stats_logger.wandb.mode": Owned("logging.wandb", convert=lambda mode: str(mode) != "disabled"),
    "experiment_name": Owned("run.name", "it names the run directory postflight reads"),
    "trial_name": Owned("run.id", "it names the run directory postflight reads"),
}


class Areal(Framework):
    name = "areal"
    owned = OWNED

    # --- what the run sees ------------------------------------------------------------------------

    # AReaL loads GSM8K itself (load_dataset(path, name="main")): the pinned hub snapshot as is.
    dataset_snapshot = True

    def dataset_path(self, spec: Spec) -> str:
        """The GSM8K snapshot: rlaunch's pinned one (<data_dir>-hf) or data.path."""
        return run_inputs.data_dir(spec)

    def fileroot(self, spec: Spec) -> str:
        eff = topology.parse_overrides(spec.framework.overrides)
        return eff.get("cluster.fileroot", spec.paths.run_dir)

    def scheduler(self, spec: Spec) -> str:
        return "local" if spec.cluster.nodes == 1 else "ray"

    def backends(self, spec: Spec) -> tuple[str, str]:
        """Half the GPUs generate, half train (seed 000: sglang:d1 + fsdp:d1 on 2, d8 + d8 on 2 x 8)."""
        dp = max(topology.total_gpus(spec) // 2, 1)
        engine = spec.rollout.backend
        return f"{engine}:d{dp}", f"fsdp:d{dp}"

    def experiment(self, spec: Spec) -> dict[str, Any]:
        """The experiment YAML as a mapping: gsm8k_grpo.yaml's settings with the spec's values."""
        run, algo, train, paths = spec.run, spec.algo, spec.train, spec.paths
        multi = spec.cluster.nodes > 1
        name_resolve = ({"type": "ray", "ray_actor_name": "ray_kv_store"} if multi else
                        {"type": "nfs", "nfs_record_root": f"{paths.run_dir}/name_resolve"})
        common = {"experiment_name": "${experiment_name}", "trial_name": "${trial_name}",
                  "fileroot": "${cluster.fileroot}"}
        freq = {"freq_epochs": None if train.save_freq > 0 else 1,
                "freq_steps": train.save_freq if train.save_freq > 0 else None, "freq_secs": None}
        evaluate = {"freq_epochs": 1, "freq_steps": None, "freq_secs": None}
        if train.smoke:  # SMOKE=1: a few steps, evaluated and saved from step 1 on
            freq = evaluate = {"freq_epochs": None, "freq_steps": 1, "freq_secs": None}
        mb = {"max_tokens_per_mb": train.max_tokens_per_mb or MAX_TOKENS_PER_MB, "packing_algorithm": "ffd"}
        rollout_backend, actor_backend = self.backends(spec)
        dataset = self.dataset_path(spec)
        return {
            "experiment_name": run.name, "trial_name": run.id, "seed": 1, "enable_offload": train.offload,
            "total_train_epochs": train.epochs, "tokenizer_path": "${actor.path}",
            **({"total_train_steps": train.smoke_steps} if train.smoke else {}),
            "cluster": {"n_nodes": spec.cluster.nodes, "n_gpus_per_node": spec.cluster.gpus_per_node,
                        "fileroot": self.fileroot(spec), "name_resolve": name_resolve},
            "scheduler": {"type": None},
            "rollout": {"backend": rollout_backend, "experiment_name": "${experiment_name}",
                        "trial_name": "${trial_name}", "max_concurrent_rollouts": 256, "queue_size": None,
                        "consumer_batch_size": "${train_dataset.batch_size}", "max_head_offpolicyness": 2,
                        "enable_rollout_tracing": False, "scheduling_spec": "${actor.scheduling_spec}",
                        "fileroot": "${cluster.fileroot}", "tokenizer_path": "${tokenizer_path}",
                        "dump_to_file": True},
            "gconfig": {"n_samples": algo.group_size, "min_new_tokens": 0,
                        "max_new_tokens": spec.data.max_response_length, "greedy": False,
                        "temperature": 1.0},
            "actor": {
                "backend": actor_backend, "experiment_name": "${experiment_name}", "trial_name": "${trial_name}",
                "path": spec.paths.model, "init_from_scratch": False, "disable_dropout": True,
                "gradient_checkpointing": True, "dtype": "bfloat16", "mb_spec": mb,
                "optimizer": {"type": "adam", "lr": algo.lr, "weight_decay": 0.017, "beta1": 0.9,
                              "beta2": 0.999, "eps": 1e-8, "lr_scheduler_type": "constant",
                              "gradient_clipping": 1.0, "warmup_steps_proportion": 0.001},
                "eps_clip": 0.4, "temperature": "${gconfig.temperature}", "reward_scaling": 10.0,
                "reward_bias": -0.5, "kl_ctl": algo.kl_coef if algo.use_kl_loss else 0.0,
                "ppo_n_minibatches": max(train.batch_size // train.mini_batch_size, 1),
                "recompute_logprob": True, "use_decoupled_loss": True,
                "rejection_sampling": {"metric": "ratio", "upper": 5.0},
                "reward_norm": {"mean_level": "group", "std_level": "group", "group_size": "${gconfig.n_samples}"},
                "adv_norm": {"mean_level": "batch", "std_level": "batch"},
                "weight_update_mode": "xccl", "max_new_tokens": "${gconfig.max_new_tokens}",
                "scheduling_spec": [{"task_type": "worker", "port_count": 2, "gpu": 1, "mem": 32,
                                     "cmd": "python3 -m areal.infra.rpc.rpc_server", "env_vars": {}}],
            },
            "ref": {"backend": "${actor.backend}", "experiment_name": "${experiment_name}",
                    "trial_name": "${trial_name}", "path": "${actor.path}", "init_from_scratch": False,
                    "disable_dropout": True, "dtype": "${actor.dtype}", "mb_spec": mb, "optimizer": None,
                    "scheduling_strategy": {"type": "colocation", "target": "actor"},
                    "scheduling_spec": "${actor.scheduling_spec}"},
            "sglang": {"model_path": "${actor.path}", "random_seed": "${seed}", "skip_tokenizer_init": True,
                       "dtype": "${actor.dtype}", "max_running_requests": None, "context_length": 32768,
                       "mem_fraction_static": 0.8},
            "vllm": {"model": "${actor.path}", "seed": "${seed}", "skip_tokenizer_init": False,
                     "dtype": "${actor.dtype}", "max_model_len": 32768,
                     "gpu_memory_utilization": spec.rollout.gpu_memory_utilization},
            "train_dataset": {"batch_size": train.batch_size, "shuffle": True, "pin_memory": True,
                              "num_workers": 4, "path": dataset, "type": "rl",
                              "max_length": spec.data.max_prompt_length},
            "valid_dataset": {"batch_size": train.batch_size, "pin_memory": True, "num_workers": 4,
                              "path": dataset, "type": "rl"},
            "saver": {**common, **freq},
            # AReaL resumes from recover_info/ under the run's fileroot, written as often as the
            # checkpoints (train.save_freq): every restart of the run continues from the last one.
            "recover": {**common, "mode": "auto", **freq},
            "evaluator": {**common, **evaluate},
            "stats_logger": {**common, "wandb": {"mode": "online" if spec.logging.wandb else "disabled",
                                                 "project": spec.logging.project},
                             "tensorboard": {"path": f"{paths.run_dir}/tensorboard"}},
            "perf_tracer": {**common, "enabled": False, "session_tracer": {"enabled": False}},
        }

    def cli(self, spec: Spec) -> list[str]:
        """Seed 000's command-line overrides, then framework.overrides."""
        rollout_backend, actor_backend = self.backends(spec)
        out = [f"scheduler.type={self.scheduler(spec)}",
               f"experiment_name={spec.run.name}", f"trial_name={spec.run.id}",
               f"cluster.n_nodes={spec.cluster.nodes}",
               f"cluster.n_gpus_per_node={spec.cluster.gpus_per_node}",
               f"rollout.backend={rollout_backend}", f"actor.backend={actor_backend}"]
        if spec.cluster.nodes > 1:
            out.append("cluster.name_resolve.type=ray")
        return out + list(spec.framework.overrides)

    def command(self, spec: Spec) -> list[str]:
        if spec.code.command:  # CMD=: the user's script and YAML, from CODE on every node
            cmd = user_command.parse(spec.code.command)
            home = spec.paths.code_dir
            launcher = ["-m", cmd.launcher] if cmd.launcher else []
            return ["python3", *launcher, f"{home}/{cmd.script}", "--config", f"{home}/{cmd.config}",
                    *self.cmd_args(spec)]
        return ["python3", f"{AREAL_HOME}/{ENTRY}", "--config", f"{ARTIFACTS}/{CONFIG}", *self.cli(spec)]

    def cmd_args(self, spec: Spec) -> list[str]:
        """CMD's key=value as given, then rlaunch's own keys (cmd_keys)."""
        return [*user_command.parse(spec.code.command).args, *self.cmd_keys(spec)]

    def cmd_keys(self, spec: Spec) -> list[str]:
        """What rlaunch owns in a run of the user's YAML, forced (++: the YAML may not have the key):
        the names and fileroot postflight and every restart read, name records on the shared storage
        (Ray's on several nodes), recovery from the run's checkpoints, the scheduler unless CMD names one
        or runs AReaL's launcher (which schedules)."""
        run_dir, multi = spec.paths.run_dir, spec.cluster.nodes > 1
        cmd = user_command.parse(spec.code.command)
        given = cmd.overrides()
        out = [f"++experiment_name={spec.run.name}", f"++trial_name={spec.run.id}", f"++cluster.fileroot={run_dir}"]
        out += (["++cluster.name_resolve.type=ray"] if multi else
                ["++cluster.name_resolve.type=nfs", f"++cluster.name_resolve.nfs_record_root={run_dir}/name_resolve"])
        out += [f"++stats_logger.{k}={v}" for k, v in (("experiment_name", spec.run.name),
                                                       ("trial_name", spec.run.id), ("fileroot", run_dir))]
        out.append("++recover.mode=auto")
        if "scheduler.type" not in given and not cmd.launcher:
            out.append(f"++scheduler.type={self.scheduler(spec)}")
        return out + cmdfacts.model_keys(spec)

    def files(self, spec: Spec) -> dict[str, str]:
        if spec.code.command:  # the user's YAML is in CODE
            return {}
        return {CONFIG: yaml.safe_dump(self.experiment(spec), sort_keys=False, default_flow_style=False)}

    def env(self, spec: Spec) -> dict[str, str]:
        # AReaL names its log and checkpoint dirs after $USER, which a container may not set.
        env = {"TOKENIZERS_PARALLELISM": "false", "USER": "rlaunch"}
        return env

    def setup(self, spec: Spec) -> list[str]:
        # CMD=: the model its YAML names (rlaunch.config.cmdfacts), its data the framework's to load
        return run_inputs.setup_lines(spec)

    def own_inputs(self, spec: Spec) -> bool:
        return bool(spec.code.command)  # the config CMD names says its model and data

    def inputs(self, spec: Spec) -> list[str]:
        if spec.code.command:
            return []
        out = [f"{self.dataset_path(spec)}/SHA256SUMS"]
        if run_inputs.model_dir(spec):
            out.append(f"{run_inputs.model_dir(spec)}/config.json")
        return out

    def data_check(self, spec: Spec) -> list[str]:
        return datacheck.lines(spec)

    # --- checks -----------------------------------------------------------------------------------

    def check(self, spec: Spec) -> None:
        topology.require_gpus(spec, "AReaL")
        if spec.code.command:
            self.check_command(spec)
            return
        if spec.data.dataset != "gsm8k":
            raise ConfigError("data.dataset", spec.data.dataset, "gsm8k (AReaL's gsm8k_rl.py entrypoint)")
        if "gsm8k" not in self.dataset_path(spec).lower() and spec.pins.source:
            raise ConfigError("data.source", spec.data.source, "for AReaL, not yet anything but GSM8K: it chooses "
                              "its dataset loader by the path; hf:openai/gsm8k, or a copy on the storage at a path "
                              "naming gsm8k")
        if "gsm8k" not in self.dataset_path(spec).lower():
            raise ConfigError("data.path", spec.data.path, "a directory whose path names gsm8k (AReaL "
                              "chooses its dataset loader by the path), e.g. /data/data/gsm8k")
        eff = topology.parse_overrides(spec.framework.overrides)
        topology.group_size(spec, *(("framework.overrides[gconfig.n_samples]", eff["gconfig.n_samples"])
                                    if "gconfig.n_samples" in eff else ("algo.group_size", None)))
        topology.rollout_backend(spec)
        sched = eff.get("scheduler.type", self.scheduler(spec))
        if sched not in SCHEDULERS:
            raise ConfigError("framework.overrides[scheduler.type]", sched, "local (one node) or ray (several)")
        if sched == "local" and spec.cluster.nodes > 1:
            raise ConfigError("framework.overrides[scheduler.type]", sched,
                              f"ray: the local scheduler runs on one node, cluster.nodes={spec.cluster.nodes}")
        rollout_backend, actor_backend = self.backends(spec)
        used = 0
        for key, default in (("rollout.backend", rollout_backend), ("actor.backend", actor_backend)):
            value = eff.get(key, default)
            where = f"framework.overrides[{key}]" if key in eff else "cluster.gpus_per_node"
            engine = str(value).split(":", 1)[0]
            if engine not in ENGINES[key]:
                raise ConfigError(where, value, f"engine:sizes with a colon, the engine one of "
                                  f"{', '.join(ENGINES[key])}, e.g. {ENGINES[key][0]}:d4")
            used += allocation_gpus(where, value)
        if used > topology.total_gpus(spec):
            named = [f"framework.overrides[{k}]" for k in ("rollout.backend", "actor.backend") if k in eff]
            raise ConfigError(named[0] if named else "cluster.gpus_per_node",
                              f"{eff.get('rollout.backend', rollout_backend)} + "
                              f"{eff.get('actor.backend', actor_backend)}",
                              f"parallel sizes that fit the {topology.total_gpus(spec)} GPUs (rollout and "
                              f"actor GPUs add up to {used})")
        key = "framework.overrides[cluster.fileroot]" if "cluster.fileroot" in eff else "storage.mount"
        topology.under_mount(spec, key, self.fileroot(spec), "AReaL's cluster.fileroot (logs, checkpoints, "
                             "name records)")
        batch = topology.as_int("train.batch_size", eff.get("train_dataset.batch_size", spec.train.batch_size))
        dp = allocation_gpus("actor.backend", eff.get("actor.backend", actor_backend))
        n = topology.as_int("algo.group_size", eff.get("gconfig.n_samples", spec.algo.group_size))
        if (batch * n) % dp:
            raise ConfigError("train.batch_size", batch, f"batch x n_samples ({batch} x {n}) divisible by the "
                              f"actor's {dp} data-parallel GPUs")
        tokens = spec.train.max_tokens_per_mb or MAX_TOKENS_PER_MB
        longest = spec.data.max_prompt_length + spec.data.max_response_length
        if tokens < longest:
            raise ConfigError("train.max_tokens_per_mb", tokens, f">= one whole sequence, data.max_prompt_length + "
                              f"data.max_response_length = {longest} (AReaL packs sequences into micro-batches)")
        if spec.train.mini_batch_size > batch:
            raise ConfigError("train.mini_batch_size", spec.train.mini_batch_size,
                              f"<= the train batch (train.batch_size={batch})")

    def check_command(self, spec: Spec) -> None:
        """CMD=: the user's allocation and scheduler against the cluster the YAML gives, their paths
        (the GSM8K rules are the preset's, not a user program's)."""
        text = spec.code.command
        cmd = user_command.parse(text)
        root = code.here(spec)
        assert root is not None  # load refuses CMD= of AReaL without CODE
        for rel, what in ((cmd.script, "the script"), (cmd.config, "--config")):
            code.require(spec, [rel], "code.command", f"{what} {rel}")
        cfg = user_command.read_config(text, cmd, root)
        given = cmd.overrides()
        for arg in cmd.args:
            key, _, value = arg.partition("=")
            code.check_paths(spec, f"code.command[{key.lstrip('+~')}]", value)
        cmdfacts.check(spec)  # the paths the config names: models, data

        def where(key: str) -> str:
            return f"code.command[{key}]" if key in given else f"code.command[{cmd.config}: {key}]"

        if cmd.launcher:
            self.check_launcher(spec, cmd, cfg, where)
            return
        sched = str(dotted_get(cfg, "scheduler.type") if "scheduler.type" in given else self.scheduler(spec))
        if sched not in SCHEDULERS:
            raise ConfigError(where("scheduler.type"), sched, "local (one node) or ray (several)")
        if sched == "local" and spec.cluster.nodes > 1:
            raise ConfigError(where("scheduler.type"), sched,
                              f"ray: the local scheduler runs on one node, cluster.n_nodes={spec.cluster.nodes}")
        used, named = 0, []
        for key in ("rollout.backend", "actor.backend"):
            value = dotted_get(cfg, key)
            if value in (None, ""):
                continue
            engine = str(value).split(":", 1)[0]
            if engine not in ENGINES[key]:
                raise ConfigError(where(key), value, f"engine:sizes with a colon, the engine one of "
                                  f"{', '.join(ENGINES[key])}, e.g. {ENGINES[key][0]}:d4")
            used += allocation_gpus(where(key), value)
            named.append(f"{key}={value}")
        if used > topology.total_gpus(spec):
            raise ConfigError(where("rollout.backend"), " + ".join(named),
                              f"parallel sizes that fit the {spec.cluster.nodes} x {spec.cluster.gpus_per_node} "
                              f"GPUs of cluster.n_nodes x cluster.n_gpus_per_node (they add up to {used})")

    def check_launcher(self, spec: Spec, cmd: user_command.Command, cfg: dict[str, Any], where: Any) -> None:
        """`-m areal[.infra].launcher.<local|ray>`: the module is in the AReaL that runs (CODE's checkout,
        else the pin's), the local launcher on one node, and allocation_mode (what the SPMD launchers place
        by) in the pinned parser's syntax, its GPUs those of the cluster."""
        text, kind = spec.code.command, cmd.launcher.rsplit(".", 1)[1]
        pinned = pins.get("frameworks.areal.version")  # the AReaL whose names and parser these are
        root = code.here(spec)
        old_name = cmd.launcher.startswith("areal.launcher.")
        if old_name and not (root and (root / "areal/launcher" / f"{kind}.py").is_file()):
            raise ConfigError("code.command", text, f"-m areal.infra.launcher.{kind}: AReaL {pinned}'s launcher "
                              f"(areal.launcher moved to areal.infra.launcher in AReaL #919); CODE has no "
                              f"areal/launcher/{kind}.py")
        if kind == "local" and spec.cluster.nodes > 1:
            raise ConfigError(where("cluster.n_nodes"), spec.cluster.nodes, f"1: -m {cmd.launcher} runs every "
                              "process on one node; -m areal.infra.launcher.ray for several")
        mode = str(dotted_get(cfg, "allocation_mode") or "")
        total = topology.total_gpus(spec)
        if not mode:
            half = max(total // 2, 1)
            raise ConfigError(where("allocation_mode"), "", f"<engine>:<dims>+<engine>:<dims> in CMD, e.g. "
                              f"++allocation_mode=sglang:d{half}+fsdp:d{half} (++: AReaL's example YAMLs have "
                              f"no such key): -m {cmd.launcher} places the rollout servers and trainers by it")
        parts = mode.split("+")
        fixed = "+".join(re.sub(r"^([a-z_]+)\.", r"\1:", part) if "." in part.split(":")[0] else
                         (part if ":" in part else f"fsdp:{part}") for part in parts)
        if fixed != mode:
            raise ConfigError(where("allocation_mode"), mode, f"{fixed}: AReaL {pinned}'s parser wants a colon "
                              "between each part's engine and its sizes, and an engine on every part")
        used = sum(max(allocation_gpus(where("allocation_mode"), one) for one in part.split("|"))
                   for part in parts)
        if used != total:
            raise ConfigError(where("allocation_mode"), mode, f"parallel sizes that add up to the {total} GPUs "
                              f"of cluster.n_nodes x cluster.n_gpus_per_node ({spec.cluster.nodes} x "
                              f"{spec.cluster.gpus_per_node}); they add up to {used} (AReaL's launcher wants "
                              "them equal)")
        train = [part for part in parts if part.split(":")[0].split("[")[0] in ENGINES["actor.backend"]]
        actor = dotted_get(cfg, "actor.backend")
        if len(train) == 1 and "|" not in train[0] and actor not in (None, ""):
            if allocation_gpus(where("actor.backend"), actor) != allocation_gpus(where("allocation_mode"), train[0]):
                raise ConfigError(where("actor.backend"), actor, f"actor.backend={train[0]} in CMD, allocation_mode's "
                                  f"training part: -m {cmd.launcher} starts that many trainer processes and the "
                                  "trainer builds actor.backend's process group over them (areal/trainer/"
                                  f"rl_trainer.py at {pinned})")

    def launcher_lines(self, spec: Spec) -> list[str]:
        """The plan's line on what rlaunch does with CMD's launcher word."""
        cmd = user_command.parse(spec.code.command) if spec.code.command else None
        if cmd is None or not cmd.launcher:
            return []
        if cmd.launcher.endswith(".local"):
            how = "it runs the rollout servers and torchrun's trainers on this one node"
        else:
            how = ("it joins that cluster (ray.init()) and places the rollout servers and trainers on it by "
                   "allocation_mode")
        return [f"code: -m {cmd.launcher}: rlaunch formed the Ray cluster and runs AReaL's launcher as the job's "
                f"driver; {how} (AReaL's SPMD mode: rlaunch sets no scheduler.type)"]

    def import_check(self, spec: Spec) -> list[str]:
        """CMD's entry script (`python3 <script> --config <yaml> ...`, in CODE): the workflow and reward
        dotted paths it and its config hand the workers, imported in .venv-areal with CODE and the script's
        directory on the path (AReaL's launcher gives its workers the driver's sys.path)."""
        lines = super().import_check(spec) + self.launcher_lines(spec)
        cmd = user_command.parse(spec.code.command) if spec.code.command else None
        root = imports.code_root(spec)
        if root is None or cmd is None or not cmd.script or not (root / cmd.script).is_file():
            return lines
        targets = imports.script_targets(root, cmd.script, "code.command", cmd.config)
        return lines + imports.check(spec, "areal", targets, entry=cmd.script, path=(os.path.dirname(cmd.script),))

    def loader_request(self, spec: Spec) -> dict[str, Any]:
        if spec.code.command:  # the user's YAML and script from CODE here, with CODE on the path
            cmd = user_command.parse(spec.code.command)
            root = code.here(spec)
            return {**code.loader_fields(spec), "config_path": str(root / cmd.config) if root else "",
                    "script": str(root / cmd.script) if root else "", "overrides": self.cmd_args(spec)}
        return {"config_text": self.files(spec)[CONFIG], "overrides": self.cli(spec)}


def dotted_get(tree: dict[str, Any], key: str) -> Any:
    return dotted.get(tree, key, None)


ADAPTER = Areal()
