"""spec.json read as the Spec reads, where the Spec cannot be built: on the nodes.

The job's own steps (accel, preflight, postflight, the attempts record) run in the image's Python,
which has the standard library and Ray but not pydantic, so they cannot validate spec.json into a
rlaunch.config.spec.Spec. They read it through `view`: the same data (spec.json is Spec.dump()),
each mapping's keys also read as attributes (spec.cluster.nodes), so the functions they share with
the plan take one type, Spec, and read it one way. Only the Spec's methods (dump, json_text) are
not there. Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


class SpecJson(dict[str, Any]):
    """A spec.json mapping whose keys also read as attributes, nested mappings likewise. Attributes
    are read-only (no __dict__): a key is set as a key, spec["train"]["steps"] = 3."""

    __slots__ = ()

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__()
        for key, value in data.items():
            self[key] = value

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, SpecJson(value) if isinstance(value, dict) and not isinstance(value, SpecJson)
                            else value)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def view(data: dict[str, Any]) -> Spec:
    """spec.json's data (json.loads of it, or Spec.dump()) read as the Spec."""
    return cast("Spec", SpecJson(data))


def read(path: Path | str) -> Spec:
    """A spec.json file as `view`; OSError or ValueError as json.loads raises them."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON object, not {type(data).__name__}")
    return view(data)


__all__ = ["SpecJson", "read", "view"]
