"""Golden cases of the local backend."""

CASES = [
    ("local-rehearsal", "rehearsal", {}),
    ("local-rehearsal-3nodes", "rehearsal", {"NODES": "3"}),
    # REHEARSE=1: a verl preset on the local CPU cluster (rlaunch.config.rehearse)
    ("local-verl-grpo-math-7b-rehearse", "verl-grpo-math-7b", {"REHEARSE": "1"}),
]
