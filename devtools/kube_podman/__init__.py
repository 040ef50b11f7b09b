"""The Kubernetes manifests (deploy/k8s, rendered) run in containers on one machine with
`podman kube play`: `make k8s-up` / `make k8s-down` (docs/operations.md)."""
