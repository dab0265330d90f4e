"""The infrastructures rlaunch launches on, one backend package each (backends/<name>/), found and
loaded by name by their registry (rlaunch.registry.backends), beside what they share: base (the
Backend interface, LaunchPlan, the run's handle).

A backend package declares, in its `__init__.py`, the INFRA= values it launches (INFRAS, a tuple of
rlaunch.registry.backends.Infra: what each can do, and how a run id becomes a cluster name there);
its `backend.py` holds BACKEND, the verbs (rlaunch.backends.base.Backend).

Adding an infrastructure: its package here and configs/infra/<name>.yaml. Nothing else.
"""
