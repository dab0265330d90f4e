"""The machines a SkyPilot task would get, from SkyPilot's own catalog: which instance types satisfy
the task's resources (accelerator and count, CPU and memory floors, region), their host memory and
their hourly price. Plan's memory bound checks the host memory of these, never the request floor
(`memory: 128+` is a minimum, the instance SkyPilot picks has what its catalog says).

The catalog is SkyPilot's v8 CSV (`<cloud>/vms.csv`), read from RLAUNCH_SKY_CATALOG (a folder laid
out as ~/.sky/catalogs/v8: a full copy for offline use, or the committed extract under
tests/fixtures/skypilot-catalog/v8), else from SkyPilot's own catalog folder. It is never downloaded
here: without a catalog file the machine is unknown, and plan warns instead of checking. The
selection and prices are SkyPilot's own functions (sky.catalog.common ..._impl) over that file.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "RLAUNCH_SKY_CATALOG"
GIB = 2**30


@dataclass(frozen=True)
class Instance:
    cloud: str
    name: str
    vcpus: float
    memory_gib: float
    price: float | None       # on demand, per hour, one node (None: not in the catalog)
    spot_price: float | None

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)


def catalog_file(cloud: str) -> Path | None:
    override = os.environ.get(ENV, "")
    if override:
        path = Path(override) / cloud / "vms.csv"
        return path if path.is_file() else None
    from sky.catalog import common  # lazy: plan only

    path = Path(common.get_catalog_path(f"{cloud}/vms.csv"))
    return path if path.is_file() else None


@functools.lru_cache(maxsize=8)
def _frame(path: str) -> Any:
    import pandas as pd

    return pd.read_csv(path)


def _price(common: Any, df: Any, name: str, spot: bool, region: str | None) -> float | None:
    try:
        return float(common.get_hourly_cost_impl(df, name, spot, region, None))
    except (ValueError, AssertionError):
        return None


def _gcp_price(common: Any, df: Any, gpu_rows: Any, name: str, spot: bool, region: str | None) -> float | None:
    column = "SpotPrice" if spot else "Price"
    regions = [region] if region else sorted(set(df[df["InstanceType"] == name]["Region"]))
    best = None
    for r in regions:
        vm, gpus = _price(common, df, name, spot, r), gpu_rows[gpu_rows["Region"] == r][column].dropna()
        if vm is not None and not gpus.empty:
            best = min(best if best is not None else float("inf"), vm + float(gpus.min()))
    return best


def instances(cloud: str, accelerator: str, count: int, cpus: str | None, memory: str | None,
              region: str | None = None) -> list[Instance] | str:
    """Every instance type SkyPilot would consider for one node, cheapest on demand first; a reason
    string where the catalog cannot say."""
    path = catalog_file(cloud)
    if path is None:
        where = os.environ.get(ENV) or "SkyPilot's catalog folder (~/.sky/catalogs/v8)"
        return f"no SkyPilot catalog for {cloud} in {where} (set {ENV} to a copy of the catalog files)"
    from sky.catalog import common

    df = _frame(str(path))
    names: list[str] = []
    if cloud == "gcp":
        # GCP's GPU VMs with the GPUs built in (a2/a3/a4, g2): SkyPilot's own table says which.
        from sky.catalog import gcp_catalog

        table = getattr(gcp_catalog, "_ACC_INSTANCE_TYPE_DICTS", {})
        for name in table.get(accelerator, {}).get(count, []):
            rows = df[df["InstanceType"] == name]
            if not rows.empty and common.get_instance_type_for_cpus_mem_impl(rows, cpus, memory, region):
                names.append(name)
    else:
        found, _ = common.get_instance_type_for_accelerator_impl(df, accelerator, count, cpus, memory,
                                                                 False, region)
        names = list(found or [])
    if not names:
        return (f"no {cloud} instance type in {path} has {count} x {accelerator}"
                + (f", cpus {cpus}" if cpus else "") + (f", memory {memory}" if memory else "")
                + (f" in {region}" if region else ""))
    gpu_rows = df[df["InstanceType"].isna() & (df["AcceleratorName"] == accelerator) &
                  (df["AcceleratorCount"] == count)] if cloud == "gcp" else None
    out = []
    for name in names:
        vcpus, mem = common.get_vcpus_mem_from_instance_type_impl(df, name)
        if gpu_rows is None:
            price, spot = _price(common, df, name, False, region), _price(common, df, name, True, region)
        else:  # GCP prices the GPUs apart from the VM: a node is both, in one region
            price, spot = (_gcp_price(common, df, gpu_rows, name, s, region) for s in (False, True))
        out.append(Instance(cloud, name, float(vcpus or 0), float(mem or 0), price, spot))
    return sorted(out, key=lambda i: (i.price is None, i.price or 0))


# The separator between family and size in each cloud's instance names (n2-standard-4, m6i.large,
# Standard_D4s_v5): SkyPilot's default CPU families are matched as <family><separator>.
FAMILY_SEPARATOR = {"gcp": "-", "aws": "."}


def cpu_instance(cloud: str, cpus: str, memory: str, region: str | None = None) -> Instance | str:
    """The CPU-only instance SkyPilot would pick for a task with these floors and no accelerator:
    the cheapest of the cloud's default families (its catalog module's _DEFAULT_INSTANCE_FAMILY, as
    its get_default_instance_type filters them), with its hourly price; a reason string where the
    catalog cannot say."""
    if cloud not in FAMILY_SEPARATOR:
        return f"{cloud}'s CPU instance names are not read here (SkyPilot picks one at launch)"
    path = catalog_file(cloud)
    if path is None:
        where = os.environ.get(ENV) or "SkyPilot's catalog folder (~/.sky/catalogs/v8)"
        return f"no SkyPilot catalog for {cloud} in {where} (set {ENV} to a copy of the catalog files)"
    from sky.catalog import common

    families = getattr(importlib.import_module(f"sky.catalog.{cloud}_catalog"), "_DEFAULT_INSTANCE_FAMILY", [])
    df = _frame(str(path))
    df = df[df["InstanceType"].notna() & df["AcceleratorName"].isna()]
    df = df[df["InstanceType"].str.startswith(tuple(f"{f}{FAMILY_SEPARATOR[cloud]}" for f in families))]
    name = common.get_instance_type_for_cpus_mem_impl(df, cpus, memory, region) if not df.empty else None
    if not name:
        return (f"no {cloud} instance of SkyPilot's default CPU families ({', '.join(families)}) in {path} "
                f"has cpus {cpus}, memory {memory}" + (f" in {region}" if region else ""))
    vcpus, mem = common.get_vcpus_mem_from_instance_type_impl(df, name)
    return Instance(cloud, name, float(vcpus or 0), float(mem or 0), _price(common, df, name, False, region),
                    _price(common, df, name, True, region))
