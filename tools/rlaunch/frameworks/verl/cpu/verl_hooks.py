"""verl 0.9.1 on CPU through its own hooks: imported by `import verl` in every process when
VERL_USE_EXTERNAL_MODULES names this module. Each piece answers one CUDA-only assumption that stopped
main_ppo on CPU (docs/VERL-ON-CPU.md); none edits a verl file.
"""

from __future__ import annotations

import importlib.metadata as _md
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

# verl picks its platform by probing cuda/npu/rocm and falls back to "nvidia"; this one by name.
os.environ.setdefault("VERL_PLATFORM", "cpu")
# verl registers its FSDP engines for cuda and npu only; its own override picks the cuda entry
# (the engine then runs where the platform says, on CPU).
os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
# vLLM-CPU reserves 4 GiB of KV cache per server by default (vllm/envs.py); the tiny model needs
# far less, and a rehearsal runs one server per node on one machine.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

# verl.third_party.vllm asks for the distribution "vllm"; vLLM's CPU build is "vllm-cpu".
_version = _md.version


def _version_of(distribution_name: str) -> str:  # importlib.metadata.version's own parameter
    try:
        return _version(distribution_name)
    except _md.PackageNotFoundError:
        if distribution_name == "vllm":
            return _version("vllm-cpu")
        raise


_md.version = _version_of


class CpuIndex(str):
    """What verl's get_device_id() returns here. verl uses it as a device (`.to(i)`,
    `torch.device(i)`: an int means cuda:i, so it must be "cpu") and as an index in
    f"{device_name}:{i}" (so it formats as 0)."""

    def __new__(cls) -> CpuIndex:
        return super().__new__(cls, "cpu")

    def __format__(self, spec: str) -> str:
        return format(0, spec)


class _CpuDevice:
    """torch.cpu plus the torch.cuda calls verl makes on its device module (memory accounting, cache)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def memory_reserved(*_a: Any, **_k: Any) -> int:
        return 0

    memory_allocated = max_memory_allocated = max_memory_reserved = memory_reserved

    @staticmethod
    def mem_get_info(*_a: Any, **_k: Any) -> tuple[int, int]:
        import psutil

        vm = psutil.virtual_memory()
        return vm.available, vm.total

    @staticmethod
    def empty_cache() -> None:
        return None

    ipc_collect = reset_peak_memory_stats = empty_cache

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> CpuIndex:
        return CpuIndex()

    @staticmethod
    def set_device(*_a: Any) -> None:
        return None

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_device_name(*_a: Any) -> str:
        return "CPU"  # flops_counter's name for it (MFU is then reported against no known peak)

    # The checkpoint's "device" RNG state (utils/checkpoint/checkpoint_manager.py): the CPU's.
    get_rng_state = staticmethod(torch.get_rng_state)
    set_rng_state = staticmethod(torch.set_rng_state)

    @staticmethod
    def set_per_process_memory_fraction(*_a: Any, **_k: Any) -> None:
        return None


DEVICE = _CpuDevice()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    device_name = "cpu"
    vendor_name = "nvidia"  # the vendor of the engine entry VERL_ENGINE_DEVICE picks
    device_module = DEVICE

    def is_available(self) -> bool:
        return True

    def current_device(self) -> CpuIndex:
        return CpuIndex()

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: object) -> None:
        return None

    def synchronize(self, device_index: object = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return (None, None)

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray schedules verl's workers on declared GPUs (verl counts only GPU/NPU resources) and
        # sets this; the tensors stay on CPU.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    profiler_stop = profiler_start

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None


# verl builds f"cpu:gloo,{device}:{backend}" = "cpu:gloo,cpu:gloo", which torch rejects (a device
# named twice): the same backend once.
import torch.distributed as _dist  # noqa: E402

_init_process_group = _dist.init_process_group


def _init_once_per_device(*args: Any, backend: object = None, **kwargs: Any) -> Any:
    if isinstance(backend, str) and "," in backend:
        backend = ",".join(dict.fromkeys(backend.split(",")))
    return _init_process_group(*args, backend=backend, **kwargs)


_dist.init_process_group = _init_once_per_device

# verl gives the FSDP2 reference model CPUOffloadPolicy(pin_memory=True); pinning needs an
# accelerator ("Cannot access accelerator device when none is available"). On a CPU-only host the
# pinned copy would be the same memory: return the tensor itself.
if not torch.accelerator.is_available():
    torch.Tensor.pin_memory = lambda self, *_a, **_k: self
