"""Golden cases of the local backend."""

CASES = [
    ("local-rehearsal", "rehearsal", {}),
    ("local-rehearsal-3nodes", "rehearsal", {"NODES": "3"}),
]
