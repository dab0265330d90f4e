"""The one place an image's name is made, from configs/versions.yaml, as pure functions:

- rlaunch_ref / ref: the official image is pinned as images.<framework>.official; the rlaunch image
  (docker/<framework> built on it) is derived: <rlaunch_registry>/rlaunch-<framework>:<frameworks.<framework>.version>.
- platform: --platform for a base of another architecture.

Building an image from them (build args, the stand-in, pip settings, the Dockerfile checks, and the
CLI scripts/image calls) is rlaunch.plan.imagebuild's.
"""

from __future__ import annotations

from typing import Any

from rlaunch.config import pins
from rlaunch.config.pins import PinError

IMAGE_KINDS = ("official", "rlaunch")


def rlaunch_ref(framework: str, versions: dict[str, Any] | None = None, registry: str = "", tag: str = "") -> str:
    """The rlaunch image of `framework`: <rlaunch_registry>/rlaunch-<framework>:<its version pin>.
    A non-empty `registry` (registry and namespace, e.g. ghcr.io/acme) or `tag` replaces that part."""
    versions = pins.load_versions() if versions is None else versions
    if framework not in (pins.get("images", versions) or {}):
        raise PinError(f"no images.{framework} in versions.yaml; allowed: {', '.join(pins.get('images', versions))}")
    registry = (registry or pins.get_str("rlaunch_registry", versions)).rstrip("/")
    tag = tag or pins.get_str(f"frameworks.{framework}.version", versions)
    return f"{registry}/rlaunch-{framework}:{tag}"


def ref(framework: str, kind: str, versions: dict[str, Any] | None = None, accelerator: str = "",
        registry: str = "") -> str:
    """The image a launch runs for framework.image=`kind`: the pinned official one or rlaunch's.
    An accelerator with its own image (images.<framework>.by_accelerator.<GPU>, e.g. GB200's arm64
    one) selects it; rlaunch's image built on it is tagged <version>-<arch>. A `registry`
    (REGISTRY=, where `make image-push` put it) replaces the pinned one in rlaunch's image."""
    versions = pins.load_versions() if versions is None else versions
    if kind not in IMAGE_KINDS:
        raise PinError(f"image kind '{kind}' is not one of {', '.join(IMAGE_KINDS)}")
    own = ((pins.get(f"images.{framework}", versions) or {}).get("by_accelerator") or {}).get(accelerator) \
        if accelerator else None
    if kind == "rlaunch":
        if own:
            arch = str((own.get("facts") or {}).get("arch", "amd64"))
            return rlaunch_ref(framework, versions, registry,
                               tag=f"{pins.get_str(f'frameworks.{framework}.version', versions)}-{arch}")
        return rlaunch_ref(framework, versions, registry)
    if own:
        return pins.get_str(f"images.{framework}.by_accelerator.{accelerator}.official", versions)
    return pins.get_str(f"images.{framework}.official", versions)


def platform(framework: str, versions: dict[str, Any] | None = None, accelerator: str = "") -> str:
    """--platform for a base of another architecture than amd64 (linux/arm64 for GB200's), else ""."""
    versions = pins.load_versions() if versions is None else versions
    entry = pins.get(f"images.{framework}", versions) or {}
    own = (entry.get("by_accelerator") or {}).get(accelerator) or entry
    arch = str((own.get("facts") or {}).get("arch") or "amd64")
    return "" if arch == "amd64" else f"linux/{arch}"


# ---------------------------------------------------------------- pip settings for RUN steps


# ---------------------------------------------------------------- freshness: Dockerfiles vs the pins


# ---------------------------------------------------------------- CLI
