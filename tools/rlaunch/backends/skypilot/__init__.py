"""The SkyPilot backend (every cloud and SkyPilot's Kubernetes): backend (the
verbs), extras (SkyPilot's per-cloud pip extras). Its modules may import config, plan, job, verify
and backends.base; no other backend and never runs or cli.
"""
