"""verl (0.9): `python3 -m verl.trainer.main_ppo` with Hydra overrides from the spec.

PPO is GAE with a critic; GRPO (and verl's other group estimators) set algorithm.adv_estimator and
rollout.n = algo.group_size >= 2 (seed 001's "GRPO" with n=1 has no group to compare). Sizes are
literal numbers so the plan shows exactly what runs; checkpoints, data and metrics live on the shared
mount (a relative default_local_dir lands in Ray's per-job working dir, seed 002).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import code
from rlaunch.config import command as user_command
from rlaunch.config.command import trainer_pool
from rlaunch.config import inputs as run_inputs
from rlaunch.errors import ConfigError
from rlaunch.config.overrides import Owned
from rlaunch.config import topology
from rlaunch.frameworks.base import Framework
from rlaunch.frameworks.verl.cpu import datacheck as cpu_datacheck
from rlaunch.frameworks.verl.cpu import plan as cpu_plan
from rlaunch.frameworks.verl.cpu import prepare as cpu_prepare
from rlaunch.frameworks.verl.cpu import rewrites as cpu_rewrites
from rlaunch.frameworks.verl.genvalues import site_packages
from rlaunch.registry.frameworks import venv_python
from rlaunch.validate import imports

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

ENTRY = ["python3", "-m", "verl.trainer.main_ppo"]
METRICS = "metrics.jsonl"  # under paths.log_dir; postflight reads it (job/layouts.py)


def _b(value: bool) -> str:
    return "True" if value else "False"


def _wandb(loggers: object) -> bool:
    return "wandb" in (loggers if isinstance(loggers, list) else str(loggers).strip("[]").split(","))


_OURS = "the run directory's, which postflight and every restart read"


FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"


def _entry(cfg: dict[str, Any]) -> str:
    """The entry module the run's CMD names ("" without CMD or for a script)."""
    text = cfg.get("code", {}).get("command") if isinstance(cfg.get("code"), dict) else ""
    return user_command.parse(text).module if isinstance(text, str) and text.strip() else ""


def _streams_prompts(batch: object, cfg: dict[str, Any]) -> bool:
    """data.train_batch_size=0 under the fully-async trainer: its rollouter streams prompts one at a time
    (data.gen_batch_size) and its trainer steps on require_batches mini-batches, so 0 reaches verl as given."""
    return batch == 0 and _entry(cfg) == FULLY_ASYNC


def _separate_pools(_value: object, cfg: dict[str, Any]) -> bool:
    """One-step-off and fully-async: trainer.* size the trainer's pool only, the rollout's pool beside it
    (CMD's rollout.*); the cluster holds both (config.command.pools), so the user's trainer.* reach verl."""
    return _entry(cfg) in user_command.SEPARATE_POOLS


def replaced_lines(spec: Spec) -> list[str]:
    """The plan's line for each of rlaunch's own keys CMD gives (overrides.absorb dropped it): rlaunch's value
    runs, with why."""
    if not spec.code.command:
        return []
    ours = {"trainer.default_local_dir": spec.paths.ckpt_dir, "trainer.resume_mode": "auto"}
    out = []
    for key, value in user_command.parse(spec.code.command).overrides().items():
        owned = OWNED.get(key)
        if owned is not None and owned.own and value != ours.get(key):
            out.append(f"code: CMD's {key}={value} is rlaunch's own: {key}={ours[key]} runs ({owned.refuse})")
    return out


def _batch_problem(batch: object) -> str:
    """data.train_batch_size=0 is verl's fully-async trainer's (_streams_prompts); main_ppo refuses it."""
    if batch != 0:
        return ""
    return ("a number of prompts per step >= 1 (and >= train.mini_batch_size): 0 is for verl's fully-async "
            f"trainer (CMD='python3 -m {FULLY_ASYNC} ...', whose rollouter streams prompts one at a time); "
            "main_ppo's validate_config refuses a data.train_batch_size below "
            "actor_rollout_ref.actor.ppo_mini_batch_size and its trainer samples data.train_batch_size "
            "prompts a step. Set the prompts per step, e.g. data.train_batch_size=<train.mini_batch_size>")

# verl's keys that rlaunch renders from its own (overrides()): an override of one is that key's value.
OWNED = {
    "data.train_batch_size": Owned("train.batch_size", problem=_batch_problem, passes=_streams_prompts),
    "data.max_prompt_length": Owned("data.max_prompt_length"),
    "data.max_response_length": Owned("data.max_response_length"),
    "actor_rollout_ref.model.path": Owned("model.path"),
    "actor_rollout_ref.actor.optim.lr": Owned("algo.lr"),
    "critic.optim.lr": Owned("algo.critic_lr"),
    "actor_rollout_ref.actor.ppo_mini_batch_size": Owned("train.mini_batch_size"),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": Owned("train.micro_batch_size_per_gpu"),
    "critic.ppo_micro_batch_size_per_gpu": Owned("train.micro_batch_size_per_gpu",
                                                 "the critic's micro-batch is the actor's"),
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": Owned("train.log_prob_micro_batch_size_per_gpu"),
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": Owned("train.ref_log_prob_micro_batch_size_per_gpu"),
    "actor_rollout_ref.actor.use_kl_loss": Owned("algo.use_kl_loss"),
    "actor_rollout_ref.actor.kl_loss_coef": Owned("algo.kl_coef"),
    "algorithm.kl_ctrl.kl_coef": Owned("algo.kl_coef"),
    "algorithm.adv_estimator": Owned("algo.adv_estimator"),
    "actor_rollout_ref.rollout.name": Owned("rollout.backend"),
    "actor_rollout_ref.rollout.n": Owned("algo.group_size"),
    "actor_rollout_ref.rollout.tensor_model_parallel_size": Owned("rollout.tp"),
    "actor_rollout_ref.rollout.gpu_memory_utilization": Owned("rollout.gpu_memory_utilization"),
    "trainer.nnodes": Owned("cluster.nodes", passes=_separate_pools),
    "trainer.n_gpus_per_node": Owned("cluster.gpus_per_node", passes=_separate_pools),
    "trainer.save_freq": Owned("train.save_freq"),
    "trainer.test_freq": Owned("train.test_freq"),
    "trainer.total_epochs": Owned("train.epochs"),
    "trainer.total_training_steps": Owned("train.steps"),
    "trainer.logger": Owned("logging.wandb", convert=_wandb, keep=True),  # its other loggers still reach verl
    "trainer.default_local_dir": Owned("storage.mount", f"checkpoints are {_OURS}", own=True),
    "trainer.resume_mode": Owned("storage.mount", "every restart resumes from the run's checkpoints", fixed="auto",
                                 own=True),
}


# The critic's model: an override naming the actor's is accepted (verl's PPO examples say so) and rendered
# once, from model.path; where verl trains a critic, verl.check refuses any other (critic_model_problem).
CRITIC_MODEL = "critic.model.path"


def _critic_runs(spec: Spec, eff: dict[str, str]) -> bool:
    """verl 0.9.1's need_critic: critic.enable when set (it is null by default), else adv_estimator gae."""
    enable = str(eff.get("critic.enable", "null")).strip().lower()
    return enable == "true" if enable not in ("null", "none", "~", "") else spec.algo.adv_estimator == "gae"


def _actor_model(spec: Spec) -> set[str]:
    """The names of the actor's model a critic.model.path may use: model.path as given, the directory
    rlaunch prepares it in, and its hub id (with the pinned revision or without)."""
    pin = spec.pins.model
    names = {spec.model.path, spec.paths.model}
    if pin.get("hf_id"):
        names |= {str(pin["hf_id"]), f"{pin['hf_id']}@{pin.get('revision', '')}"}
    return {n.rstrip("/") for n in names if n}


def critic_model_problem(spec: Spec, path: str) -> str:
    """Why critic.model.path=path cannot run ("" when it names the actor's model)."""
    if path.strip("'\"").rstrip("/") in _actor_model(spec):
        return ""
    return (f"the actor's model (model.path={spec.model.path}), or no override: rlaunch prepares one model on "
            "the shared storage (downloaded at a pinned revision, checked by its SHA256SUMS on every node) and "
            "its memory bound and checkpoint size count the critic as that model; a critic of another model "
            "is not carried yet. Remove this override (the critic then starts from model.path)")


def _hydra(files: list[str]) -> str:
    """One file as itself (today's rendered overrides), several as Hydra's list [a,b]."""
    return files[0] if len(files) == 1 else f"[{','.join(files)}]"
# The files verl's workers open on every node, relative to their own directory (rlaunch.config.code).
NODE_FILES = ("reward.custom_reward_function.path", "data.custom_cls.path")


# verl's top-level reward keys: main_ppo ignores them; fully_async_main moves them under reward. itself.
LEGACY_REWARD = ("custom_reward_function.path", "custom_reward_function.name")


def _legacy_read(spec: Spec) -> bool:
    """Whether the entry reads LEGACY_REWARD (fully_async_main migrates them to reward.*)."""
    return bool(spec.code.command) and user_command.parse(spec.code.command).module == FULLY_ASYNC


def _node_files(spec: Spec) -> tuple[str, ...]:
    return NODE_FILES + (LEGACY_REWARD[:1] if _legacy_read(spec) else ())


def _on_nodes(spec: Spec, override: str) -> str:
    """An override naming a file verl's workers open, with the path every node finds it at
    (a path relative to CODE -> <paths.code_dir>/<path>); refused where no node would find it."""
    key, sep, value = override.partition("=")
    name = key.lstrip("+~")
    if not sep or name not in _node_files(spec):
        return override
    path = value.strip("'\"")  # Hydra's quotes
    return f"{key}={code.node_path(spec, f'framework.overrides[{name}]', path)}"


# (path key, name key, what, verl's default name): the files NODE_FILES names, with what is imported of them.
IMPORTED = (("reward.custom_reward_function.path", "reward.custom_reward_function.name", "reward function",
             "compute_score"),
            ("data.custom_cls.path", "data.custom_cls.name", "dataset class", ""))
CHECKOUT_CONFIG = "verl/trainer/config"  # in a verl checkout (CODE): the config its main_ppo composes
IMPORT_VENV = "verlcpu"  # verl at its pin with torch: what a reward or recipe imports resolves as on the nodes


def import_targets(spec: Spec) -> list[imports.Target]:
    """What verl's workers and driver import of the user's: the reward function and dataset class in
    CODE, and CMD's entry module."""
    eff = topology.parse_overrides(spec.framework.overrides)
    root = imports.code_root(spec)
    out = []
    legacy = ((*LEGACY_REWARD, "reward function", "compute_score"),) if _legacy_read(spec) else ()
    for path_key, name_key, what, default in IMPORTED + legacy:
        value = eff.get(path_key, "").strip("'\"")
        if value in ("", "null", "None") or "${" in value:
            continue
        rel = value
        if value.startswith("/"):  # on the shared storage: not here to import; in CODE's directory: its file
            if root is None or not Path(value).is_relative_to(root):
                continue
            rel = Path(value).relative_to(root).as_posix()
        name = eff.get(name_key, default).strip("'\"")
        out.append(imports.Target(f"framework.overrides[{path_key}]", value, what, file=rel,
                                  name="" if name in ("null", "None") else name))
    module = user_command.parse(spec.code.command).module if spec.code.command else ""
    if module:
        out.append(imports.Target("code.command", spec.code.command, "entry module", module=module))
    return out


_HYDRA_MAIN = re.compile(r"@hydra\.main\(([^)]*)\)")
_HYDRA_ARG = re.compile(r"""(config_path|config_name)\s*=\s*["']([^"']+)["']""")


def _installed_module(module: str) -> Path | None:
    """verl's own entry module (verl.experimental.fully_async_policy.fully_async_main) in the pinned
    verl of .venv-verl: the file the nodes' verl runs when CODE holds no verl; None without that venv."""
    try:
        path = site_packages(venv_python("verl").parents[1]) / (module.replace(".", "/") + ".py")
    except FileNotFoundError:  # no validator venv: its loader check is skipped, saying so
        return None
    return path if path.is_file() else None


def entry_config(spec: Spec, module: str) -> tuple[str, str] | None:
    """(config dir here, config name) of the entry module's own @hydra.main, from CODE when it holds
    that module (a verl checkout: one-step-off's one_step_off_ppo_trainer beside it), else from the
    pinned verl for one of verl's own (fully-async, one-step-off); None: verl's ppo_trainer."""
    root = code.here(spec)
    path = root / (module.replace(".", "/") + ".py") if root is not None else None
    if (path is None or not path.is_file()) and module.startswith("verl.") \
            and (root is None or not (root / "verl" / "__init__.py").is_file()):
        path = _installed_module(module)  # CODE has no verl of its own: the image's verl runs it
    if path is None or not path.is_file():
        return None
    found = _HYDRA_MAIN.search(path.read_text(encoding="utf-8", errors="replace"))
    args = dict(_HYDRA_ARG.findall(found.group(1))) if found else {}
    if "config_name" not in args:
        return None
    return str((path.parent / args.get("config_path", ".")).resolve()), args["config_name"]


def _with_file_logger(override: str) -> str:
    """The user's trainer.logger with rlaunch's `file` logger added (postflight reads its metrics): their
    other loggers run as they wrote them."""
    key, _, value = override.partition("=")
    if key.lstrip("+") != "trainer.logger":
        return override
    loggers = topology.hydra_list(value)
    return override if "file" in loggers else f"{key}=[{','.join([*loggers, 'file'])}]"


class Verl(Framework):
    name = "verl"
    owned = OWNED

    def data_files(self, spec: Spec) -> dict[str, list[str]]:
        """train and val files: the dataset directory's (pinned, data.path, or data.source's found by
        name), unless framework.overrides name others."""
        eff = topology.parse_overrides(spec.framework.overrides)
        found = run_inputs.data_files(spec)
        return {key: topology.hydra_list(eff[key]) if key in eff else found[split]
                for key, split in (("data.train_files", "train"), ("data.val_files", "test"))}

    def overrides(self, spec: Spec) -> list[str]:
        out = self._overrides(spec)
        return cpu_rewrites.apply(spec, out)[0] if spec.train.rehearse else out

    def rehearsal_lines(self, spec: Spec) -> list[str]:
        return cpu_plan.lines(spec, self._overrides(spec)) if spec.train.rehearse else []

    def rehearsal_check(self, spec: Spec) -> list[str]:
        return cpu_plan.check(spec) if spec.train.rehearse else []

    def data_check(self, spec: Spec) -> list[str]:
        return cpu_datacheck.lines(spec, self.overrides(spec))

    def rehearsal_python(self) -> Path:
        return cpu_plan.venv_python()

    def import_check(self, spec: Spec) -> list[str]:
        return super().import_check(spec) + replaced_lines(spec) + imports.check(spec, IMPORT_VENV,
                                                                                  import_targets(spec))

    def _overrides(self, spec: Spec) -> list[str]:
        algo, train, rollout, paths = spec.algo, spec.train, spec.rollout, spec.paths
        cluster = spec.cluster
        model = spec.paths.model
        found = run_inputs.data_files(spec)
        ppo = algo.adv_estimator == "gae"
        loggers = ["console", "file"] + (["wandb"] if spec.logging.wandb else [])
        micro = train.micro_batch_size_per_gpu
        log_prob = train.log_prob_micro_batch_size_per_gpu or micro  # 0: the actor's micro-batch
        ref_log_prob = train.ref_log_prob_micro_batch_size_per_gpu or micro
        nnodes, gpn = trainer_pool(spec) or (cluster.nodes, cluster.gpus_per_node)
        out = [
            f"algorithm.adv_estimator={algo.adv_estimator}",
            f"data.train_files={_hydra(found['train'])}",
            f"data.val_files={_hydra(found['test'])}",
            f"data.train_batch_size={train.batch_size}",
            f"data.max_prompt_length={spec.data.max_prompt_length}",
            f"data.max_response_length={spec.data.max_response_length}",
            "data.filter_overlong_prompts=True",
            "data.truncation=error",
            f"actor_rollout_ref.model.path={model}",
            f"actor_rollout_ref.actor.optim.lr={algo.lr}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={train.mini_batch_size}",
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
            f"actor_rollout_ref.actor.use_kl_loss={_b(algo.use_kl_loss)}",
            f"actor_rollout_ref.actor.kl_loss_coef={algo.kl_coef}",
            f"actor_rollout_ref.rollout.name={rollout.backend}",
            f"actor_rollout_ref.rollout.n={algo.group_size}",
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={rollout.tp}",
            f"actor_rollout_ref.rollout.gpu_memory_utilization={rollout.gpu_memory_utilization}",
            f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={log_prob}",
            f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={ref_log_prob}",
            f"algorithm.kl_ctrl.kl_coef={algo.kl_coef}",
            # KL either in the loss or in the reward, never both.
            f"algorithm.use_kl_in_reward={_b(ppo and not algo.use_kl_loss)}",
        ]
        if ppo:
            out += [f"critic.optim.lr={algo.critic_lr}", f"critic.model.path={model}",
                    f"critic.ppo_micro_batch_size_per_gpu={micro}"]
        else:
            out.append("trainer.critic_warmup=0")
        if train.offload:  # seed 001's memory-saving set for 7B on small GPUs
            tokens = max(2048, spec.data.max_prompt_length + spec.data.max_response_length)
            out += [
                "actor_rollout_ref.model.use_remove_padding=True",
                "actor_rollout_ref.model.enable_gradient_checkpointing=True",
                "actor_rollout_ref.actor.fsdp_config.param_offload=True",
                "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
                "actor_rollout_ref.ref.fsdp_config.param_offload=True",
                "actor_rollout_ref.rollout.enable_chunked_prefill=True",
                f"actor_rollout_ref.rollout.max_num_batched_tokens={tokens}",
            ]
        out += [
            f"trainer.logger=[{','.join(loggers)}]",
            f"trainer.project_name={spec.logging.project}",
            f"trainer.experiment_name={spec.run.name}",
            f"trainer.nnodes={nnodes}",
            f"trainer.n_gpus_per_node={gpn}",
            f"trainer.default_local_dir={paths.ckpt_dir}",
            # SMOKE=1: validated and saved from step 1 on, for train.smoke_steps steps.
            f"trainer.save_freq={1 if train.smoke else train.save_freq}",
            f"trainer.test_freq={1 if train.smoke else train.test_freq}",
            f"trainer.total_epochs={train.epochs}",
            "trainer.val_before_train=False",
            f"hydra.run.dir={paths.run_dir}/hydra",
        ]
        if train.smoke:
            out.append(f"trainer.total_training_steps={train.smoke_steps}")
        elif train.steps > 0:
            out.append(f"trainer.total_training_steps={train.steps}")
        # Every start of the run (a managed-job recovery, a RayJob retry, RESUME=1) continues from the
        # last checkpoint in the run directory; the first start finds none and begins at step 0.
        out.append("trainer.resume_mode=auto")
        # what passes (an Owned's `passes`) reaches verl as the user gave it, once: not rendered here
        passed = {k for k in topology.parse_overrides(spec.framework.overrides) if k in OWNED and OWNED[k].passes}
        out = [o for o in out if o.partition("=")[0] not in passed]
        # critic.model.path, the actor's (check): rendered above for PPO, from the prepared model
        return out + [_with_file_logger(_on_nodes(spec, o)) for o in spec.framework.overrides
                      if not (ppo and o.partition("=")[0].lstrip("+") == CRITIC_MODEL)]

    def command(self, spec: Spec) -> list[str]:
        if spec.code.command:  # CMD=: the user's entry module (its key=value are in the overrides)
            cmd = user_command.parse(spec.code.command)
            config = ["--config-path", f"{spec.paths.code_dir}/{cmd.config_path}", "--config-name",
                      cmd.config_name] if cmd.config_path else []  # absolute: Hydra's is the script's dir
            return [*ENTRY[:2], cmd.module, *config, *self.overrides(spec)]
        return ENTRY + self.overrides(spec)

    def env(self, spec: Spec) -> dict[str, str]:
        env = {"VERL_FILE_LOGGER_PATH": f"{spec.paths.log_dir}/{METRICS}",
               "TOKENIZERS_PARALLELISM": "false"}
        if spec.train.rehearse:
            env.update(cpu_rewrites.ENV)
        return env

    def setup(self, spec: Spec) -> list[str]:
        if spec.train.rehearse and spec.pins.source:  # DATA on the storage first: prepare reads its rows
            lines = run_inputs.setup_lines(spec)
            data = 2 if spec.pins.source.get("prepared") else 1  # and data.prepare's output, which it reads
            return [*lines[:data], cpu_prepare.line(spec), *lines[data:]]
        if spec.train.rehearse:  # the tiny model and rows first; then their manifests, as for a user's
            return [cpu_prepare.line(spec), *run_inputs.setup_lines(spec)]
        return run_inputs.setup_lines(spec)

    def inputs(self, spec: Spec) -> list[str]:
        files = [f for group in self.data_files(spec).values() for f in group]
        ddir = run_inputs.data_dir(spec)
        out = files + ([f"{ddir}/SHA256SUMS"] if any(f.startswith(ddir + "/") for f in files) else [])
        mdir = run_inputs.model_dir(spec)
        if mdir:
            out.append(f"{mdir}/config.json")
        return list(dict.fromkeys(out))

    def check(self, spec: Spec) -> None:
        topology.require_gpus(spec, "verl")
        eff = topology.parse_overrides(spec.framework.overrides)
        n = topology.as_int("actor_rollout_ref.rollout.n", eff.get("actor_rollout_ref.rollout.n",
                                                                   spec.algo.group_size))
        n_key = "framework.overrides[actor_rollout_ref.rollout.n]" if "actor_rollout_ref.rollout.n" in eff \
            else "algo.group_size"
        topology.group_size(spec, n_key, n)
        pool = trainer_pool(spec)  # separate pools: the cluster holds both (config.command.pools)
        nnodes = pool[0] if pool else topology.as_int("trainer.nnodes", eff.get("trainer.nnodes", spec.cluster.nodes))
        gpn = pool[1] if pool else topology.as_int("trainer.n_gpus_per_node",
                                                   eff.get("trainer.n_gpus_per_node", topology.gpus_per_node(spec)))
        if not pool and nnodes * gpn != topology.total_gpus(spec):
            raise ConfigError("framework.overrides[trainer.nnodes]", f"{nnodes}x{gpn}",
                                       f"the cluster's {spec.cluster.nodes} nodes x "
                                       f"{spec.cluster.gpus_per_node} GPUs (set cluster.* instead)")
        # fully-async's data.train_batch_size=0 (passes): its trainer steps on require_batches mini-batches
        step = topology.as_int("async_training.require_batches", eff.get("async_training.require_batches", 1)) \
            if "data.train_batch_size" in eff else None
        topology.batch_sizes(spec, n, nnodes * gpn, {
            "batch_override": "data.train_batch_size",
            "mini_override": "actor_rollout_ref.actor.ppo_mini_batch_size",
            "micro_override": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"}, step)
        topology.rollout_tp(spec, "rollout.tp", eff.get("actor_rollout_ref.rollout.tensor_model_parallel_size"))
        topology.rollout_backend(spec, "rollout.backend", eff.get("actor_rollout_ref.rollout.name"))
        ckpt = eff.get("trainer.default_local_dir", spec.paths.ckpt_dir)
        ckpt_key = "framework.overrides[trainer.default_local_dir]" if "trainer.default_local_dir" in eff \
            else "storage.mount"
        topology.under_mount(spec, ckpt_key, ckpt, "checkpoints")
        for key in ("data.train_files", "data.val_files"):
            if key in eff:
                for path in topology.hydra_list(eff[key]):  # each of a list: verl reads them all
                    topology.under_mount(spec, f"framework.overrides[{key}]", path, "data")
        if CRITIC_MODEL in eff and _critic_runs(spec, eff) and critic_model_problem(spec, eff[CRITIC_MODEL]):
            raise ConfigError(f"framework.overrides[{CRITIC_MODEL}]", eff[CRITIC_MODEL],
                              critic_model_problem(spec, eff[CRITIC_MODEL]))
        for key in LEGACY_REWARD:
            if key in eff and not _legacy_read(spec):  # measured by the CPU rehearsal: the default reward scored the rows instead
                raise ConfigError(f"framework.overrides[{key}]", eff[key],
                                  f"reward.{key}: verl {spec.pins.framework_version}'s main_ppo reads "
                                  "the reward function from reward.custom_reward_function only (its "
                                  "fully_async_main alone moves the top-level key there); with this one "
                                  "verl's default reward would score your data")
        for override in spec.framework.overrides:  # refused here, before anything is rendered
            _on_nodes(spec, override)
            name, _, value = override.partition("=")
            if name.lstrip("+~") not in _node_files(spec):  # any other path of this machine: no node has it
                code.check_paths(spec, f"framework.overrides[{name.lstrip('+~')}]", value)

    def loader_request(self, spec: Spec) -> dict[str, Any]:
        required = ["actor_rollout_ref.rollout.name", "actor_rollout_ref.model.path"]
        if spec.algo.adv_estimator == "gae":
            required.append("critic.model.path")
        # hydra.* keys belong to the app's run dir, not to the composed config.
        request: dict[str, Any] = {"overrides": [o for o in self.overrides(spec) if not o.startswith("hydra.")],
                                   "required": required}
        cmd = user_command.parse(spec.code.command) if spec.code.command else None
        own = entry_config(spec, cmd.module) if cmd is not None and cmd.module else None
        if cmd is not None and cmd.config_path:  # a recipe's own config dir: that config, from CODE here
            request.update(code.loader_fields(spec), config_dir=f"{code.here(spec)}/{cmd.config_path}",
                           config_name=cmd.config_name)
        elif own is not None:  # the entry's @hydra.main config (one-step-off, fully-async): CODE's or verl's
            request.update(code.loader_fields(spec), config_dir=own[0], config_name=own[1])
        else:
            root = imports.code_root(spec)
            if root is not None and (imports.checkout(root) or ("",))[0] == "verl":
                request["config_dir"] = str(root / CHECKOUT_CONFIG)  # CODE's verl runs: its config composes
        return request


ADAPTER = Verl()
