"""The experiment's inputs, loaded and checked as data: load (configs/ layers + overrides ->
the spec dict, the config checks), spec (the typed, frozen Spec), knobs (the env/flag knobs), dotted
(dotted-key helpers), pins (configs/versions.yaml), images (the image recipes and build args),
overrides (the framework's own keys applied to rlaunch's), modelfacts (the model's config.json facts),
hub (a Hub id resolved to a commit). It may import only rlaunch.errors and the standard library/pydantic/yaml; pins and knobs must still run
on a bare python3, so this __init__ imports nothing.
"""
