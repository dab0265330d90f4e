"""What runs on the cluster head inside the job, and the records it leaves in the run directory:
attempts (one record per attempt), checkpoints (what a run saved), nodewatch (a lost node ends the
attempt), data (dataset preparation), phases (where the seconds went), layouts (where a run's outputs
are) and files (the readers of them that verify/, the frameworks and the operator tools share). It may
import config and the registries; never plan, verify, backends, runs or cli.
"""
