"""First-run setup: preset policies and groups, the admin user and service users, their keys.

Writes straight to KV (there is nobody to authenticate yet). Once it has completed it
leaves `iam/setup` behind, and every later run issues no key: it only brings Silt's own
policies, the preset groups and the service users up to this version's definitions (so an
upgrade reaches installations set up before it). An interrupted run is simply run again:
each step is idempotent, and users whose keys were issued by the interrupted run (and
possibly never shown) get new ones.

    python -m services.auth.setup [--config FILE] [--admin admin] [--service graveler ...] [--json]

prints the new secrets once, on stdout: they are stored only encrypted and never logged.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from services.auth.model import IamModel
from services.auth.policies import statement
from services.auth.secrets import SecretBox
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.config import Config, load_config
from silt.errors import AlreadyExists
from silt.kv import open_store
from silt.tool_main import run_tool

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
        [statement(pb.EFFECT_ALLOW, [a.AUTHORIZE, a.READ_REPO, a.WRITE_REPO])],
    ),
}
# The S3 gateway creates and deletes repositories for S3 callers (CreateBucket, DeleteBucket)
# after auth has allowed that caller CreateRepo/DeleteRepo: its own user needs them too.
GATEWAY_POLICY = "GatewayRepoLifecycle"
GATEWAY_POLICY_SPEC = (
    "the S3 gateway and the REST API: create and delete repositories on behalf of callers auth has authorized",
    [statement(pb.EFFECT_ALLOW, [a.CREATE_REPO, a.DELETE_REPO])],
)
# The REST API authenticates its callers itself and then names them to graveler as the authors
# of pull requests, reviews and comments and the committers of merges, and to auth as the user
# its IAM calls are made for (services/auth/acting.py). Only its own user may name another user
# (literally, so no admin's `*` can submit approvals or make IAM calls under many names).
API_ACTOR_POLICY = "ApiActsForUsers"
API_ACTOR_POLICY_SPEC = (
    "the REST API: name the user it authenticated as the author of pull requests, reviews and comments, "
    "and as the caller of the IAM calls it makes for that user",
    [statement(pb.EFFECT_ALLOW, [a.ACT_FOR_USER], [a.user_resource("*")])],
)
# Repository settings through the REST API (GC rules, branch protection), hooks' outputs, refs
# dumps and restores and lakeFS's GC preparation calls: it asks auth whether its caller may, then
# calls graveler as itself, which must hold them too. (A bare repository on another's namespace,
# where a dump is restored, also needs the user's own RestoreRefs there: graveler asks for the
# user the API names.)
API_SETTINGS_POLICY = "ApiRepoSettings"
API_SETTINGS_POLICY_SPEC = (
    "the REST API: change GC rules and branch protection, read hooks' outputs, dump and restore refs and prepare"
    " GC runs, on behalf of callers auth has authorized",
    [
        statement(
            pb.EFFECT_ALLOW,
            [
                a.SET_GC_RULES,
                a.DELETE_GC_RULES,
                a.SET_BRANCH_PROTECTION,
                a.READ_ACTION_OUTPUT,
                a.DUMP_REFS,
                a.RESTORE_REFS,
                a.PREPARE_GC,
            ],
        )
    ],
)
# History events: the gateway and the REST API record the reads, writes and deletes they served,
# naming their callers; nobody else may (a literal-only action, silt/iam_actions.py).
EVENT_RECORDER_POLICY = "HistoryEventRecorder"
EVENT_RECORDER_POLICY_SPEC = (
    "the S3 gateway and the REST API: record history events of the requests they served",
    [statement(pb.EFFECT_ALLOW, [a.RECORD_EVENTS], ["*"])],
)
# Garbage collection (`silt gc run`, the GC CronJob) runs as its own user, not an admin: it
# reads repositories (GetRepository; PrepareGC reads the retention rules itself) and exports a
# run. Its sweep deletes through the object store's own credentials, never through Silt.
GC_SERVICE = "gc"
GC_POLICY = "GarbageCollection"
GC_POLICY_SPEC = (
    "garbage-collection runs: read repositories and export what a run marks (PrepareGC)",
    [statement(pb.EFFECT_ALLOW, [a.READ_REPO, a.PREPARE_GC])],
)
# Verifying signatures addressed to an audience (auth:VerifySignature on `audiences/<name>`)
# hands out keys that act as any signer toward it: each service verifies for itself only, so
# a compromised gateway cannot forge calls to graveler, nor graveler to auth. (auth verifies
# calls to itself from KV.)
VERIFIER_POLICIES: dict[str, tuple[str, tuple[str, list[pb.Statement]]]] = {
    service: (
        policy_id,
        (
            f"the {service} service: verify signatures addressed to {audience!r}",
            [statement(pb.EFFECT_ALLOW, [a.VERIFY_SIGNATURE], [a.audience_resource(audience)])],
        ),
    )
    for service, policy_id, audience in (
        ("graveler", "GravelerCallVerifier", "graveler"),
        ("compactor", "CompactorCallVerifier", "compactor"),
        ("gateway", "S3SignatureVerifier", a.S3_AUDIENCE),
        ("api", "ApiCredentialVerifier", a.API_AUDIENCE),
    )
}
# Every policy Silt defines. Setup rewrites them to these definitions on every run, so an
# upgrade that changes what a preset holds reaches installations set up before it; make
# policies of your own to hold anything else.
SILT_POLICIES: dict[str, tuple[str, list[pb.Statement]]] = {
    **PRESET_POLICIES,
    GATEWAY_POLICY: GATEWAY_POLICY_SPEC,
    GC_POLICY: GC_POLICY_SPEC,
    API_ACTOR_POLICY: API_ACTOR_POLICY_SPEC,
    API_SETTINGS_POLICY: API_SETTINGS_POLICY_SPEC,
    EVENT_RECORDER_POLICY: EVENT_RECORDER_POLICY_SPEC,
    **dict(VERIFIER_POLICIES.values()),
}
PRESET_GROUPS: dict[str, tuple[str, str]] = {
    ADMINS: ("administrators: everything", "FullAccess"),
    DEVELOPERS: ("ReadRepo and WriteRepo on all repositories", "RepoReadWriteAll"),
    ANALYSTS: ("ReadRepo on all repositories", "RepoReadAll"),
    SERVICES: ("Silt's own services", "ServiceAccess"),
}
DEFAULT_ADMIN = "admin"
DEFAULT_SERVICES = ("graveler", "compactor", "gateway", "api", GC_SERVICE)


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


@dataclass(frozen=True)
class ServicesSetupResult:
    """A setup that left the admin to the REST API (setup_without_admin)."""

    services: dict[str, IssuedKey]


def _ensure(create: Callable[[], object]) -> bool:
    """Run a create step; False if its entity exists already."""
    try:
        create()
    except AlreadyExists:
        return False
    return True


def service_rights(service: str) -> tuple[list[str], list[str]]:
    """The groups a service's user is in and the policies attached to it directly."""
    verifier = [VERIFIER_POLICIES[service][0]] if service in VERIFIER_POLICIES else []
    if service == GC_SERVICE:
        return [], [GC_POLICY]
    if service == "api":
        # The REST API creates and deletes repositories for its callers as the gateway does.
        return [SERVICES], [GATEWAY_POLICY, API_ACTOR_POLICY, API_SETTINGS_POLICY, EVENT_RECORDER_POLICY, *verifier]
    if service == "gateway":
        return [SERVICES], [GATEWAY_POLICY, EVENT_RECORDER_POLICY, *verifier]
    return [SERVICES], verifier


def bound_by_setup(policy_id: str, user_id: str = "", group_id: str = "") -> bool:
    """Whether every setup run attaches policy_id to this group (a preset group's own policy)
    or to this user (a service user's rights): a detach of it would not last."""
    if group_id:
        return group_id in PRESET_GROUPS and PRESET_GROUPS[group_id][1] == policy_id
    return any(user_id == service_user_id(s) and policy_id in service_rights(s)[1] for s in DEFAULT_SERVICES)


def member_by_setup(group_id: str, user_id: str) -> bool:
    """Whether every setup run puts user_id in group_id (a service user in its group)."""
    return any(user_id == service_user_id(s) and group_id in service_rights(s)[0] for s in DEFAULT_SERVICES)


def _sync_presets(model: IamModel, services: Sequence[str]) -> None:
    """Silt's policies as this version defines them, the preset groups with their policy, and
    each named service's user with its rights. Creates what is missing and rewrites Silt's own
    policies where they differ; deletes nothing and issues no key."""
    for policy_id, (description, statements) in SILT_POLICIES.items():
        if model.put_preset_policy(policy_id, statements, description):
            log.info("preset policy %r written", policy_id)
    for group_id, (description, policy_id) in PRESET_GROUPS.items():
        _ensure(functools.partial(model.create_group, group_id, description))
        model.attach_policy(policy_id, group_id=group_id)
    for service in services:
        user_id = service_user_id(service)
        if _ensure(functools.partial(model.create_user, user_id, f"the {service} service")):
            log.info("service user %r created", user_id)
        groups, policies = service_rights(service)
        for group_id in groups:
            model.add_member(group_id, user_id)
        for policy_id in policies:
            model.attach_policy(policy_id, user_id=user_id)


def keyless_service_users(model: IamModel, services: Sequence[str]) -> list[str]:
    """Service users without an access key: created by a setup run after the first one (an
    upgrade), they wait for an administrator to issue their key."""
    return [service_user_id(s) for s in services if not model.list_credentials(service_user_id(s), amount=1)[0]]


def _fresh_key(model: IamModel, user_id: str) -> IssuedKey:
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
    """Set auth up, issuing keys, unless done already (then return None, having issued none).

    Every run, the first or a later one, brings Silt's own policies, the preset groups and
    the named services' users (with their rights) up to this version's definitions: an
    installation set up by an older version gains what was added since (e.g. the gc
    service's user, without a key: see keyless_service_users). `announce` receives the new
    keys before setup is marked complete, so that a crash can never leave keys that were
    issued but never shown.

    After setup_without_admin, only the admin is created (the services have their keys), by
    the same one-time conditional write as the REST API's setup: whichever comes first makes
    the admin, and the other makes none.
    """
    _sync_presets(model, services)
    if model.setup_record() is not None:
        return None
    if model.services_setup_record() is not None:
        try:
            user, issued_admin = model.create_first_admin(admin_user_id, ADMINS)
        except AlreadyExists:
            if model.setup_record() is not None:
                return None  # the REST API's setup came first
            raise
        admin = IssuedKey(user.id, issued_admin.credential.access_key_id, issued_admin.secret.get_secret_value())
        result = SetupResult(admin, {})
        announce(result)
        log.info("auth set up: admin user %r", admin_user_id)
        return result
    _ensure(functools.partial(model.create_user, admin_user_id, "administrator created by setup"))
    model.add_member(ADMINS, admin_user_id)
    admin = _fresh_key(model, admin_user_id)
    issued = {service: _fresh_key(model, service_user_id(service)) for service in services}
    result = SetupResult(admin, issued)
    announce(result)
    model.mark_setup_done(admin_user_id)
    log.info("auth set up: admin user %r, service users %s", admin_user_id, sorted(issued))
    return result


def setup_without_admin(
    model: IamModel,
    services: Sequence[str] = DEFAULT_SERVICES,
    announce: Callable[[ServicesSetupResult], None] = lambda _: None,
) -> ServicesSetupResult | None:
    """Set auth up as setup does, but issue the service users' keys only: the admin is created
    once through the REST API (POST /api/v1/setup_lakefs, lakeFS's first-run page), which until
    then reports setup as not initialized; or by a later run of setup. None if the services'
    keys were issued already (by either function), having issued none."""
    _sync_presets(model, services)
    if model.setup_record() is not None or model.services_setup_record() is not None:
        return None
    issued = {service: _fresh_key(model, service_user_id(service)) for service in services}
    result = ServicesSetupResult(issued)
    announce(result)
    model.mark_services_setup_done()
    log.info("auth set up without an admin (POST /api/v1/setup_lakefs creates it): service users %s", sorted(issued))
    return result


def _print_text(result: SetupResult | ServicesSetupResult) -> None:
    print("Silt auth is set up. These secrets are shown only this once; store them now.")
    if isinstance(result, ServicesSetupResult):
        print("\nno admin user yet: create it once with POST /api/v1/setup_lakefs (the web UI's setup page)")
    else:
        print(f"\nadmin user {result.admin.user_id!r}:")
        print(f"  access_key_id:     {result.admin.access_key_id}")
        print(f"  secret_access_key: {result.admin.secret_access_key}")
    for service, key in result.services.items():
        # The services read config.credentials; GC runs the CLI, which reads the CLI's variables.
        prefix = "SILT" if service == GC_SERVICE else "SILT_CREDENTIALS"
        print(f"\n{service} (user {key.user_id!r}), in that service's environment:")
        print(f"  {prefix}_ACCESS_KEY_ID={key.access_key_id}")
        print(f"  {prefix}_SECRET_ACCESS_KEY={key.secret_access_key}")
    sys.stdout.flush()


def _print_json(result: SetupResult | ServicesSetupResult) -> None:
    def key(k: IssuedKey) -> dict[str, str]:
        return {"user_id": k.user_id, "access_key_id": k.access_key_id, "secret_access_key": k.secret_access_key}

    admin = key(result.admin) if isinstance(result, SetupResult) else None
    print(json.dumps({"admin": admin, "services": {s: key(k) for s, k in result.services.items()}}))
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
    parser.add_argument(
        "--defer-admin",
        action="store_true",
        help="issue the service users' keys only; the admin is created once through POST /api/v1/setup_lakefs",
    )
    args = parser.parse_args(argv)

    def body() -> None:
        with open_iam(load_config(args.config)) as model:
            services = DEFAULT_SERVICES if args.services is None else args.services
            printer = _print_json if args.json else _print_text
            done: SetupResult | ServicesSetupResult | None
            if args.defer_admin:
                done = setup_without_admin(model, services, printer)
            else:
                done = setup(model, args.admin, services, printer)
            if done is not None:
                return
            record = model.setup_record()
            if record is None:
                print(
                    "Silt auth was set up already, without an admin: create it once with POST /api/v1/setup_lakefs"
                    " (or run this without --defer-admin); no key was issued.",
                    file=sys.stderr,
                )
            else:
                print(
                    f"Silt auth was set up already (admin user {record.admin_user_id!r}); no key was issued.",
                    file=sys.stderr,
                )
                for user_id in keyless_service_users(model, services):
                    print(
                        f"user {user_id!r} has no access key yet (added by this version): issue one with"
                        f" `silt auth credentials create --user {user_id}`",
                        file=sys.stderr,
                    )

    return run_tool("silt auth setup", body)


@contextlib.contextmanager
def open_iam(config: Config) -> Iterator[IamModel]:
    """What a setup command works on: the IAM model over the configured store, with logging at
    the configured level."""
    logging.basicConfig(level=getattr(logging, config.logging.level.replace("WARN", "WARNING"), logging.INFO))
    with open_store(config.database) as store:
        yield IamModel(store, SecretBox(config.auth.encrypt_secret_key))


if __name__ == "__main__":
    sys.exit(main())
