"""`silt auth`: users, groups, policies and credentials."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cli.common import as_dict, client, done, json_option, output, table, when
from silt.auth.v1 import auth_pb2 as api
from silt.auth.v1 import model_pb2 as pb
from silt.client import paged
from silt.client_base import EXIT_USAGE, ClientError
from silt.policy_conditions import OPERATORS
from silt.spark import S3AEndpoint, builder_lines, spark_defaults_conf, spark_settings

_EFFECTS = {"allow": pb.EFFECT_ALLOW, "deny": pb.EFFECT_DENY}


def _all(call: str, items: str, key: Callable[[Any], str] = lambda r: str(r.id), **fields: Any) -> list[Any]:
    """Every record auth's list call answers (e.g. "ListGroupMembers" with group_id=...), all its
    pages: the records under the field items, paged after key(last record)."""
    stub, request = getattr(client().auth, call), getattr(api, f"{call}Request")
    return list(paged(lambda after: stub(request(after=after, **fields)), items, key))


_description_option = click.option("--description", default="", help="Free text shown by list and show.")


def _created(kind: str, record: Any) -> None:
    """Answer a created user, group or policy: its record, or a line naming it."""
    output(as_dict(record), lambda: click.echo(f"{kind} {record.id} created"))


def _show_ids(kind: str, items: list[Any]) -> None:
    output(
        [as_dict(i) for i in items],
        lambda: table([kind, "created", "description"], [(i.id, when(i.creation_date), i.description) for i in items]),
    )


# Users, groups and policies are managed alike, so their create, list and delete commands are
# made once for all three. Auth's calls follow one naming (CreateUser/CreateUserRequest,
# ListPolicies/ListPoliciesRequest, ...), which is how a kind names its calls here.


def _call(kind: str, verb: str, **fields: Any) -> Any:
    """Auth's <Verb><Kind> call with a <Verb><Kind>Request of these fields, e.g. ("User", "Delete", id=...)."""
    request = getattr(api, f"{verb}{kind}Request")(**fields)
    return getattr(client().auth, f"{verb}{kind}")(request)


def _entity_commands(group: click.Group, kind: str, plural: str, create_help: str | None, delete_help: str) -> None:
    """Add `list` and `delete` (and, given create_help, `create`) commands for a kind ("user", "users") to group."""
    kind_name, metavar = kind.capitalize(), f"{kind.upper()}_ID"

    if create_help is not None:

        @group.command("create", help=create_help)
        @click.argument("entity_id", metavar=metavar)
        @_description_option
        @json_option
        def create_entity(entity_id: str, description: str) -> None:
            _created(kind_name, _call(kind_name, "Create", id=entity_id, description=description))

    @group.command("list", help=f"Every {kind}'s id.")
    @json_option
    def list_entities() -> None:
        _show_ids(kind, _all(f"List{plural.capitalize()}", plural))

    @group.command("delete", help=delete_help)
    @click.argument("entity_id", metavar=metavar)
    @json_option
    def delete_entity(entity_id: str) -> None:
        _call(kind_name, "Delete", id=entity_id)
        done(f"{kind_name} {entity_id} deleted", **{f"{kind}_id": entity_id})


@click.group("auth")
def auth() -> None:
    """Users, groups, policies and credentials."""


@auth.command("whoami")
@json_option
def whoami() -> None:
    """The user your credentials belong to."""
    resp = client().auth.WhoAmI(api.WhoAmIRequest())
    output(as_dict(resp), lambda: click.echo(f"{resp.user.id} (access key {resp.access_key_id})"))


# --- users --------------------------------------------------------------------------------


@auth.group()
def users() -> None:
    """Users."""


_entity_commands(
    users,
    "user",
    "users",
    create_help="Create a user (give it access with `auth groups add-member` or `auth policies attach`).",
    delete_help="Delete a user with its access keys.",
)


@users.command("show")
@click.argument("user_id")
@json_option
def user_show(user_id: str) -> None:
    """A user with its groups and effective policies."""
    user = client().auth.GetUser(api.GetUserRequest(id=user_id))
    groups = _all("ListUserGroups", "groups", user_id=user_id)
    policies = _all("ListUserPolicies", "policies", user_id=user_id, effective=True)
    data = {**as_dict(user), "groups": [g.id for g in groups], "policies": [p.id for p in policies]}

    def human() -> None:
        click.echo(f"user:     {user.id}")
        click.echo(f"created:  {when(user.creation_date)}")
        click.echo(f"groups:   {', '.join(g.id for g in groups) or '-'}")
        click.echo(f"policies: {', '.join(p.id for p in policies) or '-'}")

    output(data, human)


# --- groups -------------------------------------------------------------------------------


@auth.group()
def groups() -> None:
    """Groups (preset: Admins, Developers, Analysts, Services)."""


_entity_commands(
    groups,
    "group",
    "groups",
    create_help="Create a group; its members get the policies attached to it.",
    delete_help="Delete a group (its members stay, without its policies).",
)


def _membership_command(name: str, call: str, done_words: str, help: str) -> None:
    """`auth groups NAME GROUP_ID USER_ID`: auth's call (AddGroupMember, RemoveGroupMember) on
    one membership."""

    @groups.command(name, help=help)
    @click.argument("group_id")
    @click.argument("user_id")
    @json_option
    def change_membership(group_id: str, user_id: str) -> None:
        getattr(client().auth, call)(api.GroupMemberRequest(group_id=group_id, user_id=user_id))
        done(f"User {user_id} {done_words} {group_id}", group_id=group_id, user_id=user_id)


_membership_command("add-member", "AddGroupMember", "added to", "Add a user to a group.")
_membership_command("remove-member", "RemoveGroupMember", "removed from", "Remove a user from a group.")


@groups.command("members")
@click.argument("group_id")
@json_option
def group_members(group_id: str) -> None:
    """The users in a group."""
    _show_ids("user", _all("ListGroupMembers", "users", group_id=group_id))


# --- policies -----------------------------------------------------------------------------


@auth.group()
def policies() -> None:
    """Policies: statements of {effect, actions, resources}; deny wins, no match means deny."""


def _conditions(given: object) -> list[pb.Condition]:
    """lakeFS's condition shape, {"IpAddress": {"SourceIp": ["10.0.0.0/8"]}}, as Silt's; auth
    validates it (an operator or field it does not know is refused there, naming it)."""
    if not given:
        return []
    if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
        raise ClientError('"condition" is {"IpAddress": {"SourceIp": ["<address or CIDR>", ...]}}', EXIT_USAGE)
    return [
        pb.Condition(operator=OPERATORS.get(name, 0), field=field, values=[str(v) for v in values])  # type: ignore[arg-type]
        for name, fields in given.items()
        for field, values in fields.items()
    ]


def _statements(raw: str) -> list[pb.Statement]:
    """A JSON list of {"effect": "allow"|"deny", "actions": [...], "resources": [...]}, each
    with an optional lakeFS "condition"."""
    text = Path(raw[1:]).read_text() if raw.startswith("@") else raw
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ClientError(f"statements are not valid JSON: {exc}", EXIT_USAGE) from None
    if isinstance(parsed, dict):
        parsed = parsed.get("statements", [parsed])
    out = []
    for s in parsed:
        effect = _EFFECTS.get(str(s.get("effect", "allow")).lower())
        if effect is None or not s.get("actions"):
            raise ClientError('each statement needs "effect" (allow|deny) and "actions"', EXIT_USAGE)
        out.append(
            pb.Statement(
                effect=effect,
                actions=s["actions"],
                resources=s.get("resources", ["*"]),
                conditions=_conditions(s.get("condition")),
            )
        )
    return out


@policies.command("create")
@click.argument("policy_id")
@click.option(
    "--statements",
    "raw",
    required=True,
    help='JSON list (or @file): [{"effect": "allow", "actions": ["ReadRepo"], "resources": ["prod-*"]}]',
)
@_description_option
@json_option
def policy_create(policy_id: str, raw: str, description: str) -> None:
    """Create a policy from JSON statements (inline, or @FILE)."""
    request = api.CreatePolicyRequest(id=policy_id, description=description, statements=_statements(raw))
    _created("Policy", client().auth.CreatePolicy(request))


_entity_commands(
    policies, "policy", "policies", create_help=None, delete_help="Delete a policy (detaching it from everyone)."
)


@policies.command("show")
@click.argument("policy_id")
@json_option
def policy_show(policy_id: str) -> None:
    """A policy's statements."""
    policy = client().auth.GetPolicy(api.GetPolicyRequest(id=policy_id))

    def human() -> None:
        click.echo(f"policy: {policy.id}  ({policy.description})")
        table(
            ["effect", "actions", "resources"],
            [
                (pb.Effect.Name(s.effect).removeprefix("EFFECT_").lower(), ",".join(s.actions), ",".join(s.resources))
                for s in policy.statements
            ],
        )

    output(as_dict(policy), human)


def _attachment(policy_id: str, user: str | None, group: str | None) -> api.PolicyAttachmentRequest:
    if bool(user) == bool(group):
        raise ClientError("give exactly one of --user and --group", EXIT_USAGE)
    if user:
        return api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user)
    assert group  # exactly one of the two is given
    return api.PolicyAttachmentRequest(policy_id=policy_id, group_id=group)


def _attachment_command(name: str, call: str, done_words: str, to_whom: str, help: str) -> None:
    """`auth policies NAME POLICY_ID --user U | --group G`: auth's call (AttachPolicy,
    DetachPolicy) on one attachment."""

    @policies.command(name, help=help)
    @click.argument("policy_id")
    @click.option("--user", help=f"The user {to_whom}.")
    @click.option("--group", help=f"The group {to_whom}.")
    @json_option
    def change_attachment(policy_id: str, user: str | None, group: str | None) -> None:
        getattr(client().auth, call)(_attachment(policy_id, user, group))
        done(f"Policy {policy_id} {done_words} {user or group}", policy_id=policy_id, user_id=user, group_id=group)


_attachment_command(
    "attach", "AttachPolicy", "attached to", "to attach it to", "Attach a policy to a user or a group (exactly one)."
)
_attachment_command(
    "detach",
    "DetachPolicy",
    "detached from",
    "to detach it from",
    "Detach a policy from a user or a group (exactly one).",
)


# --- credentials --------------------------------------------------------------------------


@auth.group()
def credentials() -> None:
    """Access keys (for the CLI, gRPC and S3 clients alike)."""


@credentials.command("create")
@click.option("--user", "user_id", required=True, help="Whose key it is.")
@json_option
def credentials_create(user_id: str) -> None:
    """Issue a key; its secret is shown only this once."""
    resp = client().auth.CreateCredentials(api.CreateCredentialsRequest(user_id=user_id))
    data = {
        "user_id": resp.credential.user_id,
        "access_key_id": resp.credential.access_key_id,
        "secret_access_key": resp.secret_access_key,
    }

    def human() -> None:
        click.echo(f"Access key for {user_id} (the secret is shown only this once):")
        click.echo(f"  access_key_id:     {data['access_key_id']}")
        click.echo(f"  secret_access_key: {data['secret_access_key']}")

    output(data, human)


@credentials.command("list")
@click.option("--user", "user_id", default="", help="Default: yourself.")
@json_option
def credentials_list(user_id: str) -> None:
    """A user's access keys (never their secrets)."""
    items = _all("ListCredentials", "credentials", lambda c: c.access_key_id, user_id=user_id)
    output(
        [as_dict(c) for c in items],
        lambda: table(
            ["access key", "user", "created"], [(c.access_key_id, c.user_id, when(c.creation_date)) for c in items]
        ),
    )


@credentials.command("delete")
@click.option("--user", "user_id", required=True, help="Whose key it is.")
@click.argument("access_key_id")
@json_option
def credentials_delete(user_id: str, access_key_id: str) -> None:
    """Revoke an access key."""
    client().auth.DeleteCredentials(api.DeleteCredentialsRequest(user_id=user_id, access_key_id=access_key_id))
    done(f"Access key {access_key_id} deleted", user_id=user_id, access_key_id=access_key_id)


@auth.command("env")
@click.option(
    "--spark",
    "spark_format",
    type=click.Choice(["builder", "conf"]),
    default=None,
    help="Print Spark's S3A settings instead: SparkSession.builder lines or spark-defaults.conf.",
)
@json_option
def env(spark_format: str | None) -> None:
    """Shell exports for the AWS CLI and SDKs with your Silt key: eval "$(silt auth env)"."""
    c = client()
    creds = c.credentials()
    s = c.settings
    if spark_format is not None:
        target = S3AEndpoint(s.s3_endpoint, creds.access_key_id, creds.secret_access_key.get_secret_value())
        settings = spark_settings(target)
        text = builder_lines(target) if spark_format == "builder" else spark_defaults_conf(target)
        output(settings, lambda: click.echo(text, nl=False))
        return
    values = {
        "AWS_ACCESS_KEY_ID": creds.access_key_id,
        "AWS_SECRET_ACCESS_KEY": creds.secret_access_key.get_secret_value(),
        "AWS_DEFAULT_REGION": s.region,
        "AWS_ENDPOINT_URL": s.s3_endpoint,
    }
    output(values, lambda: click.echo("\n".join(f"export {k}={shlex.quote(v)}" for k, v in values.items())))
