"""rlaunch: one experiment config -> a checked, reproducible, verified RL post-training launch on Ray."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (or /opt/rlaunch in an image)
CONFIGS = ROOT / "configs"
TEMPLATES = ROOT / "templates"
SCRIPTS = ROOT / "scripts"
