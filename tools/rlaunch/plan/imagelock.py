"""The image check's lock: every pinned preset's resolution, on every infrastructure it renders
for, on its pinned image and on each image images.<framework>.known names (IMAGE=), committed in
configs/locks/imagecheck/ (`python -m rlaunch.plan.imagelock lock`), and the
recorded offline index the tests resolve from (`record`). It loads configs, so it lives beside the
check (plan/imagecheck.py), which a config load uses, instead of inside it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.config import load as config
from rlaunch.config import pins
from rlaunch.config.knobs import INFRAS
from rlaunch.errors import ConfigError
from rlaunch.plan import imagecheck
from rlaunch.plan.pipindex import MetadataIndex


def pinned_inputs() -> dict[str, dict[str, Any]]:
    """The resolution inputs of every preset on every infrastructure it renders for, on its pinned
    image and on every known one of its framework (IMAGE=<ref>): key -> inputs."""
    versions = pins.load_versions()
    out = {}
    for preset in config.available("presets"):
        for infra in INFRAS:
            if infra == "local":
                continue
            knobs = {"INFRA": infra, "RUN_ID": "imagecheck-lock"}
            try:
                spec = config.load(preset, knobs)
            except ConfigError:
                continue
            specs = [spec]
            for ref in (pins.get(f"images.{spec.framework.name}", versions) or {}).get("known") or {}:
                try:
                    specs.append(config.load(preset, {**knobs, "IMAGE": ref}))
                except ConfigError:
                    continue
            for spec in specs:
                _, facts, _ = imagecheck.image_of(spec, versions)
                if not facts or imagecheck.framework_problem(spec, facts, versions):
                    continue
                inputs = imagecheck.resolution_inputs(spec, facts, versions)
                if imagecheck._installs_something(inputs):
                    out[imagecheck._key(inputs)] = inputs
    return out


def lock(index: MetadataIndex | None = None) -> list[str]:
    """Resolve every pinned preset's inputs and write them to imagecheck.LOCK_DIR (stale ones removed)."""
    wanted = pinned_inputs()
    imagecheck.LOCK_DIR.mkdir(parents=True, exist_ok=True)
    lines = []
    for key, inputs in sorted(wanted.items()):
        result = {k: v for k, v in imagecheck.resolve(inputs, index).items() if k != "cached"}
        if result["status"] == "unreachable":
            raise SystemExit(f"imagecheck lock: {' '.join(inputs['requirements'])}: {result['why']}")
        result["inputs"] = inputs
        (imagecheck.LOCK_DIR / f"{key}.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        lines.append(f"{key} {result['status']}: {' '.join(inputs['requirements'])}")
    for stale in imagecheck.LOCK_DIR.glob("*.json"):
        if stale.stem not in wanted:
            stale.unlink()
    return lines


USAGE = """\
  python -m rlaunch.plan.imagelock lock              resolve every pinned preset's image check into
                                                     configs/locks/imagecheck/ (needs the index once)
  python -m rlaunch.plan.imagelock record DIR [KEY...]  resolve them again (those KEYs only) and
                                                     LEGACY_VERL, then write the metadata pip read,
                                                     trimmed, to DIR (the tests' offline index)"""


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.plan.imagelock", __doc__.split("\n\n", 1)[0], epilog=USAGE)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    verbs.add_parser("lock")
    verb = verbs.add_parser("record")
    verb.add_argument("dir", type=Path)
    verb.add_argument("keys", nargs="*", metavar="KEY")
    args = parser.parse_args(argv)
    if args.verb == "lock":
        print("\n".join(lock()))
        return 0
    with imagecheck._index() as index:
        for key, inputs in sorted(pinned_inputs().items()):
            if not args.keys or key in args.keys:
                imagecheck.resolve(inputs, index, fresh=True)
        for inputs in RECORDED_EXTRA:
            imagecheck.resolve(inputs, index, fresh=True)
        index.record(args.dir)
    return 0


# Resolutions the tests run from the recorded index besides the pinned ones: verl 0.9.1 with vLLM
# on verl's legacy base image (torch 2.7, no vLLM), the pair this check was written for.
LEGACY_VERL = {"python": "3.10", "arch": "amd64", "held": ["torch==2.7.0", "flash-attn==2.7.4.post1"],
               "requirements": ["torch==2.7.0", "flash-attn==2.7.4.post1", "verl[verl-core,vllm]==0.9.1"],
               "pip": "26.3"}
RECORDED_EXTRA = [LEGACY_VERL]


if __name__ == "__main__":
    sys.exit(main())
