"""What each GravelerService call needs: a repository action (docs/design/auth.md) on the repository it names.

Reading and writing need ReadRepo and WriteRepo; GC rules and runs, refs dump and restore,
branch protection rules need their own administrative actions, which writers (the Developers preset) do not hold.
Action runs are read with ReadRepo, their hooks' outputs only with ReadActionOutput too.

The table maps a method to (action, request field holding the repository name).
ListRepositories needs no permission up front; its answer is narrowed to the repositories
the caller may read, so a caller never learns the names of the others.

Policies may also limit reads and writes to some keys (silt/key_scope.py: ReadObject,
WriteObject, DeleteObject on `<repository>/<key>`). The edges check those per key; graveler's
calls that read or change entries by key (EVERY_KEY) are for callers allowed the object action
on every key of the repository (auth answers an object action on a bare repository name so),
which the repository's action alone is when no object Deny narrows it: a caller narrowed by
one goes through the S3 gateway or the REST API, never around them. Merges, reverts,
cherry-picks, resets and imports need the table's WriteRepo, and then every key they change is
checked for the caller and the user it is made for (services/graveler/key_checks.py), with the
branch they change: a WriteBranch Allow there holds its keys, a Deny of it none.

Policies may also name branches (WriteBranch, CommitBranch, RevertBranch, CreateBranch,
DeleteBranch, ReadBranch on `<repository>@<branch>`). Calls that change or read one branch
(BRANCH_TABLE) need the branch action on it besides the table's action, so that a Deny on a branch
holds for every caller; the repository's action holds every branch's, so callers without such a
Deny see no difference. A caller allowed some branches only (WriteBranch on `weather@dev-*`
without WriteRepo) goes through the REST API or the S3 gateway, which check the branch alone; a
commit, merge, revert or cherry-pick made there for a user is checked against that user here too
(servicer.py `_committing`), and a pull request's merge against its destination.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from silt.errors import InvalidArgument, PermissionDenied
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import (
    COMMIT_BRANCH,
    CREATE_BRANCH,
    CREATE_REPO,
    DELETE_BRANCH,
    DELETE_GC_RULES,
    DELETE_OBJECT,
    DELETE_REPO,
    DUMP_REFS,
    PREPARE_GC,
    READ_ACTION_OUTPUT,
    READ_BRANCH,
    READ_OBJECT,
    READ_REPO,
    RECORD_EVENTS,
    RESTORE_REFS,
    REVERT_BRANCH,
    SET_BRANCH_PROTECTION,
    SET_GC_RULES,
    WRITE_BRANCH,
    WRITE_OBJECT,
    WRITE_REPO,
    branch_resource,
)
from silt.paging import page_size
from silt.rpc.interceptor import MayFn, Narrowed, Require, Rule, check_resource_length, repository_field

SERVICE = "silt.graveler.v1.GravelerService"

TABLE: dict[str, tuple[str, str]] = {
    "CreateRepository": (CREATE_REPO, "name"),
    "GetRepository": (READ_REPO, "name"),
    "DeleteRepository": (DELETE_REPO, "name"),
    # lakeFS's repository metadata: free-form labels, changed by those who write the repository.
    "UpdateRepositoryMetadata": (WRITE_REPO, "repository"),
    "CreateBranch": (WRITE_REPO, "repository"),
    "GetBranch": (READ_REPO, "repository"),
    "ListBranches": (READ_REPO, "repository"),
    "DeleteBranch": (WRITE_REPO, "repository"),
    "CreateTag": (WRITE_REPO, "repository"),
    "GetTag": (READ_REPO, "repository"),
    "ListTags": (READ_REPO, "repository"),
    "DeleteTag": (WRITE_REPO, "repository"),
    # A recorded commit (its own date, committer and parents) needs RestoreRefs too: the rule is
    # commit_recorded_only_with_restore, below.
    "Commit": (WRITE_REPO, "repository"),
    "GetCommit": (READ_REPO, "repository"),
    "Log": (READ_REPO, "repository"),
    "StatEntry": (READ_REPO, "repository"),
    "ListEntries": (READ_REPO, "repository"),
    "StageEntry": (WRITE_REPO, "repository"),
    "StageEntries": (WRITE_REPO, "repository"),
    "StageEntriesIf": (WRITE_REPO, "repository"),
    "DeleteEntry": (WRITE_REPO, "repository"),
    "DeleteEntries": (WRITE_REPO, "repository"),
    "ResolveRef": (READ_REPO, "repository"),
    "GetNeutralEntry": (READ_REPO, "repository"),
    "RecordNeutralEntries": (WRITE_REPO, "repository"),
    "Diff": (READ_REPO, "repository"),
    "DiffBranch": (READ_REPO, "repository"),
    "DiffSummary": (READ_REPO, "repository"),
    "FindMergeBase": (READ_REPO, "repository"),
    "Merge": (WRITE_REPO, "repository"),
    "Revert": (WRITE_REPO, "repository"),
    "CherryPick": (WRITE_REPO, "repository"),
    "ResetBranch": (WRITE_REPO, "repository"),
    # Administration beyond writing (silt/iam_actions.py, REPO_ADMIN_ACTIONS): a dump copies every
    # ref into the storage namespace, a restore rewrites them all; retention rules decide what
    # garbage collection deletes (0 days drops every old commit), and PrepareGC starts a run.
    "DumpRefs": (DUMP_REFS, "repository"),
    "RestoreRefs": (RESTORE_REFS, "repository"),
    "StartDump": (DUMP_REFS, "repository"),
    "GetDumpStatus": (DUMP_REFS, "repository"),
    "StartRestore": (RESTORE_REFS, "repository"),
    "GetRestoreStatus": (RESTORE_REFS, "repository"),
    # A commit record written as given names any committer and any parents: a restore's tool,
    # as lakeFS uses it, and an administrator's (lakeFS asks only fs:CreateCommit).
    "CreateCommitRecord": (RESTORE_REFS, "repository"),
    "SetGCRules": (SET_GC_RULES, "repository"),
    "GetGCRules": (READ_REPO, "repository"),
    "DeleteGCRules": (DELETE_GC_RULES, "repository"),
    "PrepareGC": (PREPARE_GC, "repository"),
    # lakeFS's GC client's prepare calls: the same export, in the background or of staging only.
    "StartPrepareGC": (PREPARE_GC, "repository"),
    "GetPrepareGCTask": (PREPARE_GC, "repository"),
    "PrepareGCUncommitted": (PREPARE_GC, "repository"),
    # Expiry by last access deletes only what the rules (set with SetGCRules) expire, in
    # commits by the system user: the same authority as a GC run, which frees the bytes.
    "PrepareLastAccess": (PREPARE_GC, "repository"),
    "ExpireEntries": (PREPARE_GC, "repository"),
    # Protection rules bind writers, so only administrators set them; anyone who reads sees them.
    "GetBranchProtection": (READ_REPO, "repository"),
    "SetBranchProtection": (SET_BRANCH_PROTECTION, "repository"),
    # Pull requests are how writers propose changes: opening, commenting, reviewing and merging
    # one is writing. Whether a merge may go ahead is the destination's protection, checked by
    # graveler (protection.py, pulls.py), not a permission.
    "CreatePullRequest": (WRITE_REPO, "repository"),
    "GetPullRequest": (READ_REPO, "repository"),
    "ListPullRequests": (READ_REPO, "repository"),
    "UpdatePullRequest": (WRITE_REPO, "repository"),
    "MergePullRequest": (WRITE_REPO, "repository"),
    "RerunPullRequestCheck": (WRITE_REPO, "repository"),
    "AddPullRequestComment": (WRITE_REPO, "repository"),
    "ListPullRequestComments": (READ_REPO, "repository"),
    "SubmitPullRequestReview": (WRITE_REPO, "repository"),
    "ListPullRequestReviews": (READ_REPO, "repository"),
    # An import commits on a branch, as a commit does; what it may read is the operator's to
    # allow (graveler.allowed_import_prefixes, blockstore.local.allowed_external_prefixes).
    "StartImport": (WRITE_REPO, "repository"),
    "GetImportStatus": (READ_REPO, "repository"),
    "CancelImport": (WRITE_REPO, "repository"),
    # History events are read like the refs they are about.
    "ListEvents": (READ_REPO, "repository"),
    "WatchEvents": (READ_REPO, "repository"),
}


def list_readable_repositories(
    call: Callable[[api.ListRepositoriesRequest], api.ListRepositoriesResponse],
    request: api.ListRepositoriesRequest,
    may: MayFn,
) -> api.ListRepositoriesResponse:
    """A page of up to `amount` repositories the caller may read, after `request.after`.

    Pages of graveler's listing are read until enough readable ones are found, so that a
    caller who may read few repositories among many still gets full pages and a cursor
    (`after` = the last name returned) that moves forward.
    """
    amount = page_size(request.amount)
    found: list[api.RepositoryInfo] = []
    after = request.after
    while True:
        page = call(api.ListRepositoriesRequest(after=after, amount=amount))
        repositories = list(page.repositories)
        decisions = may(READ_REPO, [r.name for r in repositories]) if repositories else []
        readable = [r for r, ok in zip(repositories, decisions, strict=True) if ok]
        room = amount - len(found)
        found.extend(readable[:room])
        if len(readable) > room:
            return api.ListRepositoriesResponse(repositories=found, has_more=True)
        if not page.has_more or not repositories:
            return api.ListRepositoriesResponse(repositories=found, has_more=False)
        if len(found) == amount:
            return api.ListRepositoriesResponse(repositories=found, has_more=True)
        after = repositories[-1].name


def event_repositories(request: ev.RecordEventsRequest) -> tuple[str, ...]:
    """Every repository a batch of history events names: recording needs the action on each."""
    read = repository_field("repository")
    return tuple(sorted({read(event) for event in request.events}))


def runs_narrowed_to_outputs_allowed(call: Callable[[Any], Any], request: Any, may: MayFn) -> Any:
    """ListActionRuns and GetActionRun: ReadRepo, as any read; the hooks' outputs only for a
    caller that also holds ReadActionOutput (a webhook's answer may be a page of something only
    the server reaches), others get the runs with their statuses and errors."""
    repository = repository_field("repository")(request)
    readable, outputs = may(READ_REPO, [repository])[0], may(READ_ACTION_OUTPUT, [repository])[0]
    if not readable:
        raise PermissionDenied(f"the caller may not {READ_REPO} on {repository!r}")
    response = call(request)
    if not outputs:
        runs = response.runs if isinstance(response, api.ListActionRunsResponse) else [response]
        for run in runs:
            for hook in run.hooks:
                hook.ClearField("output")
    return response


def commit_recorded_only_with_restore(call: Callable[[Any], Any], request: api.CommitRequest, may: MayFn) -> Any:
    """Commit: WriteRepo; a commit recorded as made elsewhere (its own date, committer and
    parents) writes history as a restore does, so it needs RestoreRefs too."""
    repository = repository_field("repository")(request)
    needed = [WRITE_REPO, RESTORE_REFS] if request.HasField("recorded") else [WRITE_REPO]
    for action in needed:
        if not may(action, [repository])[0]:
            raise PermissionDenied(f"the caller may not {action} on {repository!r}")
    return call(request)


# Methods that read or change entries by key -> the object action they need on every key
# (besides the table's action), and when (None: always).
EVERY_KEY: dict[str, tuple[str, Callable[[Any], bool] | None]] = {
    "StatEntry": (READ_OBJECT, None),
    "ListEntries": (READ_OBJECT, None),
    "Diff": (READ_OBJECT, None),
    "DiffBranch": (READ_OBJECT, None),
    "DiffSummary": (READ_OBJECT, None),
    # Which commits changed a key tells of the key.
    "Log": (READ_OBJECT, lambda request: bool(request.objects or request.prefixes)),
    "ListEvents": (READ_OBJECT, None),
    "StageEntry": (WRITE_OBJECT, None),
    "StageEntries": (WRITE_OBJECT, None),
    "StageEntriesIf": (WRITE_OBJECT, None),
    "DeleteEntry": (DELETE_OBJECT, None),
    "DeleteEntries": (DELETE_OBJECT, None),
    "GetNeutralEntry": (READ_OBJECT, None),
    "RecordNeutralEntries": (WRITE_OBJECT, None),
}


def _every_key(method: str) -> Narrowed:
    """The table's action on the repository, then the object action on every key of it."""
    action, name = TABLE[method]
    object_action, when = EVERY_KEY[method]
    read_repository = repository_field(name)

    def narrow(call: Callable[[Any], Any], request: Any, may: MayFn) -> Any:
        repository = read_repository(request)
        if not may(action, [repository])[0]:
            raise PermissionDenied(f"the caller may not {action} on {repository!r}")
        if (when is None or when(request)) and not may(object_action, [repository])[0]:
            raise PermissionDenied(
                f"the caller may not {object_action} on every key of {repository!r}: "
                "use the S3 gateway or the REST API, which check each key"
            )
        return call(request)

    return Narrowed(narrow)


# Methods on one branch -> the branch action they need on it (besides the table's action), and
# the request field naming the branch (lakeFS's fs:CreateCommit, fs:RevertBranch, ... on it).
BRANCH_TABLE: dict[str, tuple[str, str]] = {
    "CreateBranch": (CREATE_BRANCH, "name"),
    "DeleteBranch": (DELETE_BRANCH, "name"),
    "GetBranch": (READ_BRANCH, "name"),
    "Commit": (COMMIT_BRANCH, "branch"),
    "Merge": (COMMIT_BRANCH, "destination_branch"),
    "CherryPick": (COMMIT_BRANCH, "branch"),
    "StartImport": (COMMIT_BRANCH, "branch"),
    "CancelImport": (COMMIT_BRANCH, "branch"),
    "GetImportStatus": (READ_BRANCH, "branch"),
    "Revert": (REVERT_BRANCH, "branch"),
    "ResetBranch": (REVERT_BRANCH, "branch"),
    # Staged changes: a Deny of WriteBranch on the branch refuses them (the S3 gateway and the
    # REST API check it per request, with the keys: silt/key_scope.py).
    "StageEntry": (WRITE_BRANCH, "branch"),
    "StageEntries": (WRITE_BRANCH, "branch"),
    "StageEntriesIf": (WRITE_BRANCH, "branch"),
    "DeleteEntry": (WRITE_BRANCH, "branch"),
    "DeleteEntries": (WRITE_BRANCH, "branch"),
}


def branch_of(method: str) -> Callable[[Any], str]:
    """The branch resource a BRANCH_TABLE method's request names."""
    _, name = BRANCH_TABLE[method]
    read_repository = repository_field("repository")

    def read(request: Any) -> str:
        return check_resource_length(branch_resource(read_repository(request), str(getattr(request, name))))

    return read


def _on_branch(method: str, inner: Rule) -> Narrowed:
    """inner (the method's repository rule), then the branch action on the branch it names."""
    action, _ = BRANCH_TABLE[method]
    read_branch = branch_of(method)

    def narrow(call: Callable[[Any], Any], request: Any, may: MayFn) -> Any:
        if not getattr(request, BRANCH_TABLE[method][1]):
            # No branch is named "": the call is refused as the method itself would refuse it,
            # not as a permission no policy can hold (`<repository>@` is no branch resource).
            raise InvalidArgument("a branch name is needed")
        resource = read_branch(request)

        def on_branch(checked: Any) -> Any:
            if not may(action, [resource])[0]:
                raise PermissionDenied(f"the caller may not {action} on {resource!r}")
            return call(checked)

        if isinstance(inner, Narrowed):
            return inner.narrow(on_branch, request, may)
        assert isinstance(inner, Require), f"{method}: a branch rule over {inner!r}"
        found = inner.resource(request)
        for needed in (found,) if isinstance(found, str) else found:
            if not may(inner.action, [needed])[0]:
                raise PermissionDenied(f"the caller may not {inner.action} on {needed!r}")
        return on_branch(request)

    return Narrowed(narrow)


def _rules() -> dict[str, Rule]:
    rules: dict[str, Rule] = {
        f"/{SERVICE}/{method}": Require(action, repository_field(name)) for method, (action, name) in TABLE.items()
    }
    for method in EVERY_KEY:
        rules[f"/{SERVICE}/{method}"] = _every_key(method)
    rules[f"/{SERVICE}/ListRepositories"] = Narrowed(list_readable_repositories)
    rules[f"/{SERVICE}/Commit"] = Narrowed(commit_recorded_only_with_restore)
    rules[f"/{SERVICE}/RecordEvents"] = Require(RECORD_EVENTS, event_repositories)
    for method in ("ListActionRuns", "GetActionRun"):
        rules[f"/{SERVICE}/{method}"] = Narrowed(runs_narrowed_to_outputs_allowed)
    for method in BRANCH_TABLE:
        rules[f"/{SERVICE}/{method}"] = _on_branch(method, rules[f"/{SERVICE}/{method}"])
    return rules


RULES: dict[str, Rule] = _rules()
