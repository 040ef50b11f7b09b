"""lakeFS's group ACLs (Read, Write, Super, Admin) as Silt policies.

lakeFS's ACL model realises a group's ACL as one policy, named after the group, that is the
group's only policy: setting the ACL writes that policy, attaches it and detaches every other
policy from the group. Silt does the same with its own vocabulary: the policy `ACL_-_<group>`
(Silt's ids cannot hold lakeFS's parentheses) holds, on every repository:

* Read: ReadRepo;
* Write: ReadRepo, WriteRepo, ReadActionOutput (lakeFS's Write includes reading hooks' runs);
* Super: every repository action: CreateRepo, DeleteRepo, ReadRepo, WriteRepo, DumpRefs,
  RestoreRefs, ReadActionOutput (lakeFS's `fs:*`; GC rules and branch protection stay with
  Admin, as retention and branch rules are outside `fs:` in lakeFS);
* Admin: everything (`*`), as lakeFS's AllAccess.

Reading the ACL back reads what is enforced: the permission whose statements the policy holds.
lakeFS's Read, Write and Super also let a user manage its own keys (`${user}`); Silt's
policies have no such variable, so those stay with whoever manages keys.
"""

from __future__ import annotations

from pydantic.v1 import BaseModel, Extra, StrictStr

from edge.api.errors import bad_request
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb

POLICY_PREFIX = "ACL_-_"
MAX_POLICY_ID = 128  # auth's longest id
MAX_GROUP_ID = MAX_POLICY_ID - len(POLICY_PREFIX)

READ = "Read"
WRITE = "Write"
SUPER = "Super"
ADMIN = "Admin"

EVERY_REPOSITORY = "*"
ACTIONS: dict[str, tuple[str, ...]] = {
    READ: (a.READ_REPO,),
    WRITE: (a.READ_REPO, a.WRITE_REPO, a.READ_ACTION_OUTPUT),
    SUPER: (*a.REPO_ACTIONS, a.DUMP_REFS, a.RESTORE_REFS, a.READ_ACTION_OUTPUT),
    ADMIN: ("*",),
}


class ACL(BaseModel, extra=Extra.forbid):
    """lakeFS's ACL body (lakefs-sdk has no model for it)."""

    permission: StrictStr


def policy_id(group_id: str) -> str | None:
    """The id of the group's ACL policy; None when the group's id leaves no room for the prefix
    (such a group has no ACL)."""
    return POLICY_PREFIX + group_id if len(group_id) <= MAX_GROUP_ID else None


def settable_policy_id(group_id: str) -> str:
    """The id of the ACL policy about to be written (400 when the group cannot have one)."""
    found = policy_id(group_id)
    if found is None:
        raise bad_request(f"a group with an ACL has an id of at most {MAX_GROUP_ID} characters")
    return found


def statements(permission: str) -> list[pb.Statement]:
    """The statements of an ACL permission (400 for one lakeFS does not have)."""
    actions = ACTIONS.get(permission)
    if actions is None:
        raise bad_request(f'Bad ACL permission "{permission[:64]}": one of {", ".join(ACTIONS)}')
    return [pb.Statement(effect=pb.EFFECT_ALLOW, actions=list(actions), resources=[EVERY_REPOSITORY])]


def permission_of(policy: pb.Policy) -> str | None:
    """The permission whose statements the policy holds exactly, if any."""
    for permission in ACTIONS:
        if list(policy.statements) == statements(permission):
            return permission
    return None


def description(group_id: str, permission: str) -> str:
    return f"the ACL of group {group_id}: {permission} (lakeFS's ACL model)"
