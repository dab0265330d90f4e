"""The AIStudio backend (a managed-job form): backend (the verbs). Its modules
may import config, plan, job, verify and backends.base; no other backend and never runs or cli.
"""
