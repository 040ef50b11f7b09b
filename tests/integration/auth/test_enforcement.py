"""Authentication and authorization as callers meet them, through real gRPC servers."""

from __future__ import annotations

import secrets
import time

import grpc
import pytest
from google.protobuf.message import Message
from pydantic import SecretStr

from services.auth.setup import ANALYSTS, DEVELOPERS
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as pb
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as gpb
from silt.rpc.signing import (
    ACCESS_KEY_HEADER,
    DATE_HEADER,
    NONCE_HEADER,
    SCOPE_HEADER,
    SIGNATURE_HEADER,
    Credentials,
    day_of,
    derive_call_key,
    payload_digest,
    sign,
)
from tests.integration.auth.support import Stack, code_of, details_of, unique

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED
OK = grpc.StatusCode.OK


def _get_repo(stack: Stack, creds: Credentials | None, repo: str) -> object:
    return lambda: stack.gv(creds).GetRepository(api.GetRepositoryRequest(name=repo))


# --- authentication --------------------------------------------------------------------------


def test_missing_credentials_never_reach_a_handler(stack: Stack) -> None:
    name = unique("sneaky")
    create = api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}")
    assert code_of(lambda: stack.gv(None).CreateRepository(create)) == UNAUTHENTICATED
    assert "missing credentials" in details_of(lambda: stack.gv(None).CreateRepository(create))
    assert code_of(lambda: stack.auth(None).WhoAmI(auth_api.WhoAmIRequest())) == UNAUTHENTICATED
    assert code_of(lambda: stack.auth(None).CreateUser(auth_api.CreateUserRequest(id=unique("u")))) == UNAUTHENTICATED
    # Nothing was created: the handler did not run.
    assert code_of(_get_repo(stack, stack.admin, name)) == grpc.StatusCode.NOT_FOUND


def test_wrong_secret_and_unknown_key(stack: Stack) -> None:
    repo = stack.new_repo()
    _, creds = stack.new_user([ANALYSTS])
    wrong_secret = Credentials(creds.access_key_id, SecretStr("x" * 40))
    unknown_key = Credentials("AKIAUNKNOWNUNKNOWN23", creds.secret_access_key)
    malformed_key = Credentials("not-a-key", creds.secret_access_key)
    assert code_of(_get_repo(stack, creds, repo)) == OK
    assert code_of(_get_repo(stack, wrong_secret, repo)) == UNAUTHENTICATED
    assert "signature does not match" in details_of(_get_repo(stack, wrong_secret, repo))
    assert code_of(_get_repo(stack, unknown_key, repo)) == UNAUTHENTICATED
    assert "unknown access key" in details_of(_get_repo(stack, unknown_key, repo))
    assert code_of(_get_repo(stack, malformed_key, repo)) == UNAUTHENTICATED
    for bad in (wrong_secret, unknown_key):
        assert code_of(lambda b=bad: stack.auth(b).WhoAmI(auth_api.WhoAmIRequest())) == UNAUTHENTICATED


def _raw_call(stack: Stack, metadata: list[tuple[str, str]], request: api.GetRepositoryRequest) -> object:
    stub = api_grpc.GravelerServiceStub(stack._channel(stack.graveler_address, None))
    return lambda: stub.GetRepository(request, metadata=tuple(metadata))


def test_signature_binds_method_request_and_time(stack: Stack) -> None:
    repo, other = stack.new_repo(), stack.new_repo()
    creds = stack.admin
    method = "/silt.graveler.v1.GravelerService/GetRepository"
    signed_for = api.GetRepositoryRequest(name=repo)

    def headers(
        date: int, request: Message = signed_for, signed_method: str = method, audience: str = "graveler"
    ) -> list[tuple[str, str]]:
        scope, nonce = f"{day_of(date)}/{audience}", secrets.token_hex(16)
        key = derive_call_key(creds.secret_access_key, day_of(date), audience)
        signature = sign(key, str(date), scope, nonce, signed_method, creds.access_key_id, payload_digest(request))
        return [
            (ACCESS_KEY_HEADER, creds.access_key_id),
            (DATE_HEADER, str(date)),
            (SCOPE_HEADER, scope),
            (NONCE_HEADER, nonce),
            (SIGNATURE_HEADER, signature),
        ]

    now = int(time.time())
    assert code_of(_raw_call(stack, headers(now), signed_for)) == OK
    # Replayed with another request, another method, another audience, or long after: refused.
    assert code_of(_raw_call(stack, headers(now), api.GetRepositoryRequest(name=other))) == UNAUTHENTICATED
    other_method = "/silt.graveler.v1.GravelerService/DeleteRepository"
    assert code_of(_raw_call(stack, headers(now, signed_method=other_method), signed_for)) == UNAUTHENTICATED
    assert code_of(_raw_call(stack, headers(now, audience="auth"), signed_for)) == UNAUTHENTICATED
    stale = _raw_call(stack, headers(now - 3600), signed_for)
    assert code_of(stale) == UNAUTHENTICATED
    assert "away from the server's clock" in details_of(stale)
    garbled = [(name, "yesterday" if name == DATE_HEADER else value) for name, value in headers(now)]
    assert code_of(_raw_call(stack, garbled, signed_for)) == UNAUTHENTICATED
    # The very same call, sent twice: the second is a replay.
    once = headers(now)
    assert code_of(_raw_call(stack, once, signed_for)) == OK
    replayed = _raw_call(stack, once, signed_for)
    assert code_of(replayed) == UNAUTHENTICATED
    assert "replayed" in details_of(replayed)


def test_deleted_credentials_stop_working_within_the_cache_time(stack: Stack) -> None:
    repo = stack.new_repo()
    user_id, creds = stack.new_user([ANALYSTS])
    spare = stack.new_key(user_id)
    assert code_of(_get_repo(stack, creds, repo)) == OK
    stack.auth(stack.admin).DeleteCredentials(
        auth_api.DeleteCredentialsRequest(user_id=user_id, access_key_id=creds.access_key_id)
    )
    stack.pass_cache_ttl()
    assert code_of(_get_repo(stack, creds, repo)) == UNAUTHENTICATED
    assert code_of(lambda: stack.auth(creds).WhoAmI(auth_api.WhoAmIRequest())) == UNAUTHENTICATED
    assert code_of(_get_repo(stack, spare, repo)) == OK


def test_deleted_user_is_locked_out(stack: Stack) -> None:
    repo = stack.new_repo()
    user_id, creds = stack.new_user([DEVELOPERS])
    assert code_of(_get_repo(stack, creds, repo)) == OK
    stack.auth(stack.admin).DeleteUser(auth_api.DeleteUserRequest(id=user_id))
    stack.pass_cache_ttl()
    assert code_of(_get_repo(stack, creds, repo)) == UNAUTHENTICATED


def test_services_use_their_own_credentials(stack: Stack) -> None:
    """Graveler authenticates to auth with its service key: revoke it and graveler cannot check anyone."""
    repo = stack.new_repo()
    _, creds = stack.new_user([ANALYSTS])
    assert code_of(_get_repo(stack, creds, repo)) == OK
    me = stack.auth(stack.services["graveler"]).WhoAmI(auth_api.WhoAmIRequest()).user.id
    assert me == "svc-graveler"
    # In the model: the API refuses it, setup adding it back at every start (services/auth/setup.py).
    membership = auth_api.GroupMemberRequest(group_id="Services", user_id="svc-graveler")
    assert code_of(lambda: stack.auth(stack.admin).RemoveGroupMember(membership)) == grpc.StatusCode.FAILED_PRECONDITION
    stack.model.remove_member(membership.group_id, membership.user_id)
    try:
        stack.pass_cache_ttl()
        _, newcomer = stack.new_user([ANALYSTS])  # not in graveler's caches yet
        assert code_of(_get_repo(stack, newcomer, repo)) == grpc.StatusCode.UNAVAILABLE
    finally:
        stack.model.add_member(membership.group_id, membership.user_id)
        stack.pass_cache_ttl()


# --- authorization ---------------------------------------------------------------------------


def test_denial_names_action_and_resource(stack: Stack) -> None:
    repo = stack.new_repo()
    _, creds = stack.new_user([ANALYSTS])
    commit = api.CommitRequest(repository=repo, branch="main", message="m", allow_empty=True)
    message = details_of(lambda: stack.gv(creds).Commit(commit))
    assert a.WRITE_REPO in message
    assert repo in message


def test_explicit_deny_overrides_allow(stack: Stack) -> None:
    prod, dev = stack.new_repo("prod"), stack.new_repo("dev")
    user_id, creds = stack.new_user([DEVELOPERS])
    admin = stack.auth(stack.admin)
    policy_id = unique("no-prod-writes")
    deny = pb.Statement(effect=pb.EFFECT_DENY, actions=[a.WRITE_REPO], resources=["prod-*"])
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[deny]))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))

    def write(repo: str) -> object:
        branch = unique("b")
        return lambda: stack.gv(creds).CreateBranch(
            api.CreateBranchRequest(repository=repo, name=branch, source_ref="main")
        )

    assert code_of(write(dev)) == OK
    assert code_of(write(prod)) == DENIED
    assert code_of(_get_repo(stack, creds, prod)) == OK  # the deny names WriteRepo only
    # Deny wins even over an explicit allow naming the very repository.
    allow = pb.Statement(effect=pb.EFFECT_ALLOW, actions=["*"], resources=[prod])
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id + "-allow", statements=[allow]))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id + "-allow", user_id=user_id))
    stack.pass_cache_ttl()
    assert code_of(write(prod)) == DENIED


def test_removed_from_group_loses_access_after_cache_time(stack: Stack) -> None:
    repo = stack.new_repo()
    user_id, creds = stack.new_user([DEVELOPERS])
    stage = api.StageEntryRequest(repository=repo, branch="main", key="k", entry=gpb.Entry(physical_address="x"))
    assert code_of(lambda: stack.gv(creds).StageEntry(stage)) == OK
    stack.auth(stack.admin).RemoveGroupMember(auth_api.GroupMemberRequest(group_id=DEVELOPERS, user_id=user_id))
    stack.pass_cache_ttl()
    assert code_of(lambda: stack.gv(creds).StageEntry(stage)) == DENIED
    assert code_of(_get_repo(stack, creds, repo)) == DENIED


def test_policy_change_takes_effect_within_cache_time(stack: Stack) -> None:
    repo = stack.new_repo("late")
    user_id, creds = stack.new_user()
    assert code_of(_get_repo(stack, creds, repo)) == DENIED
    stack.auth(stack.admin).AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id="RepoReadAll", user_id=user_id))
    stack.pass_cache_ttl()
    assert code_of(_get_repo(stack, creds, repo)) == OK


def test_list_repositories_shows_only_readable_ones(stack: Stack) -> None:
    team = unique("team")
    mine = sorted(stack.new_repo(f"{team}-a") for _ in range(5))
    theirs = [stack.new_repo(f"{team}-b") for _ in range(4)]
    user_id, creds = stack.new_user()
    admin = stack.auth(stack.admin)
    read_mine = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=[f"{team}-a-*"])
    policy_id = unique("team-a")
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[read_mine]))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))

    seen: list[str] = []
    after = ""
    while True:
        page = stack.gv(creds).ListRepositories(api.ListRepositoriesRequest(after=after, amount=2))
        assert len(page.repositories) <= 2
        seen.extend(r.name for r in page.repositories)
        if not page.has_more:
            break
        assert page.repositories, "a page claiming more must move the cursor"
        after = page.repositories[-1].name
    assert seen == mine
    assert not set(theirs) & set(seen)
    everything = stack.gv(stack.admin).ListRepositories(api.ListRepositoriesRequest(amount=1000)).repositories
    assert set(mine + theirs) <= {r.name for r in everything}


def test_users_may_read_about_themselves_only(stack: Stack) -> None:
    user_id, creds = stack.new_user([ANALYSTS])
    other_id, _ = stack.new_user()
    me = stack.auth(creds)
    assert me.WhoAmI(auth_api.WhoAmIRequest()).user.id == user_id
    assert me.GetUser(auth_api.GetUserRequest(id=user_id)).id == user_id
    assert me.GetUser(auth_api.GetUserRequest()).id == user_id
    assert [g.id for g in me.ListUserGroups(auth_api.ListUserGroupsRequest()).groups] == [ANALYSTS]
    assert [p.id for p in me.ListUserPolicies(auth_api.ListUserPoliciesRequest(effective=True)).policies] == [
        "RepoReadAll"
    ]
    keys = me.ListCredentials(auth_api.ListCredentialsRequest()).credentials
    assert [k.access_key_id for k in keys] == [creds.access_key_id]
    assert me.Authorize(auth_api.AuthorizeRequest(action=a.READ_REPO, resource="any")).allowed
    for call in (
        lambda: me.GetUser(auth_api.GetUserRequest(id=other_id)),
        lambda: me.ListCredentials(auth_api.ListCredentialsRequest(user_id=other_id)),
        lambda: me.Authorize(auth_api.AuthorizeRequest(user_id=other_id, action=a.READ_REPO, resource="x")),
        lambda: me.ListUsers(auth_api.ListUsersRequest()),
        lambda: me.CreateCredentials(auth_api.CreateCredentialsRequest(user_id=user_id)),
    ):
        assert code_of(call) == DENIED


def test_delegated_admin_cannot_attach_policies_it_was_not_given(stack: Stack) -> None:
    admin = stack.auth(stack.admin)
    delegate_id, delegate = stack.new_user(prefix="delegate")
    policy_id = unique("attach-read-only")
    grant = pb.Statement(
        effect=pb.EFFECT_ALLOW, actions=[a.ATTACH_POLICY], resources=["users/*", "policies/RepoReadAll"]
    )
    # What RepoReadAll gives, the delegate holds itself (services/auth/grants.py).
    reads = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=["*"])
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[grant, reads]))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=delegate_id))
    me = stack.auth(delegate)

    def attach(policy: str) -> object:
        return lambda: me.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy, user_id=delegate_id))

    assert code_of(attach("RepoReadAll")) == OK
    assert code_of(attach("FullAccess")) == DENIED
    assert "policies/FullAccess" in details_of(attach("FullAccess"))


@pytest.mark.parametrize("action", ["NoSuchAction", "Read*"])
def test_authorize_wants_a_concrete_action(stack: Stack, action: str) -> None:
    call = lambda: stack.auth(stack.admin).Authorize(auth_api.AuthorizeRequest(action=action, resource="x"))  # noqa: E731
    assert code_of(call) == grpc.StatusCode.INVALID_ARGUMENT


def test_commits_are_by_the_authenticated_caller(stack: Stack) -> None:
    user, creds = stack.new_user(groups=["Developers"], prefix="author")
    repo = stack.new_repo("authored")
    graveler = stack.gv(creds)
    entry = gpb.Entry(etag="e", physical_address="data/k")
    graveler.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="k", entry=entry))
    commit = graveler.Commit(api.CommitRequest(repository=repo, branch="main", message="mine"))
    assert commit.committer == user


def test_a_requested_committer_is_ignored_unless_the_caller_may_act_for_them(stack: Stack) -> None:
    """Commit(committer="admin") by a non-admin is recorded as by the caller, with no trace of
    the name; the REST API's service user (auth:ActForUser) commits as the user it names."""
    user, creds = stack.new_user(groups=["Developers"], prefix="spoofer")
    repo = stack.new_repo("spoofed")
    graveler = stack.gv(creds)
    entry = gpb.Entry(etag="e", physical_address="data/k")
    graveler.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="k", entry=entry))
    commit = graveler.Commit(api.CommitRequest(repository=repo, branch="main", message="x", committer="admin"))
    assert commit.committer == user and "silt.requested-committer" not in commit.metadata
    logged = graveler.Log(api.LogRequest(repository=repo, ref="main", amount=1)).commits[0]
    assert logged.committer == user and "silt.requested-committer" not in logged.metadata
    service = stack.gv(stack.services["api"])
    service.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="k2", entry=entry))
    made_for = service.Commit(api.CommitRequest(repository=repo, branch="main", message="y", committer=user))
    assert made_for.committer == user and "silt.requested-committer" not in made_for.metadata


def test_entries_cannot_name_another_repositorys_bytes(stack: Stack) -> None:
    """StageEntry with an address outside the namespace is INVALID_ARGUMENT."""
    _, creds = stack.new_user(groups=["Developers"], prefix="linker")
    repo, victim = stack.new_repo("linker"), stack.new_repo("victim")
    graveler = stack.gv(creds)
    for address in (f"local://{victim}/data/x", f"local://{repo}/../{victim}/data/x", f"local://{repo}-x/data/x"):
        entry = gpb.Entry(etag="e", physical_address=address)
        call = lambda e=entry: graveler.StageEntry(  # noqa: E731
            api.StageEntryRequest(repository=repo, branch="main", key="k", entry=e)
        )
        assert code_of(call) == grpc.StatusCode.INVALID_ARGUMENT
        assert "outside the repository's storage namespace" in details_of(call) or ".." in details_of(call)
