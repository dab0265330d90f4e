"""The top-level command line (`python -m rlaunch`, fire): commands dispatches the verbs
to plan, backends and runs. Nothing imports cli.
"""
