"""Every preset group x every action, through real gRPC calls to graveler and auth.

Object actions (ReadObject, WriteObject, DeleteObject) and ReadRefs are enforced by the edges,
not by any gRPC call: here auth's answers about them (Authorize on `<repository>/<key>`, AuthorizeKeys)
are checked for every group; tests/e2e/api/test_object_policies.py runs them through every edge
path."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from datetime import UTC, datetime

import grpc
import pytest

from services.auth.setup import ADMINS, ANALYSTS, DEVELOPERS, PRESET_GROUPS, SERVICES
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as pb
from silt.errors import KeysRefused
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as gpb
from silt.rpc.errors import error_from_rpc
from silt.rpc.signing import Credentials
from tests.integration.auth.support import Stack, code_of, details_of, remember, unique

NO_GROUP = "(no group)"

EXPECTED: dict[str, set[str]] = {
    # Everything but verifying signatures: only a statement naming auth:VerifySignature allows
    # it (FullAccess's `*` does not), and only the verifier service users have one.
    ADMINS: set(a.ALL_ACTIONS) - set(a.LITERAL_ONLY_ACTIONS),
    # The repository's action holds its object actions on every key, its branch actions on
    # every branch, its catalog's actions on its namespaces and tables.
    DEVELOPERS: {a.READ_REPO, a.READ_REFS, a.WRITE_REPO, *a.OBJECT_ACTIONS, *a.BRANCH_ACTIONS, *a.CATALOG_ACTIONS},
    ANALYSTS: {a.READ_REPO, a.READ_REFS, a.READ_OBJECT, a.READ_BRANCH, *a.CATALOG_READ_ACTIONS},
    # Verifying signatures is held by each service's own user, for its audience, not the group.
    SERVICES: {
        a.AUTHORIZE,
        a.READ_REPO,
        a.READ_REFS,
        a.WRITE_REPO,
        *a.OBJECT_ACTIONS,
        *a.BRANCH_ACTIONS,
        *a.CATALOG_ACTIONS,
    },
    NO_GROUP: set(),
}

# A probe prepares what its call needs (as admin) and returns the call, made as `creds`.
Probe = Callable[[Stack, Credentials], Callable[[], object]]


def _victim(stack: Stack, with_key: bool = False) -> tuple[str, str]:
    user_id, creds = stack.new_user(prefix="victim")
    if not with_key:
        stack.auth(stack.admin).DeleteCredentials(
            auth_api.DeleteCredentialsRequest(user_id=user_id, access_key_id=creds.access_key_id)
        )
        return user_id, ""
    return user_id, creds.access_key_id


def _group(stack: Stack) -> str:
    group_id = unique("group")
    stack.auth(stack.admin).CreateGroup(auth_api.CreateGroupRequest(id=group_id))
    return group_id


def _policy(stack: Stack) -> str:
    policy_id = unique("policy")
    stack.auth(stack.admin).CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[_READ_ALL]))
    return policy_id


_READ_ALL = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=["*"])


def _create_repo(stack: Stack, creds: Credentials) -> Callable[[], object]:
    name = unique("new")
    request = api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}")
    return lambda: stack.gv(creds).CreateRepository(request)


def _delete_repo(stack: Stack, creds: Credentials) -> Callable[[], object]:
    repo = stack.new_repo()
    return lambda: stack.gv(creds).DeleteRepository(api.DeleteRepositoryRequest(name=repo))


def _read_repo(stack: Stack, creds: Credentials) -> Callable[[], object]:
    repo = stack.new_repo()
    return lambda: stack.gv(creds).ListBranches(api.ListBranchesRequest(repository=repo))


def _write_repo(stack: Stack, creds: Credentials) -> Callable[[], object]:
    repo = stack.new_repo()
    request = api.CreateBranchRequest(repository=repo, name="feature", source_ref="main")
    return lambda: stack.gv(creds).CreateBranch(request)


def _repo_with_rules(stack: Stack) -> str:
    repo = stack.new_repo()
    rules = gpb.GCRules(default_retention_days=7)
    stack.gv(stack.admin).SetGCRules(api.SetGCRulesRequest(repository=repo, rules=rules))
    return repo


def _set_gc_rules(stack: Stack, creds: Credentials) -> Callable[[], object]:
    request = api.SetGCRulesRequest(repository=stack.new_repo(), rules=gpb.GCRules(default_retention_days=0))
    return lambda: stack.gv(creds).SetGCRules(request)


def _delete_gc_rules(stack: Stack, creds: Credentials) -> Callable[[], object]:
    request = api.DeleteGCRulesRequest(repository=_repo_with_rules(stack))
    return lambda: stack.gv(creds).DeleteGCRules(request)


def _prepare_gc(stack: Stack, creds: Credentials) -> Callable[[], object]:
    request = api.PrepareGCRequest(repository=_repo_with_rules(stack))
    return lambda: stack.gv(creds).PrepareGC(request)


def _set_branch_protection(stack: Stack, creds: Credentials) -> Callable[[], object]:
    rule = gpb.BranchProtectionRule(pattern="main", block_direct_writes=True)
    request = api.SetBranchProtectionRequest(repository=stack.new_repo(), rules=[rule])
    return lambda: stack.gv(creds).SetBranchProtection(request)


def _dump_refs(stack: Stack, creds: Credentials) -> Callable[[], object]:
    request = api.DumpRefsRequest(repository=stack.new_repo())
    return lambda: stack.gv(creds).DumpRefs(request)


def _restore_refs(stack: Stack, creds: Credentials) -> Callable[[], object]:
    """A bare repository on the namespace of a dumped and then deleted one, as in a recovery."""
    admin = stack.gv(stack.admin)
    source = stack.new_repo()
    namespace = admin.GetRepository(api.GetRepositoryRequest(name=source)).storage_namespace
    dump = admin.DumpRefs(api.DumpRefsRequest(repository=source))
    admin.DeleteRepository(api.DeleteRepositoryRequest(name=source))
    restored = unique("restored")
    admin.CreateRepository(api.CreateRepositoryRequest(name=restored, storage_namespace=namespace, bare=True))
    request = api.RestoreRefsRequest(repository=restored, location=dump.location)
    return lambda: stack.gv(creds).RestoreRefs(request)


class _Withheld(grpc.RpcError):
    """A hook's output is never refused outright, only left out: the probe reports that as denied."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.PERMISSION_DENIED

    def details(self) -> str:
        return f"{a.READ_ACTION_OUTPUT} not held: the hook's output was left out"


PRINTING_HOOK = b"""name: printing
on:
  pre-commit:
hooks:
  - id: say
    type: lua
    properties:
      script: print("the hook's output")
"""


def _read_action_output(stack: Stack, creds: Credentials) -> Callable[[], object]:
    """A run whose hook printed (committed by the admin), read back as creds."""
    repo = stack.new_repo()
    engine = stack.graveler
    namespace = engine.refs.repository(repo).namespace
    address = f"data/{unique('action')}"
    engine.committed.adapter.put(namespace, address, io.BytesIO(PRINTING_HOOK), len(PRINTING_HOOK))
    entry = gpb.Entry(physical_address=address, size=len(PRINTING_HOOK), etag=address)
    engine.stage_entry(repo, "main", "_lakefs_actions/printing.yaml", entry)
    engine.commit(repo, "main", "a hook that prints")
    [run] = stack.gv(stack.admin).ListActionRuns(api.ListActionRunsRequest(repository=repo)).runs

    def call() -> object:
        try:
            got = stack.gv(creds).GetActionRun(api.GetActionRunRequest(repository=repo, run_id=run.run_id))
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.PERMISSION_DENIED:
                raise _Withheld() from exc
            raise
        if "the hook's output" not in got.hooks[0].output:
            raise _Withheld()
        return got

    return call


def _auth_call(method: str, request: object) -> Probe:
    def probe(stack: Stack, creds: Credentials) -> Callable[[], object]:
        return lambda: getattr(stack.auth(creds), method)(request)

    return probe


def _on_victim(method: str, build: Callable[[str, str], object], with_key: bool = False) -> Probe:
    def probe(stack: Stack, creds: Credentials) -> Callable[[], object]:
        user_id, key_id = _victim(stack, with_key)
        return lambda: getattr(stack.auth(creds), method)(build(user_id, key_id))

    return probe


def _on_group(method: str, build: Callable[[str], object]) -> Probe:
    def probe(stack: Stack, creds: Credentials) -> Callable[[], object]:
        group_id = _group(stack)
        return lambda: getattr(stack.auth(creds), method)(build(group_id))

    return probe


def _add_member(stack: Stack, creds: Credentials) -> Callable[[], object]:
    group_id, (user_id, _) = _group(stack), _victim(stack)
    request = auth_api.GroupMemberRequest(group_id=group_id, user_id=user_id)
    return lambda: stack.auth(creds).AddGroupMember(request)


def _remove_member(stack: Stack, creds: Credentials) -> Callable[[], object]:
    group_id, (user_id, _) = _group(stack), _victim(stack)
    request = auth_api.GroupMemberRequest(group_id=group_id, user_id=user_id)
    stack.auth(stack.admin).AddGroupMember(request)
    return lambda: stack.auth(creds).RemoveGroupMember(request)


def _delete_policy(stack: Stack, creds: Credentials) -> Callable[[], object]:
    policy_id = _policy(stack)
    return lambda: stack.auth(creds).DeletePolicy(auth_api.DeletePolicyRequest(id=policy_id))


def _attach(stack: Stack, creds: Credentials) -> Callable[[], object]:
    user_id, _ = _victim(stack)
    request = auth_api.PolicyAttachmentRequest(policy_id="RepoReadAll", user_id=user_id)
    return lambda: stack.auth(creds).AttachPolicy(request)


def _detach(stack: Stack, creds: Credentials) -> Callable[[], object]:
    group_id = _group(stack)
    request = auth_api.PolicyAttachmentRequest(policy_id="RepoReadAll", group_id=group_id)
    stack.auth(stack.admin).AttachPolicy(request)
    return lambda: stack.auth(creds).DetachPolicy(request)


def _create_credentials(stack: Stack, creds: Credentials) -> Callable[[], object]:
    user_id, _ = _victim(stack)

    def call() -> object:
        reply = stack.auth(creds).CreateCredentials(auth_api.CreateCredentialsRequest(user_id=user_id))
        return remember(reply.secret_access_key)

    return call


def _verify_signature(stack: Stack, creds: Credentials) -> Callable[[], object]:
    _, key_id = _victim(stack, with_key=True)
    today = datetime.now(UTC).strftime("%Y%m%d")
    request = auth_api.GetCallSigningKeyRequest(access_key_id=key_id, day=today, audience="graveler")
    return lambda: stack.auth(creds).GetCallSigningKey(request)


class _NotHonoured(grpc.RpcError):
    """Naming another author is never refused, only ignored: the probe reports it as denied."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.PERMISSION_DENIED

    def details(self) -> str:
        return f"{a.ACT_FOR_USER} not held: the named author was not used"


def _act_for_user(stack: Stack, creds: Credentials) -> Callable[[], object]:
    victim, _ = _victim(stack)
    repo = stack.new_repo()
    admin = stack.gv(stack.admin)
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    pull = admin.CreatePullRequest(
        api.CreatePullRequestRequest(repository=repo, title="t", source_branch="feature", destination_branch="main")
    ).pull_request
    request = api.AddPullRequestCommentRequest(repository=repo, id=pull.id, body="hi", author=victim)

    def call() -> object:
        try:
            comment = stack.gv(creds).AddPullRequestComment(request)
        except grpc.RpcError as exc:  # a caller who may not comment at all cannot name anyone either
            if exc.code() != grpc.StatusCode.PERMISSION_DENIED:
                raise
            raise _NotHonoured() from exc
        if comment.author != victim:
            raise _NotHonoured()
        return comment

    return call


def _record_events(stack: Stack, creds: Credentials) -> Callable[[], object]:
    repo = stack.new_repo()
    event = ev.HistoryEvent(
        timestamp_us=time.time_ns() // 1000, repository=repo, branch="main", type=ev.WRITE, path="k", user="someone"
    )
    return lambda: stack.gv(creds).RecordEvents(ev.RecordEventsRequest(events=[event]))


def _linked_principal(stack: Stack) -> tuple[str, str]:
    user_id, _ = _victim(stack)
    principal_id = unique("role")
    request = auth_api.CreateUserExternalPrincipalRequest(user_id=user_id, principal_id=principal_id)
    stack.auth(stack.admin).CreateUserExternalPrincipal(request)
    return user_id, principal_id


def _unlink_principal(stack: Stack, creds: Credentials) -> Callable[[], object]:
    user_id, principal_id = _linked_principal(stack)
    request = auth_api.DeleteUserExternalPrincipalRequest(user_id=user_id, principal_id=principal_id)
    return lambda: stack.auth(creds).DeleteUserExternalPrincipal(request)


def _read_principal(stack: Stack, creds: Credentials) -> Callable[[], object]:
    _, principal_id = _linked_principal(stack)
    request = auth_api.GetExternalPrincipalRequest(principal_id=principal_id)
    return lambda: stack.auth(creds).GetExternalPrincipal(request)


PROBES: dict[str, Probe] = {
    a.CREATE_REPO: _create_repo,
    a.DELETE_REPO: _delete_repo,
    a.READ_REPO: _read_repo,
    a.WRITE_REPO: _write_repo,
    a.SET_GC_RULES: _set_gc_rules,
    a.DELETE_GC_RULES: _delete_gc_rules,
    a.PREPARE_GC: _prepare_gc,
    a.DUMP_REFS: _dump_refs,
    a.RESTORE_REFS: _restore_refs,
    a.SET_BRANCH_PROTECTION: _set_branch_protection,
    a.READ_ACTION_OUTPUT: _read_action_output,
    a.CREATE_USER: lambda s, c: _auth_call("CreateUser", auth_api.CreateUserRequest(id=unique("new")))(s, c),
    a.READ_USER: _on_victim("GetUser", lambda u, _: auth_api.GetUserRequest(id=u)),
    a.DELETE_USER: _on_victim("DeleteUser", lambda u, _: auth_api.DeleteUserRequest(id=u)),
    a.CREATE_GROUP: lambda s, c: _auth_call("CreateGroup", auth_api.CreateGroupRequest(id=unique("new")))(s, c),
    a.READ_GROUP: _on_group("GetGroup", lambda g: auth_api.GetGroupRequest(id=g)),
    a.DELETE_GROUP: _on_group("DeleteGroup", lambda g: auth_api.DeleteGroupRequest(id=g)),
    a.ADD_GROUP_MEMBER: _add_member,
    a.REMOVE_GROUP_MEMBER: _remove_member,
    a.CREATE_POLICY: lambda s, c: _auth_call(
        "CreatePolicy", auth_api.CreatePolicyRequest(id=unique("new"), statements=[_READ_ALL])
    )(s, c),
    a.READ_POLICY: _auth_call("GetPolicy", auth_api.GetPolicyRequest(id="RepoReadAll")),
    a.DELETE_POLICY: _delete_policy,
    a.ATTACH_POLICY: _attach,
    a.DETACH_POLICY: _detach,
    a.CREATE_CREDENTIALS: _create_credentials,
    a.READ_CREDENTIALS: _on_victim("ListCredentials", lambda u, _: auth_api.ListCredentialsRequest(user_id=u)),
    a.DELETE_CREDENTIALS: _on_victim(
        "DeleteCredentials", lambda u, k: auth_api.DeleteCredentialsRequest(user_id=u, access_key_id=k), True
    ),
    a.CREATE_USER_EXTERNAL_PRINCIPAL: _on_victim(
        "CreateUserExternalPrincipal",
        lambda u, _: auth_api.CreateUserExternalPrincipalRequest(user_id=u, principal_id=unique("role")),
    ),
    a.DELETE_USER_EXTERNAL_PRINCIPAL: _unlink_principal,
    a.READ_EXTERNAL_PRINCIPAL: _read_principal,
    a.AUTHORIZE: _on_victim(
        "Authorize", lambda u, _: auth_api.AuthorizeRequest(user_id=u, action=a.READ_REPO, resource="some-repo")
    ),
    a.VERIFY_SIGNATURE: _verify_signature,
    a.ACT_FOR_USER: _act_for_user,
    a.RECORD_EVENTS: _record_events,
}

GROUPS = [*PRESET_GROUPS, NO_GROUP]


@pytest.fixture(scope="module")
def members(stack: Stack) -> dict[str, Credentials]:
    """One user per preset group (and one in none), with a key."""
    return {
        group: stack.new_user([] if group == NO_GROUP else [group], prefix=group.lower().strip("()").replace(" ", "-"))[
            1
        ]
        for group in GROUPS
    }


def test_every_action_has_a_probe_and_an_expectation() -> None:
    # Object, branch and catalog actions are probed through the edges (tests/e2e/api/
    # test_object_policies.py, test_branch_policies.py, tests/e2e/iceberg/test_catalog_grants.py)
    # and decided below.
    edges = {*a.OBJECT_ACTIONS, *a.BRANCH_ACTIONS, *a.CATALOG_ACTIONS, a.READ_REFS}
    assert set(PROBES) == set(a.ALL_ACTIONS) - edges
    assert set(EXPECTED) == set(GROUPS)


@pytest.mark.parametrize("action", sorted(PROBES))
@pytest.mark.parametrize("group", GROUPS)
def test_group_action_matrix(stack: Stack, members: dict[str, Credentials], group: str, action: str) -> None:
    call = PROBES[action](stack, members[group])
    if action in EXPECTED[group]:
        assert code_of(call) == grpc.StatusCode.OK
    else:
        assert code_of(call) == grpc.StatusCode.PERMISSION_DENIED
        assert action in details_of(call)


@pytest.mark.parametrize("group", GROUPS)
def test_authorize_answers_the_same_matrix(stack: Stack, members: dict[str, Credentials], group: str) -> None:
    """The decision API agrees with enforcement, for every action, on repositories and IAM resources."""
    me = stack.auth(members[group]).WhoAmI(auth_api.WhoAmIRequest()).user.id
    admin = stack.auth(stack.admin)
    for action in a.ALL_ACTIONS:
        on_repository = action in (*a.REPO_ACTIONS, *a.REPO_ADMIN_ACTIONS, a.READ_REFS)
        resource = "some-repo" if on_repository else a.user_resource("someone")
        if action in a.OBJECT_ACTIONS:
            resource = a.object_resource("some-repo", "raw/a")
        if action in a.BRANCH_ACTIONS:
            resource = a.branch_resource("some-repo", "dev")
        if action in a.CATALOG_ACTIONS:
            resource = a.catalog_table_resource("some-repo", "sales", "orders")
        reply = admin.Authorize(auth_api.AuthorizeRequest(user_id=me, action=action, resource=resource))
        assert reply.allowed == (action in EXPECTED[group]), (group, action)


@pytest.mark.parametrize("group", GROUPS)
def test_key_scopes_follow_the_matrix(stack: Stack, members: dict[str, Credentials], group: str) -> None:
    """A preset group's object actions are whole repositories (no per-key work at the edges) or
    nothing, as its repository actions are."""
    me = stack.auth(members[group]).WhoAmI(auth_api.WhoAmIRequest()).user.id
    for action in a.OBJECT_ACTIONS:
        reply = stack.auth(stack.admin).AuthorizeKeys(
            auth_api.AuthorizeKeysRequest(user_id=me, action=action, repository="some-repo")
        )
        held = action in EXPECTED[group]
        assert (reply.every_key, list(reply.allow), list(reply.deny)) == (held, [], []), (group, action)


def test_object_scoped_policies_in_the_matrix(stack: Stack) -> None:
    """A user with object-scoped statements only: its key scope, and the same decisions through
    Authorize, key by key; a Deny of a repository action wins over any object Allow."""
    admin = stack.auth(stack.admin)
    user_id, creds = stack.new_user(prefix="objects")
    policy_id = unique("objects")
    statements = [
        pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_OBJECT], resources=["weather/raw/*"]),
        pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.WRITE_OBJECT], resources=["weather/raw/day=??/*"]),
        pb.Statement(effect=pb.EFFECT_DENY, actions=[a.READ_OBJECT], resources=["weather/raw/secret*"]),
        pb.Statement(effect=pb.EFFECT_DENY, actions=[a.WRITE_REPO], resources=["sealed"]),
        pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.WRITE_OBJECT], resources=["sealed/*"]),
        pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REFS], resources=["weather", "hidden"]),
        pb.Statement(effect=pb.EFFECT_DENY, actions=[a.READ_REPO], resources=["hidden"]),
    ]
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=statements))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    me = stack.auth(creds)  # about oneself, no auth:Authorize needed
    scope = me.AuthorizeKeys(auth_api.AuthorizeKeysRequest(action=a.READ_OBJECT, repository="weather"))
    assert (scope.every_key, list(scope.allow), list(scope.deny)) == (False, ["weather/raw/*"], ["weather/raw/secret*"])
    cases = [
        (a.READ_OBJECT, "weather/raw/a", True),
        (a.READ_OBJECT, "weather/raw/secret.txt", False),
        (a.READ_OBJECT, "weather/gold/b", False),
        (a.READ_OBJECT, "other/raw/a", False),
        (a.WRITE_OBJECT, "weather/raw/day=01/x", True),
        (a.WRITE_OBJECT, "weather/raw/day=001/x", False),
        (a.DELETE_OBJECT, "weather/raw/a", False),
        (a.WRITE_OBJECT, "sealed/x", False),
        (a.READ_REPO, "weather", False),
        (a.READ_REFS, "weather", True),
        (a.READ_REFS, "hidden", False),  # a Deny of ReadRepo takes ReadRefs
        (a.READ_REFS, "other", False),
    ]
    for action, resource, allowed in cases:
        reply = me.Authorize(auth_api.AuthorizeRequest(action=action, resource=resource))
        assert reply.allowed == allowed, (action, resource)
    nothing = me.AuthorizeKeys(auth_api.AuthorizeKeysRequest(action=a.WRITE_OBJECT, repository="sealed"))
    assert (nothing.every_key, list(nothing.allow)) == (False, [])
    with pytest.raises(grpc.RpcError) as refused:
        me.AuthorizeKeys(auth_api.AuthorizeKeysRequest(action=a.READ_REPO, repository="weather"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_graveler_reads_and_writes_entries_only_for_every_key(stack: Stack) -> None:
    """A ReadRepo / WriteRepo holder narrowed by an object Deny is refused graveler's calls that
    read or change entries by key (it goes through the edges, which check each key); without
    the Deny the same user is served."""
    repo = stack.new_repo()
    admin = stack.auth(stack.admin)
    user_id, creds = stack.new_user(prefix="narrowed")
    policy_id = unique("narrowed")
    statements = [
        pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO, a.WRITE_REPO], resources=[repo]),
        pb.Statement(effect=pb.EFFECT_DENY, actions=[a.READ_OBJECT, a.WRITE_OBJECT], resources=[f"{repo}/gold/*"]),
    ]
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=statements))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    calls = {
        "ListEntries": lambda: stack.gv(creds).ListEntries(api.ListEntriesRequest(repository=repo, ref="main")),
        "StatEntry": lambda: stack.gv(creds).StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="x")),
        "DiffBranch": lambda: stack.gv(creds).DiffBranch(api.DiffBranchRequest(repository=repo, branch="main")),
    }
    for name, call in calls.items():
        assert code_of(call) == grpc.StatusCode.PERMISSION_DENIED, name
        assert "every key" in details_of(call), name
    # What names no key is served as before.
    assert code_of(lambda: stack.gv(creds).ListBranches(api.ListBranchesRequest(repository=repo))) == grpc.StatusCode.OK
    admin.DetachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    whole = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=[repo])
    whole_id = unique("whole")
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=whole_id, statements=[whole]))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=whole_id, user_id=user_id))
    stack.pass_cache_ttl()  # graveler's cached decisions expire
    for name, call in calls.items():
        assert code_of(call) != grpc.StatusCode.PERMISSION_DENIED, (name, details_of(call))


def test_graveler_checks_the_keys_a_merge_changes_for_a_direct_caller(stack: Stack) -> None:
    """Over gRPC, without the REST API: a WriteRepo holder with an object Deny merging a branch
    that changed a denied key is refused (PERMISSION_DENIED with KeysRefused's detail), nothing
    merged; a merge of allowed keys only goes through; no Deny, no check."""
    repo = stack.new_repo()
    admin = stack.gv(stack.admin)
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"))
    for key in ("open/a", "gold/b"):
        entry = gpb.Entry(physical_address=f"data/{key}", size=1, etag=key)
        admin.StageEntry(api.StageEntryRequest(repository=repo, branch="dev", key=key, entry=entry))
    admin.Commit(api.CommitRequest(repository=repo, branch="dev", message="both"))
    user_id, creds = stack.new_user(prefix="merger")
    policy_id = unique("merger")
    statements = [
        pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO, a.WRITE_REPO], resources=[repo]),
        pb.Statement(effect=pb.EFFECT_DENY, actions=[a.WRITE_OBJECT], resources=[f"{repo}/gold/*"]),
    ]
    stack.auth(stack.admin).CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=statements))
    stack.auth(stack.admin).AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    merge = api.MergeRequest(repository=repo, source_ref="dev", destination_branch="main")
    head = admin.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    with pytest.raises(grpc.RpcError) as refused:
        stack.gv(creds).Merge(merge)
    assert isinstance(error_from_rpc(refused.value), KeysRefused)
    assert refused.value.details() == (
        f"user {user_id} may not WriteObject on {repo}/gold/b, which merging would change"
    )
    assert admin.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id == head
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="fine", source_ref="main"))
    entry = gpb.Entry(physical_address="data/open/c", size=1, etag="c")
    admin.StageEntry(api.StageEntryRequest(repository=repo, branch="fine", key="open/c", entry=entry))
    admin.Commit(api.CommitRequest(repository=repo, branch="fine", message="open only"))
    fine = api.MergeRequest(repository=repo, source_ref="fine", destination_branch="main")
    assert stack.gv(creds).Merge(fine).commit.id
