"""Golden cases of the AIStudio (managed Ray) backend: the seed-003 preset, and the rehearsal (no
checkout, no pinned inputs) for the run script's other branch."""

CASES = [
    ("aistudio-rlinf-grpo-pipeline-1.5b", "rlinf-grpo-pipeline-1.5b", {"INFRA": "aistudio"}),
    ("aistudio-rehearsal", "rehearsal", {"INFRA": "aistudio"}),
]
