"""CPU rehearsal: a tiny GRPO run (TRL inside Ray Train) that proves the launch machinery works.

Modules: `tiny` (tokenizer, model, task, reward; all built offline at run time), `train` (the Ray
job driver, `python -m rlaunch.rehearsal.train`), `settings` (its config keys and their checks),
`worker` (what each Ray Train worker runs), `layout` (the names it writes in the run directory, which
the TRL framework's postflight reads), `evaluate` (greedy scoring of a checkpoint), `plot` (reward per
step as a PNG).

It sits below frameworks/ (the TRL adapter and postflight, and verl's CPU programs, import it) and
imports only job/, verify/ and the layers below them; torch, transformers, trl, datasets and ray are
imported inside the functions that use them.
"""
