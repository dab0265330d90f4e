"""What a launch will be, derived from the spec and nothing outside it: render (Jinja2,
pure), artifacts (the files a launch writes), memory (GPU memory bounds), inputs (where the model
and data live), catalog (SkyPilot's catalog: instance types, host memory, prices), imagecheck
(with imagelock, its lock tool) and pipindex (will the image install what the job needs), tracking (one
tracker run per rlaunch run). It may import config and the frameworks' facts; never backends, job,
verify, runs or cli.
"""
