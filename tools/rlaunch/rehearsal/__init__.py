"""CPU rehearsal: a tiny GRPO run (TRL inside Ray Train) that proves the launch machinery works.

Modules: `tiny` (tokenizer, model, task, reward; all built offline at run time), `train` (the Ray
job driver), `evaluate` (greedy scoring of a checkpoint), `plot` (reward per step as a PNG).
"""
