"""The KubeRay backend (RayJob/RayCluster on Kubernetes): backend (the verbs),
gke (GKE specifics), monitoring (PodMonitor), registry (can the cluster pull the image). Its modules
may import config, plan, job, verify and backends.base; no other backend and never runs or cli.
INFRAS: the INFRA= values it launches (rlaunch.backends.Infra).
"""

from __future__ import annotations

from rlaunch.backends import Infra

# RayJob names are DNS-1035 labels: "r" before a leading digit, 47 characters at most (the operator
# derives longer names from it).
INFRAS = (Infra("kuberay", order=6, tensorboard=True, name_prefix="r", name_max=47),)
