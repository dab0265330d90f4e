"""Offline validators of rendered artifacts, one module per owning tool (kuberay: CRDs + Kubernetes)."""
