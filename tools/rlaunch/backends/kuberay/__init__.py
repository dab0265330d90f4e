"""The KubeRay backend (RayJob/RayCluster on Kubernetes): backend (the verbs),
gke (GKE specifics), monitoring (PodMonitor), registry (can the cluster pull the image). Its modules
may import config, plan, job, verify and backends.base; no other backend and never runs or cli.
"""
