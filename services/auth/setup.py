"""First-run setup: preset policies and groups, the admin user and service users, their keys.

Writes straight to KV (there is nobody to authenticate yet). Once it has completed it
leaves `iam/setup` behind, and every later run changes nothing. An interrupted run is
simply run again: each step is idempotent, and users whose keys were issued by the
interrupted run (and possibly never shown) get new ones.

    python -m services.auth.setup [--config FILE] [--admin admin] [--service graveler ...] [--json]

prints the new secrets once, on stdout: they are stored only encrypted and never logged.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.auth.model import IamModel
from services.auth.policies import statement
from services.auth.secrets import SecretBox
from silt import actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.config import load_config
from silt.errors import AlreadyExists, SiltError
from silt.kv import open_store

log = logging.getLogger(__name__)

ADMINS = "Admins"
DEVELOPERS = "Developers"
ANALYSTS = "Analysts"
SERVICES = "Services"

# The preset roles as groups, each with one policy of the same spirit (docs/design/auth.md).
PRESET_POLICIES: dict[str, tuple[str, list[pb.Statement]]] = {
    "FullAccess": ("everything, IAM included", [statement(pb.EFFECT_ALLOW, ["*"])]),
    "RepoReadWriteAll": (
        "read and write every repository",
        [statement(pb.EFFECT_ALLOW, [a.READ_REPO, a.WRITE_REPO])],
    ),
    "RepoReadAll": ("read every repository", [statement(pb.EFFECT_ALLOW, [a.READ_REPO])]),
    "ServiceAccess": (
        "what Silt's own services need: verify callers, and read and write repositories",
        [statement(pb.EFFECT_ALLOW, [a.AUTHORIZE, a.READ_SECRET, a.READ_REPO, a.WRITE_REPO])],
    ),
}
# The S3 gateway creates and deletes repositories for S3 callers (CreateBucket, DeleteBucket)
# after auth has allowed that caller CreateRepo/DeleteRepo: its own user needs them too.
GATEWAY_POLICY = "GatewayRepoLifecycle"
GATEWAY_POLICY_SPEC = (
    "the S3 gateway: create and delete repositories on behalf of callers auth has authorized",
    [statement(pb.EFFECT_ALLOW, [a.CREATE_REPO, a.DELETE_REPO])],
)
PRESET_GROUPS: dict[str, tuple[str, str]] = {
    ADMINS: ("administrators: everything", "FullAccess"),
    DEVELOPERS: ("ReadRepo and WriteRepo on all repositories", "RepoReadWriteAll"),
    ANALYSTS: ("ReadRepo on all repositories", "RepoReadAll"),
    SERVICES: ("Silt's own services", "ServiceAccess"),
}
DEFAULT_ADMIN = "admin"
DEFAULT_SERVICES = ("graveler", "compactor", "gateway")


def service_user_id(service: str) -> str:
    return f"svc-{service}"


@dataclass(frozen=True)
class IssuedKey:
    user_id: str
    access_key_id: str
    secret_access_key: str = field(repr=False)


@dataclass(frozen=True)
class SetupResult:
    admin: IssuedKey
    services: dict[str, IssuedKey]


def _ensure(create: Callable[[], object]) -> bool:
    """Run a create step; False if its entity exists already."""
    try:
        create()
    except AlreadyExists:
        return False
    return True


def _fresh_key(model: IamModel, user_id: str, group_id: str, description: str) -> IssuedKey:
    _ensure(lambda: model.create_user(user_id, description))
    model.add_member(group_id, user_id)
    old, _ = model.list_credentials(user_id, amount=1000)
    for credential in old:  # issued by an interrupted run: never confirmed shown
        model.delete_credentials(user_id, credential.access_key_id)
    issued = model.create_credentials(user_id)
    return IssuedKey(user_id, issued.credential.access_key_id, issued.secret.get_secret_value())


def setup(
    model: IamModel,
    admin_user_id: str = DEFAULT_ADMIN,
    services: Sequence[str] = DEFAULT_SERVICES,
    announce: Callable[[SetupResult], None] = lambda _: None,
) -> SetupResult | None:
    """Set auth up unless done already (then return None, having changed nothing).

    `announce` receives the new keys before setup is marked complete, so that a crash
    can never leave keys that were issued but never shown.
    """
    if model.setup_record() is not None:
        return None
    for policy_id, (description, statements) in PRESET_POLICIES.items():
        _ensure(functools.partial(model.create_policy, policy_id, statements, description))
    for group_id, (description, policy_id) in PRESET_GROUPS.items():
        _ensure(functools.partial(model.create_group, group_id, description))
        model.attach_policy(policy_id, group_id=group_id)
    admin = _fresh_key(model, admin_user_id, ADMINS, "administrator created by setup")
    issued = {
        service: _fresh_key(model, service_user_id(service), SERVICES, f"the {service} service") for service in services
    }
    if "gateway" in issued:
        description, statements = GATEWAY_POLICY_SPEC
        _ensure(lambda: model.create_policy(GATEWAY_POLICY, statements, description))
        model.attach_policy(GATEWAY_POLICY, user_id=service_user_id("gateway"))
    result = SetupResult(admin, issued)
    announce(result)
    model.mark_setup_done(admin_user_id)
    log.info("auth set up: admin user %r, service users %s", admin_user_id, sorted(issued))
    return result


def _print_text(result: SetupResult) -> None:
    print("Silt auth is set up. These secrets are shown only this once; store them now.")
    print(f"\nadmin user {result.admin.user_id!r}:")
    print(f"  access_key_id:     {result.admin.access_key_id}")
    print(f"  secret_access_key: {result.admin.secret_access_key}")
    for service, key in result.services.items():
        print(f"\n{service} (user {key.user_id!r}), in that service's environment:")
        print(f"  SILT_CREDENTIALS_ACCESS_KEY_ID={key.access_key_id}")
        print(f"  SILT_CREDENTIALS_SECRET_ACCESS_KEY={key.secret_access_key}")
    sys.stdout.flush()


def _print_json(result: SetupResult) -> None:
    def key(k: IssuedKey) -> dict[str, str]:
        return {"user_id": k.user_id, "access_key_id": k.access_key_id, "secret_access_key": k.secret_access_key}

    print(json.dumps({"admin": key(result.admin), "services": {s: key(k) for s, k in result.services.items()}}))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Set up Silt auth on first run (no-op afterwards).")
    parser.add_argument("--config", help="YAML configuration file")
    parser.add_argument("--admin", default=DEFAULT_ADMIN, help="id of the admin user (default: admin)")
    parser.add_argument(
        "--service",
        action="append",
        dest="services",
        help=f"a service to create a user and key for; repeatable (default: {', '.join(DEFAULT_SERVICES)})",
    )
    parser.add_argument("--json", action="store_true", help="print the keys as one JSON object")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        logging.basicConfig(level=getattr(logging, config.logging.level.replace("WARN", "WARNING"), logging.INFO))
        with open_store(config.database) as store:
            model = IamModel(store, SecretBox(config.auth.encrypt_secret_key))
            services = DEFAULT_SERVICES if args.services is None else args.services
            result = setup(model, args.admin, services, _print_json if args.json else _print_text)
            if result is None:
                record = model.setup_record()
                admin = record.admin_user_id if record else "?"
                print(f"Silt auth was set up already (admin user {admin!r}); nothing changed.", file=sys.stderr)
    except SiltError as exc:
        print(f"silt auth setup: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
