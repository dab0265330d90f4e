"""Dotted keys ("a.b.c") into nested mappings: the one reader and writer of them, for the config
layers, spec.json, the framework files rlaunch renders and the reports. Standard library only (the
nodes' postflight uses it)."""

from __future__ import annotations

from typing import Any

MISSING: Any = object()


def get(tree: Any, key: str, default: Any = MISSING) -> Any:
    """The value at `key`; without a default, KeyError when a part is missing or holds a value."""
    node = tree
    for part in key.split("."):
        try:
            node = node[part]
        except (KeyError, TypeError, IndexError):
            if default is MISSING:
                raise KeyError(key) from None
            return default
    return node


def put(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set `key`, making the mappings above it; TypeError naming the part that holds a value."""
    node = tree
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise TypeError(f"'{part}' holds a value, not a mapping")
    node[leaf] = value


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{dotted key: value} of every leaf (a mapping is not a leaf; a list is)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat(value, dotted + "."))
        else:
            out[dotted] = value
    return out
