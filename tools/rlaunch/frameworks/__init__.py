"""The frameworks rlaunch launches, one package each (frameworks/<name>/), found and loaded by name
by their registry (rlaunch.registry.frameworks), beside what they share: base (the adapter
interface) and accel (the framework/accelerator rules).

A package holds everything rlaunch knows about its framework: `__init__.py` the descriptor
(FRAMEWORK: its CPU rule, the modules its metrics need, its validator, its image), `adapter.py` the
adapter (entrypoint, rendered files, env, inputs on the shared storage, topology rules),
`postflight.py` where its run writes and the checks on it, and `loader.py` its own config loader
where it has one (run in its validator venv by rlaunch.validate.loaders).

Adding a framework: its package here, configs/framework/<name>.yaml, and its pins in
configs/versions.yaml (frameworks.<name>, images.<name>). Nothing else.
"""
