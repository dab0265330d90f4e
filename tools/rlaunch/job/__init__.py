"""What runs on the cluster head inside the job: attempts (one record per attempt),
checkpoints (what a run saved), nodewatch (a lost node ends the attempt), data (dataset
preparation). It may import config and verify's file readers; never plan, backends, runs or cli.
"""
