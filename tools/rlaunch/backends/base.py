"""The backend interface: one per infrastructure, the same small verbs for all."""

from __future__ import annotations

from pathlib import Path


class Backend:
    """Render is pure and offline; launch/status/logs/down/dashboard act and return an exit code."""

    name = ""

    def render(self, spec: dict) -> dict[str, str]:
        """Every artifact of a launch: relative path -> text (headers added by the caller)."""
        raise NotImplementedError

    def check(self, spec: dict, artifacts: dict[str, str]) -> list[str]:
        """Offline validation by the owning tool's parser; raise CheckError. Returns lines passed."""
        return []

    def plan(self, spec: dict, artifacts: dict[str, str]) -> list[str]:
        """Human lines: what `launch` would run, in order."""
        return []

    def launch(self, spec: dict, out: Path) -> int:
        raise NotImplementedError

    def status(self, spec: dict, out: Path) -> int:
        raise NotImplementedError

    def logs(self, spec: dict, out: Path) -> int:
        raise NotImplementedError

    def down(self, spec: dict, out: Path) -> int:
        raise NotImplementedError

    def dashboard(self, spec: dict, out: Path) -> int:
        print(f"{self.name}: no dashboard command for this infrastructure")
        return 0
