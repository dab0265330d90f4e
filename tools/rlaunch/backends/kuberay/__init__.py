"""The KubeRay backend (RayJob/RayCluster on Kubernetes): backend (the verbs: rules, render, check, plan,
launch, status, logs, down, dashboard, runs), names (the run's object names and labels), manifests (the
templates' context, the rendered manifests, the ConfigMap and Secret built at launch), kubectl (the client,
its JSON readers, the waits), gke (GKE specifics), monitoring (PodMonitor), registry (can the cluster pull
the image). Its modules may import config, plan, job, verify and backends.base; no other backend and
never runs or cli.
INFRAS: the INFRA= values it launches (rlaunch.backends.Infra).
"""

from __future__ import annotations

from rlaunch.registry.backends import Infra

# RayJob names are DNS-1035 labels: "r" before a leading digit, 47 characters at most (the operator
# derives longer names from it).
INFRAS = (Infra("kuberay", order=6, tensorboard=True, name_prefix="r", name_max=47),)
