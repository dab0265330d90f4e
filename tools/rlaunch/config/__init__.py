"""The experiment's inputs, loaded and checked as data: load (configs/ layers + overrides ->
the spec dict, the config checks), spec (the typed, frozen Spec), knobs (the env/flag knobs), dotted
(dotted-key helpers), pins (configs/versions.yaml), images (the image recipes and build args). It
may import only rlaunch.errors and the standard library/pydantic/yaml; pins and knobs must still run
on a bare python3, so this __init__ imports nothing.
"""
