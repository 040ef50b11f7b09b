"""`silt auth`: users, groups, policies, credentials and group ACLs, over the REST API (lakeFS's
/auth endpoints).

Both syntaxes work: lakectl's (`auth users create --id ana`, `auth groups members add --id G
--user U`, `auth users credentials create --id ana`, `auth policies create --id P
--statement-document FILE`, `auth groups acl set --id G --permission Read`) and Silt's own, which
names an entity as an argument (`auth users create ana`, `auth groups add-member G U`,
`auth credentials create --user ana`, `auth policies attach P --user U`).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from cli.common import done, json_option, output, rest, state, table, when
from cli.rest import segment
from silt.client_base import EXIT_USAGE, ClientError

_EFFECTS = ("allow", "deny")


def _entity_id(given: str | None, option: str | None, what: str) -> str:
    """The id named as Silt's argument or lakectl's --id (the same, when both are given)."""
    if given and option and given != option:
        raise ClientError(f"two {what}s named: {given!r} and --id {option!r}", EXIT_USAGE)
    chosen = given or option
    if not chosen:
        raise ClientError(f"name the {what}: as an argument, or with --id (lakectl's)", EXIT_USAGE)
    return chosen


def _listed(path: str, amount: int = 0, after: str = "", prefix: str = "") -> list[dict[str, Any]]:
    """A REST listing's records, every page (or the first `amount`)."""
    params = {"after": after, "prefix": prefix}
    found = []
    for record in rest().pages(path, params):
        found.append(record)
        if amount and len(found) >= amount:
            break
    return found


def _show_ids(kind: str, items: list[dict[str, Any]]) -> None:
    output(
        items,
        lambda: table(
            [kind, "created", "description"],
            [(i.get("id", ""), when(i.get("creation_date")), i.get("description") or "") for i in items],
        ),
    )


def _me() -> str:
    """The caller's user id (lakectl's default for --id on credentials)."""
    return str(rest().get("/user")["user"]["id"])


_description_option = click.option("--description", default="", help="Free text shown by list (groups only).")
_id_option = click.option("--id", "id_option", default=None, help="The id (lakectl's flag; or as the argument).")
_paging = [
    click.option("--amount", type=click.IntRange(0), default=0, help="At most this many (0: all; lakectl's)."),
    click.option("--after", default="", help="Only those after this id (lakectl's)."),
]


def _with_paging(f: Any) -> Any:
    for option in reversed(_paging):
        f = option(f)
    return f


def _no_description(kind: str, description: str) -> None:
    if description:
        raise ClientError(
            f"a {kind} has no description in the REST API (lakeFS's {kind}s carry none); leave out --description",
            EXIT_USAGE,
        )


@click.group("auth")
def auth() -> None:
    """Users, groups, policies and credentials."""


@auth.command("whoami")
@json_option
def whoami() -> None:
    """The user your credentials belong to."""
    user = rest().get("/user")["user"]
    key = state().connection().access_key_id
    data = {"user": user, "access_key_id": key}
    output(data, lambda: click.echo(f"{user['id']} (access key {key})"))


# --- users --------------------------------------------------------------------------------


@auth.group()
def users() -> None:
    """Users."""


@users.command("create")
@click.argument("user_id", required=False, metavar="[USER_ID]")
@_id_option
@_description_option
@json_option
def user_create(user_id: str | None, id_option: str | None, description: str) -> None:
    """Create a user (give it access with `auth groups add-member` or `auth users policies attach`)."""
    chosen = _entity_id(user_id, id_option, "user")
    _no_description("user", description)
    user = rest().post("/auth/users", {"id": chosen})
    output(user, lambda: click.echo(f"User {user['id']} created"))


@users.command("list")
@_with_paging
@json_option
def user_list(amount: int, after: str) -> None:
    """Every user's id."""
    _show_ids("user", _listed("/auth/users", amount, after))


@users.command("delete")
@click.argument("user_id", required=False, metavar="[USER_ID]")
@_id_option
@json_option
def user_delete(user_id: str | None, id_option: str | None) -> None:
    """Delete a user with its access keys."""
    chosen = _entity_id(user_id, id_option, "user")
    rest().delete(f"/auth/users/{segment(chosen)}")
    done(f"User {chosen} deleted", user_id=chosen)


@users.command("show")
@click.argument("user_id", required=False, metavar="[USER_ID]")
@_id_option
@json_option
def user_show(user_id: str | None, id_option: str | None) -> None:
    """A user with its groups and effective policies."""
    chosen = _entity_id(user_id, id_option, "user")
    base = f"/auth/users/{segment(chosen)}"
    user = rest().get(base)
    groups = _listed(base + "/groups")
    policies = [p for p in rest().pages(base + "/policies", {"effective": "true"})]
    data = {**user, "groups": [g["id"] for g in groups], "policies": [p["id"] for p in policies]}

    def human() -> None:
        click.echo(f"user:     {user['id']}")
        click.echo(f"created:  {when(user.get('creation_date'))}")
        click.echo(f"groups:   {', '.join(data['groups']) or '-'}")
        click.echo(f"policies: {', '.join(data['policies']) or '-'}")

    output(data, human)


@users.group("groups")
def user_groups() -> None:
    """The groups a user is in (lakectl's)."""


@user_groups.command("list")
@click.option("--id", "user_id", required=True, help="The user.")
@_with_paging
@json_option
def user_groups_list(user_id: str, amount: int, after: str) -> None:
    """The groups a user is in."""
    _show_ids("group", _listed(f"/auth/users/{segment(user_id)}/groups", amount, after))


@users.group("policies")
def user_policies() -> None:
    """Policies attached to a user (lakectl's)."""


@user_policies.command("list")
@click.option("--id", "user_id", required=True, help="The user.")
@click.option("--effective", is_flag=True, help="Also those of the user's groups.")
@_with_paging
@json_option
def user_policies_list(user_id: str, effective: bool, amount: int, after: str) -> None:
    """A user's policies (with --effective, its groups' too)."""
    path = f"/auth/users/{segment(user_id)}/policies"
    found = []
    for policy in rest().pages(path, {"effective": "true" if effective else None, "after": after}):
        found.append(policy)
        if amount and len(found) >= amount:
            break
    _show_policies(found)


def _attachment(principal: str, principal_id: str, policy_id: str, attach: bool) -> None:
    path = f"/auth/{principal}s/{segment(principal_id)}/policies/{segment(policy_id)}"
    if attach:
        rest().put(path)
    else:
        rest().delete(path)
    words = "attached to" if attach else "detached from"
    ids = {"policy_id": policy_id, f"{principal}_id": principal_id}
    done(f"Policy {policy_id} {words} {principal} {principal_id}", **ids)


def _attach_commands(group: click.Group, principal: str) -> None:
    """lakectl's `auth users|groups policies attach|detach --id ID --policy POLICY`."""
    for name, attach in (("attach", True), ("detach", False)):

        @group.command(name, help=f"{name.capitalize()} a policy {'to' if attach else 'from'} a {principal}.")
        @click.option("--id", "principal_id", required=True, help=f"The {principal}.")
        @click.option("--policy", "policy_id", required=True, help="The policy.")
        @json_option
        def change(principal_id: str, policy_id: str, attach: bool = attach) -> None:
            _attachment(principal, principal_id, policy_id, attach)


_attach_commands(user_policies, "user")


@users.group("credentials")
def user_credentials() -> None:
    """A user's access keys (lakectl's)."""


@user_credentials.command("create")
@click.option("--id", "user_id", default=None, help="The user (default: you).")
@json_option
def user_credentials_create(user_id: str | None) -> None:
    """Issue a key; its secret is shown only this once."""
    _create_key(user_id or _me())


@user_credentials.command("list")
@click.option("--id", "user_id", default=None, help="The user (default: you).")
@_with_paging
@json_option
def user_credentials_list(user_id: str | None, amount: int, after: str) -> None:
    """A user's access keys (never their secrets)."""
    _list_keys(user_id or _me(), amount, after)


@user_credentials.command("delete")
@click.option("--id", "user_id", default=None, help="The user (default: you).")
@click.option("--access-key-id", required=True, help="The key to revoke.")
@json_option
def user_credentials_delete(user_id: str | None, access_key_id: str) -> None:
    """Revoke an access key."""
    _delete_key(user_id or _me(), access_key_id)


# --- groups -------------------------------------------------------------------------------


@auth.group()
def groups() -> None:
    """Groups (preset: Admins, Developers, Analysts, Services)."""


@groups.command("create")
@click.argument("group_id", required=False, metavar="[GROUP_ID]")
@_id_option
@_description_option
@json_option
def group_create(group_id: str | None, id_option: str | None, description: str) -> None:
    """Create a group; its members get the policies attached to it."""
    chosen = _entity_id(group_id, id_option, "group")
    body: dict[str, Any] = {"id": chosen}
    if description:
        body["description"] = description
    group = rest().post("/auth/groups", body)
    output(group, lambda: click.echo(f"Group {group['id']} created"))


@groups.command("list")
@_with_paging
@json_option
def group_list(amount: int, after: str) -> None:
    """Every group's id."""
    _show_ids("group", _listed("/auth/groups", amount, after))


@groups.command("delete")
@click.argument("group_id", required=False, metavar="[GROUP_ID]")
@_id_option
@json_option
def group_delete(group_id: str | None, id_option: str | None) -> None:
    """Delete a group (its members stay, without its policies)."""
    chosen = _entity_id(group_id, id_option, "group")
    rest().delete(f"/auth/groups/{segment(chosen)}")
    done(f"Group {chosen} deleted", group_id=chosen)


def _membership(group_id: str, user_id: str, add: bool) -> None:
    path = f"/auth/groups/{segment(group_id)}/members/{segment(user_id)}"
    if add:
        rest().put(path)
    else:
        rest().delete(path)
    words = "added to" if add else "removed from"
    done(f"User {user_id} {words} {group_id}", group_id=group_id, user_id=user_id)


@groups.command("add-member")
@click.argument("group_id")
@click.argument("user_id")
@json_option
def group_add_member(group_id: str, user_id: str) -> None:
    """Add a user to a group."""
    _membership(group_id, user_id, True)


@groups.command("remove-member")
@click.argument("group_id")
@click.argument("user_id")
@json_option
def group_remove_member(group_id: str, user_id: str) -> None:
    """Remove a user from a group."""
    _membership(group_id, user_id, False)


class _MembersGroup(click.Group):
    """lakectl's `members list|add|remove --id G`, and Silt's `members G` (the list)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["list", "--id", args[0], *args[1:]]
        return super().parse_args(ctx, args)


@groups.group("members", cls=_MembersGroup)
def group_members() -> None:
    """The users in a group: `members GROUP_ID`, or lakectl's `members list|add|remove --id GROUP_ID`."""


@group_members.command("list")
@click.option("--id", "group_id", required=True, help="The group.")
@_with_paging
@json_option
def group_members_list(group_id: str, amount: int, after: str) -> None:
    """The users in a group."""
    _show_ids("user", _listed(f"/auth/groups/{segment(group_id)}/members", amount, after))


@group_members.command("add")
@click.option("--id", "group_id", required=True, help="The group.")
@click.option("--user", "user_id", required=True, help="The user.")
@json_option
def group_members_add(group_id: str, user_id: str) -> None:
    """Add a user to a group."""
    _membership(group_id, user_id, True)


@group_members.command("remove")
@click.option("--id", "group_id", required=True, help="The group.")
@click.option("--user", "user_id", required=True, help="The user.")
@json_option
def group_members_remove(group_id: str, user_id: str) -> None:
    """Remove a user from a group."""
    _membership(group_id, user_id, False)


@groups.group("policies")
def group_policies() -> None:
    """Policies attached to a group (lakectl's)."""


@group_policies.command("list")
@click.option("--id", "group_id", required=True, help="The group.")
@_with_paging
@json_option
def group_policies_list(group_id: str, amount: int, after: str) -> None:
    """A group's policies."""
    _show_policies(_listed(f"/auth/groups/{segment(group_id)}/policies", amount, after))


_attach_commands(group_policies, "group")


@groups.group("acl")
def group_acl() -> None:
    """A group's ACL: lakeFS's Read, Write, Super or Admin (lakectl's)."""


@group_acl.command("get")
@click.option("--id", "group_id", required=True, help="The group.")
@json_option
def group_acl_get(group_id: str) -> None:
    """The group's ACL (blank: it allows nothing)."""
    acl = rest().get(f"/auth/groups/{segment(group_id)}/acl")
    output(acl, lambda: click.echo(f"Permission: {acl.get('permission') or '(none)'}"))


@group_acl.command("set")
@click.option("--id", "group_id", required=True, help="The group.")
@click.option("--permission", required=True, help='Typically "Read", "Write", "Super" or "Admin".')
@json_option
def group_acl_set(group_id: str, permission: str) -> None:
    """Make the group's ACL the group's only policy (others are detached)."""
    rest().post(f"/auth/groups/{segment(group_id)}/acl", {"permission": permission})
    done(f"ACL of group {group_id} set to {permission}", group_id=group_id, permission=permission)


# --- policies -----------------------------------------------------------------------------


@auth.group()
def policies() -> None:
    """Policies: statements of {effect, actions, resources}; deny wins, no match means deny."""


def _condition(given: object) -> dict[str, Any] | None:
    """lakeFS's condition shape, {"IpAddress": {"SourceIp": ["10.0.0.0/8"]}}, checked for its
    shape here; its operators and fields are the server's to check."""
    if not given:
        return None
    if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
        raise ClientError('"condition" is {"IpAddress": {"SourceIp": ["<address or CIDR>", ...]}}', EXIT_USAGE)
    return given


def _statements(text: str) -> list[dict[str, Any]]:
    """Statements as lakeFS's REST API takes them ({effect, action, resource, condition}), from
    lakectl's statement document ({"statement": [...]}) or Silt's list of {"effect", "actions",
    "resources"} (one lakeFS statement per resource); a statement may also stand alone."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ClientError(f"statements are not valid JSON: {exc}", EXIT_USAGE) from None
    if isinstance(parsed, dict):
        parsed = parsed.get("statement", parsed.get("statements", [parsed]))
    if not isinstance(parsed, list):
        raise ClientError("statements: expected a list of statements", EXIT_USAGE)
    out = []
    for s in parsed:
        if not isinstance(s, dict):
            raise ClientError("each statement is a JSON object", EXIT_USAGE)
        effect = str(s.get("effect", "allow")).lower()
        actions = s.get("action", s.get("actions"))
        if effect not in _EFFECTS or not actions:
            raise ClientError('each statement needs "effect" (allow|deny) and "action"', EXIT_USAGE)
        actions = [actions] if isinstance(actions, str) else list(actions)
        resources = s.get("resource", s.get("resources")) or "*"
        condition = _condition(s.get("condition"))
        for resource in [resources] if isinstance(resources, str) else resources:
            statement: dict[str, Any] = {"effect": effect, "action": actions, "resource": resource}
            if condition:
                statement["condition"] = condition
            out.append(statement)
    return out


def _read_document(name: str) -> str:
    """A file's text; "-" is stdin (lakectl's)."""
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text()
    except OSError as exc:
        raise ClientError(f"could not open policy document: {exc}", EXIT_USAGE) from None


def _show_policies(items: list[dict[str, Any]]) -> None:
    output(
        items,
        lambda: table(
            ["policy", "created", "statements"],
            [(p.get("id", ""), when(p.get("creation_date")), len(p.get("statement") or [])) for p in items],
        ),
    )


@policies.command("create")
@click.argument("policy_id", required=False, metavar="[POLICY_ID]")
@_id_option
@click.option(
    "--statements",
    "raw",
    default=None,
    help='JSON list (or @FILE): [{"effect": "allow", "actions": ["ReadRepo"], "resources": ["prod-*"]}]',
)
@click.option(
    "--statement-document",
    "document",
    default=None,
    metavar="FILE",
    help='lakectl\'s: a JSON file ("-": stdin) of {"statement": [{"effect", "action", "resource"}]}.',
)
@click.option("--description", default="", help="Not kept: lakeFS's policies carry none (an error when given).")
@json_option
def policy_create(
    policy_id: str | None, id_option: str | None, raw: str | None, document: str | None, description: str
) -> None:
    """Create a policy from JSON statements (--statements inline or @FILE, or --statement-document)."""
    chosen = _entity_id(policy_id, id_option, "policy")
    _no_description("policy", description)
    if (raw is None) == (document is None):
        raise ClientError("give exactly one of --statements and --statement-document", EXIT_USAGE)
    if raw is not None:
        text = _read_document(raw[1:]) if raw.startswith("@") else raw
    else:
        assert document is not None
        text = _read_document(document)
    policy = rest().post("/auth/policies", {"id": chosen, "statement": _statements(text)})
    output(policy, lambda: click.echo(f"Policy {policy['id']} created"))


@policies.command("list")
@_with_paging
@json_option
def policy_list(amount: int, after: str) -> None:
    """Every policy's id."""
    _show_policies(_listed("/auth/policies", amount, after))


@policies.command("delete")
@click.argument("policy_id", required=False, metavar="[POLICY_ID]")
@_id_option
@json_option
def policy_delete(policy_id: str | None, id_option: str | None) -> None:
    """Delete a policy (detaching it from everyone)."""
    chosen = _entity_id(policy_id, id_option, "policy")
    rest().delete(f"/auth/policies/{segment(chosen)}")
    done(f"Policy {chosen} deleted", policy_id=chosen)


@policies.command("show")
@click.argument("policy_id", required=False, metavar="[POLICY_ID]")
@_id_option
@json_option
def policy_show(policy_id: str | None, id_option: str | None) -> None:
    """A policy's statements (as enforced: in Silt's vocabulary)."""
    chosen = _entity_id(policy_id, id_option, "policy")
    policy = rest().get(f"/auth/policies/{segment(chosen)}")

    def human() -> None:
        click.echo(f"policy: {policy['id']}  created {when(policy.get('creation_date'))}")
        table(
            ["effect", "actions", "resource", "condition"],
            [
                (
                    s.get("effect", ""),
                    ",".join(s.get("action") or []),
                    s.get("resource", ""),
                    json.dumps(s["condition"]) if s.get("condition") else "",
                )
                for s in policy.get("statement") or []
            ],
        )

    output(policy, human)


def _attachment_target(user: str | None, group: str | None) -> tuple[str, str]:
    if bool(user) == bool(group):
        raise ClientError("give exactly one of --user and --group", EXIT_USAGE)
    return ("user", user) if user else ("group", group or "")


@policies.command("attach")
@click.argument("policy_id")
@click.option("--user", help="The user to attach it to.")
@click.option("--group", help="The group to attach it to.")
@json_option
def policy_attach(policy_id: str, user: str | None, group: str | None) -> None:
    """Attach a policy to a user or a group (exactly one)."""
    principal, principal_id = _attachment_target(user, group)
    _attachment(principal, principal_id, policy_id, True)


@policies.command("detach")
@click.argument("policy_id")
@click.option("--user", help="The user to detach it from.")
@click.option("--group", help="The group to detach it from.")
@json_option
def policy_detach(policy_id: str, user: str | None, group: str | None) -> None:
    """Detach a policy from a user or a group (exactly one)."""
    principal, principal_id = _attachment_target(user, group)
    _attachment(principal, principal_id, policy_id, False)


# --- credentials --------------------------------------------------------------------------


def _create_key(user_id: str) -> None:
    issued = rest().post(f"/auth/users/{segment(user_id)}/credentials")
    data = {
        "user_id": user_id,
        "access_key_id": issued["access_key_id"],
        "secret_access_key": issued["secret_access_key"],
    }

    def human() -> None:
        click.echo(f"Access key for {user_id} (the secret is shown only this once):")
        click.echo(f"  access_key_id:     {data['access_key_id']}")
        click.echo(f"  secret_access_key: {data['secret_access_key']}")

    output(data, human)


def _list_keys(user_id: str, amount: int = 0, after: str = "") -> None:
    items = [{**c, "user_id": user_id} for c in _listed(f"/auth/users/{segment(user_id)}/credentials", amount, after)]
    output(
        items,
        lambda: table(
            ["access key", "user", "created"],
            [(c["access_key_id"], user_id, when(c.get("creation_date"))) for c in items],
        ),
    )


def _delete_key(user_id: str, access_key_id: str) -> None:
    rest().delete(f"/auth/users/{segment(user_id)}/credentials/{segment(access_key_id)}")
    done(f"Access key {access_key_id} deleted", user_id=user_id, access_key_id=access_key_id)


@auth.group()
def credentials() -> None:
    """Access keys (for the CLI, the REST API and S3 clients alike)."""


@credentials.command("create")
@click.option("--user", "user_id", default=None, help="Whose key it is (default: yours).")
@json_option
def credentials_create(user_id: str | None) -> None:
    """Issue a key; its secret is shown only this once."""
    _create_key(user_id or _me())


@credentials.command("list")
@click.option("--user", "user_id", default="", help="Default: yourself.")
@json_option
def credentials_list(user_id: str) -> None:
    """A user's access keys (never their secrets)."""
    _list_keys(user_id or _me())


@credentials.command("delete")
@click.option("--user", "user_id", default=None, help="Whose key it is (default: yours).")
@click.argument("access_key_id")
@json_option
def credentials_delete(user_id: str | None, access_key_id: str) -> None:
    """Revoke an access key."""
    _delete_key(user_id or _me(), access_key_id)


def _region() -> str:
    """The S3 region clients sign for: the embedding program's, `silt run`'s saved, or the configuration's."""
    given = state()._client
    if given is not None:
        return str(given.settings.region)
    from cli.config_cache import client_view
    from silt.client_base import _saved, find_config_path

    saved, _ = _saved()
    return str(saved.get("region") or client_view(find_config_path(state().config_path)).region)


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
    connection = state().connection()
    if spark_format is not None:
        from silt.spark import S3AEndpoint, builder_lines, spark_defaults_conf, spark_settings

        target = S3AEndpoint(connection.endpoint, connection.access_key_id, connection.secret_access_key)
        settings = spark_settings(target)
        text = builder_lines(target) if spark_format == "builder" else spark_defaults_conf(target)
        output(settings, lambda: click.echo(text, nl=False))
        return
    values = {
        "AWS_ACCESS_KEY_ID": connection.access_key_id,
        "AWS_SECRET_ACCESS_KEY": connection.secret_access_key,
        "AWS_DEFAULT_REGION": _region(),
        "AWS_ENDPOINT_URL": connection.endpoint,
    }
    output(values, lambda: click.echo("\n".join(f"export {k}={shlex.quote(v)}" for k, v in values.items())))


@click.command("identity")
@json_option
def identity() -> None:
    """The user your credentials belong to (lakectl's identity)."""
    user = rest().get("/user")["user"]

    def human() -> None:
        click.echo(f"User ID:          {user['id']}")
        click.echo(f"Email:            {user.get('email') or ''}")
        click.echo(f"Creation Date:    {when(user.get('creation_date'))}")

    output(user, human)
