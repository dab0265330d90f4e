"""Operator tools over runs that exist: lookup (a run id or directory -> its spec and run
directory), listing (every run the infrastructures know), board (TensorBoard), compare. It may import
everything below it (config, plan, backends, job, verify); never cli.
"""
