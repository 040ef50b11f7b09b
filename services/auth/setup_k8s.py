"""First-run setup on Kubernetes (the auth-setup Job): services.auth.setup, with every issued
key written into a Kubernetes Secret instead of printed, so that no key reaches a pod log.

    python -m services.auth.setup_k8s --secret admin=silt-admin-credentials \\
        --secret graveler=silt-graveler-credentials ... [--credentials-dir DIR]

Each NAME=SECRET says who gets a key, `admin` (the admin user) or a service (its user is
svc-NAME, its rights are services/auth/setup.py's), and the Secret that receives it as the
keys access-key-id and secret-access-key. The Secrets must exist (the manifests declare them
empty); the pod's ServiceAccount needs only `patch` on exactly those. The keys are written
before setup is marked done, so a run that fails in between issues new keys next time; a run
after a completed one changes nothing, Secrets included. Prints where the keys went, never a key.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from services.auth.kube_secrets import DEFAULT_CREDENTIALS_DIR, KubeApi
from services.auth.setup import DEFAULT_ADMIN, IssuedKey, SetupResult, open_iam, setup
from silt.config import load_config
from silt.errors import FailedPrecondition, InvalidArgument
from silt.tool_main import run_tool

ADMIN = "admin"


def parse_targets(specs: list[str]) -> dict[str, str]:
    """NAME=SECRET pairs -> {name: secret}."""
    targets: dict[str, str] = {}
    for spec in specs:
        name, sep, secret = spec.partition("=")
        if not sep or not name or not secret:
            raise InvalidArgument(f"--secret {spec!r}: expected NAME=SECRET")
        if name in targets:
            raise InvalidArgument(f"--secret {name}: given twice")
        targets[name] = secret
    if ADMIN not in targets:
        raise InvalidArgument("--secret admin=SECRET is required: the admin's key must land somewhere")
    return targets


def issued_keys(result: SetupResult) -> dict[str, IssuedKey]:
    return {ADMIN: result.admin, **result.services}


def publish(api: KubeApi, targets: Mapping[str, str], result: SetupResult) -> None:
    """Every issued key into its Secret; a key with no Secret would be lost, so it fails."""
    keys = issued_keys(result)
    if set(keys) != set(targets):
        raise FailedPrecondition(f"setup issued keys for {sorted(keys)} but Secrets were named for {sorted(targets)}")
    for name, key in keys.items():
        api.patch_secret_data(
            targets[name], {"access-key-id": key.access_key_id, "secret-access-key": key.secret_access_key}
        )
        print(f"the key of user {key.user_id!r} is in Secret {targets[name]}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Set up Silt auth on first run and write the keys into Kubernetes Secrets (no-op afterwards)."
    )
    parser.add_argument("--config", help="YAML configuration file")
    parser.add_argument("--admin", default=DEFAULT_ADMIN, help="id of the admin user (default: admin)")
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME=SECRET",
        help="admin, or a service to create a user for, and the Secret its key goes to; repeatable",
    )
    parser.add_argument(
        "--credentials-dir",
        type=Path,
        default=DEFAULT_CREDENTIALS_DIR,
        help=f"the ServiceAccount's token, ca.crt and namespace (default {DEFAULT_CREDENTIALS_DIR})",
    )
    args = parser.parse_args(argv)

    def body() -> None:
        targets = parse_targets(args.secret)
        config = load_config(args.config)
        api = KubeApi.in_cluster(args.credentials_dir, os.environ)
        services = [name for name in targets if name != ADMIN]
        with open_iam(config) as model:
            result = setup(model, args.admin, services, lambda issued: publish(api, targets, issued))
            if result is None:
                print("Silt auth was set up already; no key was issued and the Secrets are unchanged.", flush=True)

    return run_tool("silt auth setup", body)


if __name__ == "__main__":
    sys.exit(main())
