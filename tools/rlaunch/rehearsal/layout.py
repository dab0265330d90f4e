"""Where the rehearsal trainer writes, relative to its run directory: the one list of names that its
worker and driver write and the TRL framework reads back (frameworks/trl/postflight.py maps its
postflight keys onto them). The names live here, beside their writer, because rehearsal sits below
frameworks: the trainer could not import them from the framework package.

The checkpoint directory is HF Trainer's output_dir, whose layout job/checkpoints (below both) reads
to find what a restart resumes from; its name is taken from there.
"""

from __future__ import annotations

from rlaunch.job.checkpoints import TRL_DIR

METRICS = "metrics.jsonl"  # one JSON line per optimizer step, rank 0 only
TENSORBOARD = "tensorboard"
CHECKPOINTS = TRL_DIR  # checkpoint-N every save_freq steps, and final/
FINAL_CHECKPOINT = f"{CHECKPOINTS}/final"
INIT_CHECKPOINT = f"{CHECKPOINTS}/init"  # only with beta > 0: the KL reference
EVAL = "eval.json"
PLOT = "reward.png"
SUMMARY = "train_summary.json"
STEP1_CHECKPOINT = f"{CHECKPOINTS}/step-1"  # smoke: saved and reloaded at step 1
VALIDATION = "validation.json"  # smoke: the validation pass at step 1
RELOAD = "reload.json"  # smoke: what the reload at step 1 found
RAY_TRAIN = "ray-train"  # Ray Train's storage for this run; also where rank 0 leaves WORKERS
WORKERS = f"{RAY_TRAIN}/workers.json"  # rank 0 -> driver: Ray Train V2 drops metrics without a checkpoint
# What one attempt writes: a fresh start removes them all, a resumed one all but the two histories.
OUTPUTS = (METRICS, TENSORBOARD, FINAL_CHECKPOINT, INIT_CHECKPOINT, EVAL, PLOT, SUMMARY, WORKERS,
           STEP1_CHECKPOINT, VALIDATION, RELOAD)
