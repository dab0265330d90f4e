"""What rlaunch launches and where: the frameworks' and the infrastructures' registries, at the
bottom of the floor plan so that everything above may ask them.

- frameworks: one Descriptor per package under frameworks/ (its CPU rule, the modules its steps
  import, its validator, its images), found on disk; the adapter loaded by name.
- backends: the INFRA= values each package under backends/ declares (Infra), found on disk; the
  backend loaded by name.

Standard library only: the knobs run on a bare python3, and the job's steps on the image's Python.
"""
