"""The AIStudio backend (a managed-job form): backend (the verbs). Its modules
may import config, plan, job, verify and backends.base; no other backend and never runs or cli.
INFRAS: the INFRA= values it launches (rlaunch.backends.Infra).
"""

from __future__ import annotations

from rlaunch.registry.backends import Infra

INFRAS = (Infra("aistudio", order=7),)
