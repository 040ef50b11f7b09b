"""Cassandra's side of a deployment with authentication: the superuser, one login per Silt
service, and the schema (cassandra.yaml with PasswordAuthenticator and CassandraAuthorizer).

    python -m silt.kv.cassandra_roles [--config FILE] --role NAME:KEYSPACE:PASSWORD_VARIABLE[:READ_KEYSPACE,...] ...

Logs in as database.cassandra.username / password, the superuser the operator chose. On a
fresh cluster that login fails and Cassandra's built-in `cassandra` / `cassandra` works: the
chosen superuser is created with it and `cassandra` is dropped (its password is changed
instead when the chosen name is `cassandra`), so the well-known login never stays usable.
Then, at every run:

* system_auth is replicated like Silt's keyspace (replication in the configuration), so that
  losing one node does not lock every service out;
* each role's keyspace and its KV table are created (services run with create_schema off and
  hold no DDL permission);
* each role is created, or its password set to the one in PASSWORD_VARIABLE (which is how a
  password is rotated), and granted SELECT and MODIFY on its keyspace: nothing else, no other
  keyspace, no schema changes; and SELECT alone on each READ_KEYSPACE (the gateway reads
  graveler's refs and staging to answer reads itself, and may write none of them). Any other
  permission the role holds directly (a keyspace it was given before: auth's login had
  graveler's keyspace until auth got its own) is revoked.

Only the USER statements are used: Cassandra 2.1 knows no roles, and 2.2 through 5.0 keep
CREATE/ALTER/DROP USER as synonyms of the role statements (a user is a role with LOGIN).
Prints what it did, never a password. Waits (--wait) for a cluster that is still starting.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cassandra import AuthenticationFailed, InvalidRequest
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable, Session
from cassandra.policies import DCAwareRoundRobinPolicy
from pydantic import SecretStr

from silt.config import CassandraConfig, load_config
from silt.errors import ConfigError, InvalidArgument, Unavailable
from silt.kv.cassandra import CassandraStore, replication
from silt.tool_main import run_tool

log = logging.getLogger(__name__)

DEFAULT_SUPERUSER = ("cassandra", "cassandra")
# Lower-case identifiers only: unquoted CQL names are case-insensitive, and these appear in
# statements unquoted.
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_KEYSPACE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_WAIT_S = 300.0
_RETRY_S = 2.0
_DDL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Role:
    name: str
    keyspace: str
    password: SecretStr = field(repr=False)
    reads: tuple[str, ...] = ()  # keyspaces it may SELECT from and nothing more


def parse_role(spec: str, environ: dict[str, str]) -> Role:
    """NAME:KEYSPACE:PASSWORD_VARIABLE[:READ_KEYSPACE,...] -> Role, the password read from that variable."""
    parts = spec.split(":")
    if len(parts) not in (3, 4):
        raise InvalidArgument(f"--role {spec!r}: expected NAME:KEYSPACE:PASSWORD_VARIABLE[:READ_KEYSPACE,...]")
    name, keyspace, variable = parts[:3]
    reads = tuple(read.lower() for read in parts[3].split(",")) if len(parts) == 4 else ()
    for read in reads:
        if not _KEYSPACE.fullmatch(read) or read == keyspace.lower():
            raise InvalidArgument(
                f"--role {spec!r}: a read keyspace must match {_KEYSPACE.pattern} and differ from its own"
            )
    if not _NAME.fullmatch(name) or name == DEFAULT_SUPERUSER[0]:
        raise InvalidArgument(f"--role {spec!r}: the name must match {_NAME.pattern} and not be 'cassandra'")
    if not _KEYSPACE.fullmatch(keyspace):
        raise InvalidArgument(f"--role {spec!r}: the keyspace must match {_KEYSPACE.pattern}")
    if not _ENV_NAME.fullmatch(variable):
        raise InvalidArgument(f"--role {spec!r}: {variable!r} is not an environment variable name")
    password = environ.get(variable, "")
    if not password:
        raise InvalidArgument(f"--role {name}: the environment variable {variable} (its password) is empty or unset")
    return Role(name, keyspace.lower(), SecretStr(password), reads)


def _run(session: Session, cql: str, password: str | None = None) -> None:
    """Execute one statement; a failure names the statement (with %s for the password), never
    the password, which the server's message might quote."""
    try:
        session.execute(cql, None if password is None else (password,))
    except Exception as exc:
        raise _failed(cql, exc, password) from None


def _failed(cql: str, exc: Exception, password: str | None) -> Unavailable:
    detail = type(exc).__name__ if password is not None else f"{type(exc).__name__}: {exc}"
    return Unavailable(f"cassandra: {cql!r} failed: {detail}")


# How long a statement about a user just created may be refused as naming no such user: Cassandra
# writes the user to system_auth at consistency ONE, and a statement another coordinator runs
# right after can read a replica the row has not reached yet (seen on a 3-node 2.1 cluster).
_NEW_USER_WAIT_S = 30.0
_NEW_USER_RETRY_S = 0.5


def _run_on_new_user(session: Session, cql: str, password: str | None = None) -> None:
    """_run for a statement about a user created a moment ago: InvalidRequest (no such user yet)
    is retried until the user's row reaches the coordinator, for at most _NEW_USER_WAIT_S."""
    deadline = time.monotonic() + _NEW_USER_WAIT_S
    while True:
        try:
            session.execute(cql, None if password is None else (password,))
            return
        except InvalidRequest as exc:
            if time.monotonic() >= deadline:
                raise _failed(cql, exc, password) from None
            time.sleep(_NEW_USER_RETRY_S)
        except Exception as exc:
            raise _failed(cql, exc, password) from None


_GRANTED = ("SELECT", "MODIFY")
_IDENTIFIER = r"([A-Za-z0-9_]{1,48})"
# A resource as LIST PERMISSIONS names it (2.1 through 5.0) -> as GRANT and REVOKE name it.
_RESOURCES = [
    (re.compile(r"<all keyspaces>"), "ALL KEYSPACES"),
    (re.compile(rf"<keyspace {_IDENTIFIER}>"), 'KEYSPACE "{0}"'),
    (re.compile(rf"<table {_IDENTIFIER}\.{_IDENTIFIER}>"), 'TABLE "{0}"."{1}"'),
    (re.compile(r"<all roles>"), "ALL ROLES"),
    (re.compile(rf"<role {_IDENTIFIER}>"), 'ROLE "{0}"'),
    (re.compile(r"<all functions>"), "ALL FUNCTIONS"),
    (re.compile(rf"<all functions in {_IDENTIFIER}>"), 'ALL FUNCTIONS IN KEYSPACE "{0}"'),
    (re.compile(r"<all mbeans>"), "ALL MBEANS"),
]


def _resource_cql(resource: str) -> str | None:
    for pattern, cql in _RESOURCES:
        match = pattern.fullmatch(resource)
        if match:
            return cql.format(*match.groups())
    return None


def revoke_other_grants(session: Session, role: Role, say: Callable[[str], None]) -> None:
    """Revoke every permission the role holds directly but SELECT and MODIFY on its keyspace and
    SELECT on its read keyspaces."""
    keep = f"<keyspace {role.keyspace}>"
    reads = {f"<keyspace {read}>" for read in role.reads}
    try:
        rows = list(session.execute(f"LIST ALL PERMISSIONS OF {role.name} NORECURSIVE"))
    except Exception as exc:
        raise Unavailable(
            f"cassandra: listing the permissions of {role.name} failed: {type(exc).__name__}: {exc}"
        ) from None
    for row in rows:
        resource, permission = str(row.resource), str(row.permission).upper()
        if (resource == keep and permission in _GRANTED) or (resource in reads and permission == "SELECT"):
            continue
        target = _resource_cql(resource)
        if target is None or not permission.isalpha():
            raise Unavailable(
                f"cassandra: login {role.name} holds {permission} on {resource}, which this step cannot revoke;"
                f" revoke it by hand (cqlsh as the superuser), then run it again"
            )
        _run(session, f"REVOKE {permission} ON {target} FROM {role.name}")
        say(f"cassandra: login {role.name}: revoked {permission} on {resource}")


def _superuser(config: CassandraConfig) -> tuple[str, str]:
    name = config.username or ""
    password = config.password.get_secret_value() if config.password is not None else ""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            "invalid configuration: database.cassandra.username: the superuser to log in as must be set"
            f" and match {_NAME.pattern}"
        )
    if not password or password == DEFAULT_SUPERUSER[1]:
        raise ConfigError(
            "invalid configuration: database.cassandra.password: the superuser's password must be set, and"
            " not to the well-known default"
        )
    return name, password


def _open(config: CassandraConfig, username: str, password: str) -> Cluster:
    extra = {} if config.protocol_version is None else {"protocol_version": config.protocol_version}
    profile = ExecutionProfile(
        load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=config.local_datacenter or ""),
        request_timeout=max(config.request_timeout_s, 10.0),
    )
    return Cluster(
        contact_points=list(config.contact_points),
        port=config.port,
        auth_provider=PlainTextAuthProvider(username=username, password=password),
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=config.connect_timeout_s,
        control_connection_timeout=config.connect_timeout_s,
        **extra,
    )


def _authentication_failed(exc: NoHostAvailable) -> bool:
    return any(isinstance(error, AuthenticationFailed) for error in (exc.errors or {}).values())


def _login(config: CassandraConfig, username: str, password: str) -> tuple[Cluster, Session] | None:
    """A session logged in as username, or None when the credentials were refused."""
    cluster = _open(config, username, password)
    # The driver logs a refused login with a traceback; whoever calls this says it in one line.
    cluster_log = logging.getLogger("cassandra.cluster")
    previous = cluster_log.level
    cluster_log.setLevel(logging.CRITICAL)
    try:
        session = cluster.connect()
    except NoHostAvailable as exc:
        cluster.shutdown()
        if _authentication_failed(exc):
            return None
        raise Unavailable(f"cassandra: cannot reach {', '.join(config.contact_points)}: {exc}") from exc
    except BaseException:
        cluster.shutdown()
        raise
    finally:
        cluster_log.setLevel(previous)
    return cluster, session


def _bootstrap(config: CassandraConfig, superuser: tuple[str, str], say: Callable[[str], None]) -> bool:
    """Replace the built-in superuser by the configured one; False if the built-in one is gone."""
    logged_in = _login(config, *DEFAULT_SUPERUSER)
    if logged_in is None:
        return False
    default, session = logged_in
    name, password = superuser
    try:
        # Before the first new login exists, so that it is written to every replica.
        _run(session, f"ALTER KEYSPACE system_auth WITH replication = {replication(config)}")
        if name == DEFAULT_SUPERUSER[0]:
            _run(session, "ALTER USER cassandra WITH PASSWORD %s", password)
            say("cassandra: the built-in superuser 'cassandra' has the configured password now")
        else:
            _run(session, f"CREATE USER IF NOT EXISTS {name} WITH PASSWORD %s SUPERUSER", password)
            say(f"cassandra: superuser {name!r} created (logged in with the built-in one)")
    finally:
        default.shutdown()
    return True


def connect_superuser(config: CassandraConfig, wait_s: float, say: Callable[[str], None]) -> tuple[Cluster, Session]:
    """Log in as the configured superuser, creating it with the built-in one on a fresh cluster."""
    superuser = _superuser(config)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            logged_in = _login(config, *superuser)
            if logged_in is not None:
                return logged_in
            if _bootstrap(config, superuser, say):
                continue
            problem = (
                f"neither the configured superuser {superuser[0]!r} nor the built-in 'cassandra' can log in"
                " (a cluster still starting creates 'cassandra' within seconds; otherwise the Secret holds a"
                " password that is no longer the superuser's)"
            )
        except Unavailable as exc:
            problem = str(exc)
        if time.monotonic() >= deadline:
            raise Unavailable(f"cassandra: {problem}")
        log.info("cassandra: %s; retrying", problem)
        time.sleep(_RETRY_S)


def _create_schema(config: CassandraConfig, superuser: tuple[str, str], keyspace: str) -> None:
    as_superuser = config.model_copy(
        update={
            "keyspace": keyspace,
            "create_schema": True,
            "username": superuser[0],
            "password": SecretStr(superuser[1]),
            "request_timeout_s": max(config.request_timeout_s, _DDL_TIMEOUT_S),
        }
    )
    CassandraStore(as_superuser).close()


def provision(config: CassandraConfig, roles: list[Role], wait_s: float, say: Callable[[str], None]) -> None:
    superuser = _superuser(config)
    cluster, session = connect_superuser(config, wait_s, say)
    try:
        _run(session, f"ALTER KEYSPACE system_auth WITH replication = {replication(config)}")
        if superuser[0] != DEFAULT_SUPERUSER[0]:
            _run(session, "DROP USER IF EXISTS cassandra")
            say("cassandra: the built-in superuser 'cassandra' does not exist")
        for keyspace in sorted({role.keyspace for role in roles}):
            _create_schema(config, superuser, keyspace)
            say(f"cassandra: keyspace {keyspace} and its KV table exist")
        for role in roles:
            password = role.password.get_secret_value()
            _run(session, f"CREATE USER IF NOT EXISTS {role.name} WITH PASSWORD %s NOSUPERUSER", password)
            # Sets the password of a user that existed already: rotation is a new Secret value.
            _run_on_new_user(session, f"ALTER USER {role.name} WITH PASSWORD %s", password)
            for permission in _GRANTED:
                _run_on_new_user(session, f"GRANT {permission} ON KEYSPACE {role.keyspace} TO {role.name}")
            for read in role.reads:
                _run_on_new_user(session, f"GRANT SELECT ON KEYSPACE {read} TO {role.name}")
            revoke_other_grants(session, role, say)
            reads = "".join(f", SELECT on keyspace {read}" for read in role.reads)
            say(f"cassandra: login {role.name}: SELECT and MODIFY on keyspace {role.keyspace}{reads}, nothing else")
    finally:
        cluster.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Create Cassandra's superuser, one login per Silt service and the schema (idempotent)."
    )
    parser.add_argument("--config", help="YAML configuration file")
    parser.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="NAME:KEYSPACE:PASSWORD_VARIABLE[:READ_KEYSPACE,...]",
        help="a login for one service, granted SELECT and MODIFY on KEYSPACE and SELECT on each READ_KEYSPACE;"
        " repeatable",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_S,
        help=f"seconds to wait for the cluster (default {DEFAULT_WAIT_S:g})",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    def body() -> None:
        config = load_config(args.config).database.cassandra
        roles = [parse_role(spec, dict(os.environ)) for spec in args.role]
        provision(config, roles, args.wait, lambda text: print(text, flush=True))

    return run_tool("silt cassandra roles", body)


if __name__ == "__main__":
    sys.exit(main())
