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
# CODE= travels in a ConfigMap (binaryData, a tar.gz the inputs Job extracts): Kubernetes caps one at
# 1 MiB, and the ConfigMap holds its name and labels too. A CODE=<url>@<commit> over that is fetched
# by the inputs Job itself from its repository (code_fetch; rlaunch.job.codefetch).
INFRAS = (Infra("kuberay", order=6, tensorboard=True, name_prefix="r", name_max=47, code_limit=900 * 1024,
                code_via="a Kubernetes ConfigMap (1 MiB at most)", code_fetch=True),)
