"""The SkyPilot backend (every cloud and SkyPilot's Kubernetes): backend (the
verbs), extras (SkyPilot's per-cloud pip extras). Its modules may import config, plan, job, verify
and backends.base; no other backend and never runs or cli.
INFRAS: the INFRA= values it launches (rlaunch.backends.Infra).
"""

from __future__ import annotations

from rlaunch.registry.backends import Infra

# INFRA=sky is any cloud SkyPilot may choose (INFRA_SPEC narrows it); the others are one cloud each.
INFRAS = tuple(Infra(name, order=order, cloud=cloud, spot=True, ssh=True) for order, (name, cloud) in enumerate(
    (("gcp", "gcp"), ("aws", "aws"), ("azure", "azure"), ("k8s", "kubernetes"), ("sky", "")), start=1))
