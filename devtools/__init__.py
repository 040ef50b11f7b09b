"""Tools for developing Silt on one machine, no part of a service: `make k8s-up`'s podman
stand-in for a Kubernetes cluster (devtools/kube_podman)."""
