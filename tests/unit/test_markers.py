"""rlaunch.verify.markers: seed 003's log markers from the run directory's reports."""

from __future__ import annotations

import json

from rlaunch.verify import markers


def node(ip: str, head: bool, gpus: int = 2, driver: str = "550.54.15") -> dict:
    return {"node_ip": ip, "is_head": head, "hostname": f"h{ip[-1]}",
            "gpu": {"count": gpus, "models": ["NVIDIA A100-SXM4-80GB"] if gpus else [],
                    "drivers": [driver] if gpus else []}}


def test_markers_number_the_head_first_and_end_with_the_exit_code(tmp_path):
    (tmp_path / "preflight.json").write_text(json.dumps(
        {"passed": True, "nodes": [node("10.0.0.9", False), node("10.0.0.2", True)]}))
    (tmp_path / "verification.json").write_text(json.dumps({"passed": False}))
    assert markers.lines(tmp_path, 1) == [
        "WORKER_TOPOLOGY=rank=0 role=Ray Head host=h2 gpu_count=2 gpu=NVIDIA A100-SXM4-80GB",
        "NVIDIA_DRIVER_VERSION_NODE_0=550.54.15",
        "WORKER_TOPOLOGY=rank=1 role=Ray Worker host=h9 gpu_count=2 gpu=NVIDIA A100-SXM4-80GB",
        "NVIDIA_DRIVER_VERSION_NODE_1=550.54.15",
        "RLINF_PREFLIGHT_STATUS=passed",
        "RLINF_VERIFICATION_STATUS=failed",
        "STARTUP_EXIT_CODE=1",
    ]


def test_a_stage_never_reached_prints_no_status(tmp_path):
    (tmp_path / "preflight.json").write_text(json.dumps({"passed": False, "nodes": [node("10.0.0.2", True, 0)]}))
    out = markers.lines(tmp_path, 4)
    assert "NVIDIA_DRIVER_VERSION_NODE_0=none" in out and "RLINF_PREFLIGHT_STATUS=failed" in out
    assert not any(line.startswith("RLINF_VERIFICATION_STATUS") for line in out)
    assert markers.lines(tmp_path / "absent", 3) == ["STARTUP_EXIT_CODE=3"]
