"""The local backend (network namespaces on this machine): backend (the verbs),
forward (port forwards into a namespace), jobs (the local job table). Its modules may import config,
plan, job, verify and backends.base; no other backend and never runs or cli.
INFRAS: the INFRA= values it launches (rlaunch.backends.Infra).
"""

from __future__ import annotations

from rlaunch.registry.backends import Infra

INFRAS = (Infra("local", order=0, resume=True),)
