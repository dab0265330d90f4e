"""The top-level command line (`python -m rlaunch`, fire): commands dispatches the verbs
to plan, backends and runs; importer (`make import`: a user's run script into a config). Nothing
imports cli.
"""
