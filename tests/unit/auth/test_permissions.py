"""Every method of every service has a rule, and the rules say what docs/design/auth.md says."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from services.auth.permissions import RULES as AUTH_RULES
from services.graveler.permissions import (
    BRANCH_TABLE,
    EVERY_KEY,
    TABLE,
    list_readable_repositories,
    runs_narrowed_to_outputs_allowed,
)
from services.graveler.permissions import RULES as GRAVELER_RULES
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2
from silt.errors import PermissionDenied
from silt.graveler.v1 import events_pb2
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.rpc.interceptor import Authenticated, MayFn, Narrowed, Require


def methods(module: object, service: str) -> set[str]:
    descriptor = module.DESCRIPTOR.services_by_name[service]  # type: ignore[attr-defined]
    return {f"/{descriptor.full_name}/{m.name}" for m in descriptor.methods}


def test_every_graveler_method_has_a_rule() -> None:
    assert set(GRAVELER_RULES) == methods(api, "GravelerService")


def test_every_auth_method_has_a_rule() -> None:
    assert set(AUTH_RULES) == methods(auth_pb2, "AuthService")
    assert isinstance(AUTH_RULES["/silt.auth.v1.AuthService/WhoAmI"], Authenticated)
    open_ones = [m for m, r in AUTH_RULES.items() if not isinstance(r, Require)]
    assert open_ones == ["/silt.auth.v1.AuthService/WhoAmI"]


WRITES = {
    "StageEntry",
    "StageEntries",
    "StageEntriesIf",
    "DeleteEntry",
    "DeleteEntries",
    "Commit",
    "CreateBranch",
    "DeleteBranch",
    "CreateTag",
    "DeleteTag",
    "Merge",
    "Revert",
    "CherryPick",
    "ResetBranch",
    "UpdateRepositoryMetadata",
    # Proposing, discussing and merging changes is writing; protection decides merges, not RBAC.
    "CreatePullRequest",
    "UpdatePullRequest",
    "MergePullRequest",
    "AddPullRequestComment",
    "SubmitPullRequestReview",
    # Re-running a check runs the repository's hooks again: a writer's act, like pushing.
    "RerunPullRequestCheck",
    # An import is one commit on the branch, as lakeFS requires of it (fs:Import... are WriteRepo's).
    "StartImport",
    "CancelImport",
    # Recording ref-neutral keys (a table merge's new files) is writing them.
    "RecordNeutralEntries",
}
# Destructive administration: its own actions, not WriteRepo (writers must not hold them).
ADMINISTRATION = {
    "DumpRefs": a.DUMP_REFS,
    "RestoreRefs": a.RESTORE_REFS,
    # The same in the background: starting one and reading its status need the same action.
    "StartDump": a.DUMP_REFS,
    "GetDumpStatus": a.DUMP_REFS,
    "StartRestore": a.RESTORE_REFS,
    "GetRestoreStatus": a.RESTORE_REFS,
    # A commit record as given (any committer, any parents): a restore's tool.
    "CreateCommitRecord": a.RESTORE_REFS,
    "SetGCRules": a.SET_GC_RULES,
    "DeleteGCRules": a.DELETE_GC_RULES,
    "PrepareGC": a.PREPARE_GC,
    # Expiry by last access deletes what the GC rules say, with a GC run's authority.
    "PrepareLastAccess": a.PREPARE_GC,
    "ExpireEntries": a.PREPARE_GC,
    # lakeFS's GC client's preparation: the same export (its status too: it names the run's files).
    "StartPrepareGC": a.PREPARE_GC,
    "GetPrepareGCTask": a.PREPARE_GC,
    "PrepareGCUncommitted": a.PREPARE_GC,
    "SetBranchProtection": a.SET_BRANCH_PROTECTION,
}


@pytest.mark.parametrize("method", sorted(TABLE))
def test_graveler_actions_follow_the_rbac_design(method: str) -> None:
    action, field_name = TABLE[method]
    expected = {"CreateRepository": a.CREATE_REPO, "DeleteRepository": a.DELETE_REPO, **ADMINISTRATION}.get(
        method, a.WRITE_REPO if method in WRITES else a.READ_REPO
    )
    assert action == expected
    # History events' requests live beside the event (events.proto), the rest in graveler.proto.
    request_type = getattr(api, f"{method}Request", None) or getattr(events_pb2, f"{method}Request")
    assert field_name in request_type.DESCRIPTOR.fields_by_name
    rule = GRAVELER_RULES[f"/silt.graveler.v1.GravelerService/{method}"]
    if method == "Commit" or method in EVERY_KEY or method in BRANCH_TABLE:
        # Commit: the table's action, and RestoreRefs for a recorded commit; entries by key:
        # test_entries_by_key_need_every_key; one branch: test_branch_calls_need_the_branch_action
        assert isinstance(rule, Narrowed)
        return
    assert isinstance(rule, Require)
    assert rule.resource(request_type(**{field_name: "the-repo"})) == "the-repo"


@pytest.mark.parametrize("recorded", [False, True])
def test_a_recorded_commit_needs_restore_refs_beside_write(recorded: bool) -> None:
    rule = GRAVELER_RULES["/silt.graveler.v1.GravelerService/Commit"]
    assert isinstance(rule, Narrowed)
    request = api.CommitRequest(repository="the-repo", branch="main", message="m")
    if recorded:
        request.recorded.creation_date.seconds = 1
    asked: list[tuple[str, list[str]]] = []

    def may_write_only(action: str, resources: Sequence[str]) -> list[bool]:
        asked.append((action, list(resources)))
        return [action in (a.WRITE_REPO, a.COMMIT_BRANCH) for _ in resources]

    def call(_: object) -> str:
        return "committed"

    if recorded:
        with pytest.raises(PermissionDenied, match=a.RESTORE_REFS):
            rule.narrow(call, request, may_write_only)
        assert asked == [(a.WRITE_REPO, ["the-repo"]), (a.RESTORE_REFS, ["the-repo"])]
    else:
        assert rule.narrow(call, request, may_write_only) == "committed"
        assert asked == [(a.WRITE_REPO, ["the-repo"]), (a.COMMIT_BRANCH, ["the-repo@main"])]


@pytest.mark.parametrize("method", sorted(EVERY_KEY))
def test_entries_by_key_need_every_key(method: str) -> None:
    """Calls that read or change entries by key need the table's action and the object action
    on every key of the repository (a bare repository name): a caller an object Deny narrows is
    refused, whatever its repository action."""
    action, field_name = TABLE[method]
    object_action, _ = EVERY_KEY[method]
    request_type = getattr(api, f"{method}Request", None) or getattr(events_pb2, f"{method}Request")
    request = request_type(**{field_name: "the-repo"})
    if method == "Log":
        request.objects.append("gold/b")  # only a log filtered by path tells of keys
    # Staged changes are on a branch: WriteBranch there too (test_branch_calls_need_the_branch_action).
    on_branch = [BRANCH_TABLE[method][0]] if method in BRANCH_TABLE else []
    if on_branch:
        setattr(request, BRANCH_TABLE[method][1], "main")
    rule = GRAVELER_RULES[f"/silt.graveler.v1.GravelerService/{method}"]
    assert isinstance(rule, Narrowed)
    asked: list[tuple[str, list[str]]] = []

    def may(held: set[str]) -> Callable[[str, Sequence[str]], list[bool]]:
        def answer(wanted: str, resources: Sequence[str]) -> list[bool]:
            asked.append((wanted, list(resources)))
            return [wanted in held for _ in resources]

        return answer

    assert rule.narrow(lambda r: "called", request, may({action, object_action, *on_branch})) == "called"
    assert asked == [(action, ["the-repo"]), (object_action, ["the-repo"])] + [
        (x, ["the-repo@main"]) for x in on_branch
    ]
    for held in ({action, *on_branch}, {object_action, *on_branch}):
        with pytest.raises(PermissionDenied):
            rule.narrow(lambda r: pytest.fail("must not be called"), request, may(held))


@pytest.mark.parametrize("method", sorted(BRANCH_TABLE))
def test_branch_calls_need_the_branch_action(method: str) -> None:
    """Calls on one branch need the table's action on the repository and the branch action on
    `<repository>@<branch>`: a Deny on the branch refuses them whatever the repository action."""
    branch_action, branch_field = BRANCH_TABLE[method]
    action, repository_field = TABLE[method]
    request = getattr(api, f"{method}Request")(**{repository_field: "the-repo", branch_field: "dev"})
    rule = GRAVELER_RULES[f"/silt.graveler.v1.GravelerService/{method}"]
    assert isinstance(rule, Narrowed)
    every_key = [EVERY_KEY[method][0]] if method in EVERY_KEY else []

    def may(held: set[str]) -> MayFn:
        return lambda wanted, resources: [wanted in held for _ in resources]

    assert rule.narrow(lambda r: "called", request, may({action, branch_action, *every_key})) == "called"
    with pytest.raises(PermissionDenied, match=f"{branch_action} on 'the-repo@dev'"):
        rule.narrow(lambda r: pytest.fail("must not be called"), request, may({action, *every_key}))
    with pytest.raises(PermissionDenied):
        rule.narrow(lambda r: pytest.fail("must not be called"), request, may({branch_action, *every_key}))


def test_list_repositories_is_narrowed() -> None:
    assert isinstance(GRAVELER_RULES["/silt.graveler.v1.GravelerService/ListRepositories"], Narrowed)


ALL = [f"r{i:02d}" for i in range(20)]


def fake_listing(request: api.ListRepositoriesRequest) -> api.ListRepositoriesResponse:
    rest = [n for n in ALL if n > request.after]
    page = rest[: request.amount]
    return api.ListRepositoriesResponse(
        repositories=[api.RepositoryInfo(name=n) for n in page], has_more=len(rest) > len(page)
    )


def paginate(readable: set[str], amount: int) -> list[list[str]]:
    def may(action: str, names: Sequence[str]) -> list[bool]:
        assert action == a.READ_REPO
        return [n in readable for n in names]

    pages, after = [], ""
    while True:
        reply = list_readable_repositories(fake_listing, api.ListRepositoriesRequest(after=after, amount=amount), may)
        pages.append([r.name for r in reply.repositories])
        if not reply.has_more:
            return pages
        after = reply.repositories[-1].name


def test_narrowed_listing_fills_pages_and_moves_forward() -> None:
    readable = {"r01", "r07", "r08", "r13", "r19"}
    assert paginate(readable, 2) == [["r01", "r07"], ["r08", "r13"], ["r19"]]
    assert paginate(set(ALL), 7) == [ALL[:7], ALL[7:14], ALL[14:]]
    assert paginate(set(), 3) == [[]]
    assert [name for page in paginate(readable, 0) for name in page] == sorted(readable)


def test_action_runs_show_hook_outputs_only_to_holders_of_read_action_output() -> None:
    for method in ("ListActionRuns", "GetActionRun"):
        assert isinstance(GRAVELER_RULES[f"/silt.graveler.v1.GravelerService/{method}"], Narrowed)
    stored = pb.ActionRun(run_id="r1", failed=True)
    stored.hooks.add(
        hook_run_id="0000_0000", failed=True, error="webhook answered 500", output="HTTP/1.1 500\n\nsecret"
    )

    def get(request: api.GetActionRunRequest) -> pb.ActionRun:
        copy = pb.ActionRun()
        copy.CopyFrom(stored)
        return copy

    def listing(request: api.ListActionRunsRequest) -> api.ListActionRunsResponse:
        return api.ListActionRunsResponse(runs=[get(api.GetActionRunRequest())])

    def holding(*held: str) -> MayFn:
        return lambda action, names: [action in held for _ in names]

    get_request = api.GetActionRunRequest(repository="repo", run_id="r1")
    list_request = api.ListActionRunsRequest(repository="repo")
    full = runs_narrowed_to_outputs_allowed(get, get_request, holding(a.READ_REPO, a.READ_ACTION_OUTPUT))
    assert full.hooks[0].output.endswith("secret")
    for reply in (
        runs_narrowed_to_outputs_allowed(get, get_request, holding(a.READ_REPO)),
        runs_narrowed_to_outputs_allowed(listing, list_request, holding(a.READ_REPO)).runs[0],
    ):
        [hook] = reply.hooks
        assert hook.output == "" and hook.failed and hook.error == "webhook answered 500"
    with pytest.raises(PermissionDenied, match=a.READ_REPO):
        runs_narrowed_to_outputs_allowed(get, get_request, holding(a.READ_ACTION_OUTPUT))
