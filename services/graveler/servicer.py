"""gRPC handlers of graveler: request messages in, engine calls, response messages out.

A handler calls the engine's components (refs, entries, branching, pulls, ...) directly, or
Graveler's own operations where one spans components (a write checked against protection).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc

from engine import metered
from engine.actions.read_access import HookAuthority
from engine.core.branching import CherryPickOverrides, MergeOutcome
from engine.core.commits import Recorded
from engine.core.committed.model import Record
from engine.core.deadline import Deadline
from engine.core.entries import Condition, DeleteOutcome, StageOutcome
from engine.core.hooks import EventUser
from engine.core.list_answer import serialized_list_response
from engine.core.merge_resolutions import MergeResolution, Resolutions
from engine.core.model import REQUESTED_COMMITTER_KEY, CommitId, MergeStrategy
from engine.core.refs import RepoHandle
from engine.core.validation import validate_key
from engine.core.values import decode_entry
from engine.features.history_events.manager import HistoryEvents
from engine.features.history_events.streams import EventStreams
from engine.features.last_access import PreparedLastAccess
from engine.features.refs_tasks import DUMP, RESTORE
from engine.features.retention import PreparedRun
from engine.graveler import Graveler
from services.graveler.commit_info import commit_info
from services.graveler.diff_answer import diff_response, summary_response
from services.graveler.event_handlers import HistoryHandlers
from services.graveler.import_handlers import ImportHandlers
from services.graveler.key_checks import KeyChecks, KeyScopeFn
from services.graveler.permissions import TABLE
from silt.changed_keys import ChangeCheck
from silt.errors import InvalidArgument, PermissionDenied, SiltError
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import ACT_FOR_USER, COMMIT_BRANCH, REVERT_BRANCH, branch_resource, user_resource
from silt.paging import take_page
from silt.rpc.authority import Authority
from silt.rpc.interceptor import AuthInterceptor, current_principal


def _branch_info(branch: pb.Branch) -> api.BranchInfo:
    return api.BranchInfo(name=branch.name, commit_id=branch.commit_id, hidden=branch.hidden)


def _repo_info(record: pb.Repository) -> api.RepositoryInfo:
    return api.RepositoryInfo(
        name=record.name,
        storage_namespace=record.storage_namespace,
        default_branch=record.default_branch,
        creation_date=record.creation_date,
        metadata=dict(record.metadata),
        unique_id=record.unique_id,
    )


_STAGE_RESULTS = {
    "staged": api.StageEntryOutcome.RESULT_STAGED,
    "invalid": api.StageEntryOutcome.RESULT_INVALID,
    "expired": api.StageEntryOutcome.RESULT_EXPIRED,
}
_DELETE_RESULTS = {
    "deleted": api.DeleteEntryOutcome.RESULT_DELETED,
    "not_found": api.DeleteEntryOutcome.RESULT_NOT_FOUND,
    "invalid": api.DeleteEntryOutcome.RESULT_INVALID_KEY,
}


def _prepared_run_fields(run: PreparedRun | PreparedLastAccess) -> dict[str, Any]:
    """A prepared GC or last-access run as its Prepare*Response's fields: the same names, but
    the namespace is storage_namespace on the wire (a field the message lacks raises ValueError)."""
    fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
    fields["storage_namespace"] = fields.pop("namespace")
    return fields


def _task_info(task: pb.GCPrepareTask, namespace: str) -> api.PrepareGCTaskInfo:
    """A background GC export's record as its status; the run's files once it completed."""
    info = api.PrepareGCTaskInfo(
        task_id=task.id, completed=task.completed, update_time=task.update_time, error=task.error
    )
    if task.completed and not task.error:
        location = task.location
        info.result.CopyFrom(
            api.PrepareGCResponse(
                run_id=task.run_id,
                storage_namespace=namespace,
                location=location,
                commits_location=location + "commits.parquet",
                metaranges_location=location + "metaranges.parquet",
                staged_location=location + "staged.parquet",
                started=task.started,
                commits=task.commits,
                expired_commits=task.expired_commits,
                staged_entries=task.staged_entries,
                lakefs_commits_location=task.lakefs_commits_location,
            )
        )
    return info


_Batch = TypeVar("_Batch", api.StageEntriesResponse, api.DeleteEntriesResponse)


def _with_outcomes(
    response: _Batch,
    outcomes: Sequence[StageOutcome | DeleteOutcome],
    results: Mapping[str, Any],
    done: str,
    kind: str,
) -> _Batch:
    """A batch write's answer: one outcome a key, in order, its result as `results` maps it; the
    keys whose result is `done` counted as staged writes of `kind` ("put" or "delete")."""
    for outcome in outcomes:
        if outcome.result == done:
            metered.staged(kind)
        response.outcomes.add(key=outcome.key, result=results[outcome.result], message=outcome.message)
    return response


def _deadline(context: grpc.ServicerContext) -> Deadline:
    """The call's deadline, and whether its client still waits: engine work stops when it no longer does."""
    return Deadline.after(context.time_remaining(), is_active=context.is_active)


def _committer(requested: str) -> str:
    """The authenticated caller; the requested name only when unauthenticated."""
    try:
        return current_principal().user_id
    except SiltError:  # served without the auth interceptor (embedded use, tests)
        return requested


def _caller_address() -> str:
    """Where the authenticated caller's call came from ("" unknown or unauthenticated)."""
    try:
        return current_principal().source_ip
    except SiltError:  # served without the auth interceptor (embedded use, tests)
        return ""


def _unreserved(metadata: dict[str, str]) -> dict[str, str]:
    """Caller metadata without the reserved key, which on old commits names their real committer
    (silt/commit_metadata.py): no new commit can claim to be someone else's that way."""
    return {k: v for k, v in metadata.items() if k != REQUESTED_COMMITTER_KEY}


_FULL_COMMIT_ID = re.compile(r"[0-9a-f]{64}")
# A recorded commit's further parents: a merge has one; git's octopus merges a few.
MAX_MERGE_PARENTS = 4
MAX_COMMITTER_LENGTH = 256


def _recorded(request: api.CommitRequest) -> Recorded:
    """A commit made elsewhere, as the request records it (the permission rule has checked that
    the caller may record history)."""
    recorded = request.recorded
    if not recorded.HasField("creation_date"):
        raise InvalidArgument("a recorded commit needs its creation_date")
    if not request.committer or len(request.committer) > MAX_COMMITTER_LENGTH:
        raise InvalidArgument(f"a recorded commit needs its committer, at most {MAX_COMMITTER_LENGTH} characters")
    if len(recorded.merge_parents) > MAX_MERGE_PARENTS:
        raise InvalidArgument(f"a recorded commit has at most {MAX_MERGE_PARENTS} merge parents")
    for parent in recorded.merge_parents:
        if not _FULL_COMMIT_ID.fullmatch(parent):
            raise InvalidArgument(f"merge parent {parent[:80]!r} is not a full commit id")
    return Recorded(recorded.creation_date, tuple(CommitId(parent) for parent in recorded.merge_parents))


CallerMay = Callable[[str, str], bool]


def caller_may(interceptors: Sequence[grpc.ServerInterceptor]) -> CallerMay:
    """Whether the current call's caller holds an action on a resource, as the auth interceptor
    decides; served without one (embedded use, tests), nobody holds anything."""
    auth = next((i for i in interceptors if isinstance(i, AuthInterceptor)), None)

    def may(action: str, resource: str) -> bool:
        if auth is None:
            return False
        principal = current_principal()
        return auth.authority.allowed(principal.user_id, action, resource, principal.source_ip)

    return may


UserMay = Callable[[str, str, str], bool]


def user_may(interceptors: Sequence[grpc.ServerInterceptor]) -> UserMay:
    """Whether a named user holds an action on a resource (for calls made on a user's behalf by
    a service that may name them), from the client address that service reported with the call
    (x-silt-client-ip; unknown without one); served without auth, nobody holds anything."""
    auth = next((i for i in interceptors if isinstance(i, AuthInterceptor)), None)

    def may(user_id: str, action: str, resource: str) -> bool:
        if auth is None:
            return False
        return auth.authority.allowed(user_id, action, resource, current_principal().reported_ip)

    return may


class GravelerServicer(HistoryHandlers, ImportHandlers, api_grpc.GravelerServiceServicer):
    def __init__(
        self,
        graveler: Graveler,
        may: CallerMay | None = None,
        history: HistoryEvents | None = None,
        authority: Authority | None = None,
        named_user_may: UserMay | None = None,
        key_scopes: KeyScopeFn | None = None,
        hook_authority: HookAuthority | None = None,
    ) -> None:
        """authority: auth's uncached answers, for re-checking open event streams (None: no auth).
        named_user_may: whether a user a call is made for holds an action (None: nobody does).
        key_scopes: auth's key scopes, for the keys merges, resets and imports change (None:
        served without auth, nothing checked per key).
        hook_authority: auth's cached answers, for what hooks' users may read (None: served
        without auth, hooks read every key of their repository)."""
        self.g = graveler
        # Served behind the auth interceptor: decisions the permission table cannot make (they
        # need a record read first) are made here too.
        self._authorized = authority is not None
        self._may = may or caller_may(())
        self._user_may = named_user_may or user_may(())
        self._key_checks = KeyChecks(key_scopes)
        if hook_authority is not None:
            # Hooks' `lakefs` reads are their user's (engine/actions/read_access.py).
            graveler.actions.authority = hook_authority
        if history is None:
            # Its own recorder (in-process uses, tests): its flusher writes to the engine's store,
            # so it must stop with the engine, before the store is closed under it.
            history = HistoryEvents(graveler.refs).start()
            graveler.on_close(history.close)
        self.history = history
        self._streams = EventStreams(history.streams, authority)
        # An import's commit is made in the background, after its call returned: its history
        # event is queued from there, as a commit's is from its call.
        graveler.imports.on_commit = lambda repository, branch, commit: self._ref_event(
            ev.COMMIT, repository, branch, commit.committer, commit_id=commit.id, message=commit.message
        )

    def _repository(self, repository: str, context: grpc.ServicerContext) -> tuple[RepoHandle, Deadline]:
        """The repository a call names, read within the call's deadline, and that deadline."""
        deadline = _deadline(context)
        return self.g.refs.repository(repository, deadline), deadline

    def _ref_event(
        self,
        event_type: ev.HistoryEventType.ValueType,
        repository: str,
        branch: str,
        requested: str = "",
        *,
        commit_id: str = "",
        message: str = "",
        path: str = "",
    ) -> None:
        """Queue a history event for a ref change that succeeded; never delays the call. The user
        is the caller, or the one the REST API acts for (as for pull requests, `_user`)."""
        try:
            user, _ = self._user(requested)
        except SiltError:  # auth unreachable: the change stands, the event names the caller
            user = _committer(requested)
        self.history.own.emit(event_type, repository, branch, user, commit_id=commit_id, message=message, path=path)

    def _merge_event(
        self,
        event_type: ev.HistoryEventType.ValueType,
        repository: str,
        branch: str,
        requested: str,
        outcome: MergeOutcome,
    ) -> None:
        if outcome.commit is not None:  # conflicts changed nothing
            commit = outcome.commit
            self._ref_event(event_type, repository, branch, requested, commit_id=commit.id, message=commit.message)

    def _tag_event(self, event_type: ev.HistoryEventType.ValueType, repository: str, tag: str, requested: str) -> None:
        # Tags belong to no branch: their events go to the repository's default branch.
        try:
            branch = self.g.refs.get_repository(repository).record.default_branch
        except SiltError:  # deleted meanwhile, or KV away: the tag change stands, the event is lost
            return
        self._ref_event(event_type, repository, branch, requested, path=tag)

    def _may_restore(self, repository: str, on_behalf_of: str) -> bool:
        # A bare repository on exactly another's namespace is where that one's dump is
        # restored: it needs what RestoreRefs needs, on the repository whose namespace it shares,
        # held by the caller and by the user a service (the REST API) creates it for.
        action, _ = TABLE["RestoreRefs"]
        if not self._may(action, repository):
            return False
        user, caller = self._user(on_behalf_of)
        return user == caller or self._user_may(user, action, repository)

    # repositories
    def CreateRepository(
        self, request: api.CreateRepositoryRequest, context: grpc.ServicerContext
    ) -> api.RepositoryInfo:
        _deadline(context).check(f"creating repository {request.name!r}")
        return _repo_info(
            self.g.lifecycle.create_repository(
                request.name,
                request.storage_namespace,
                request.default_branch,
                request.bare,
                lambda sharing: self._may_restore(sharing, request.on_behalf_of),
            )
        )

    def GetRepository(self, request: api.GetRepositoryRequest, context: grpc.ServicerContext) -> api.RepositoryInfo:
        _deadline(context).check(f"reading repository {request.name!r}")
        return _repo_info(self.g.refs.get_repository(request.name).record)

    def ListRepositories(
        self, request: api.ListRepositoriesRequest, context: grpc.ServicerContext
    ) -> api.ListRepositoriesResponse:
        _deadline(context).check("listing repositories")
        repos, more = take_page(self.g.refs.list_repositories(request.after), request.amount)
        return api.ListRepositoriesResponse(repositories=[_repo_info(r) for r in repos], has_more=more)

    def DeleteRepository(
        self, request: api.DeleteRepositoryRequest, context: grpc.ServicerContext
    ) -> api.DeleteRepositoryResponse:
        _deadline(context).check(f"deleting repository {request.name!r}")
        self.g.lifecycle.delete_repository(request.name)
        return api.DeleteRepositoryResponse()

    def UpdateRepositoryMetadata(
        self, request: api.UpdateRepositoryMetadataRequest, context: grpc.ServicerContext
    ) -> api.RepositoryInfo:
        deadline = _deadline(context)
        deadline.check(f"updating the metadata of repository {request.repository!r}")
        record = self.g.repo_metadata.update(request.repository, dict(request.set), list(request.delete), deadline)
        return _repo_info(record)

    # branches
    def CreateBranch(self, request: api.CreateBranchRequest, context: grpc.ServicerContext) -> api.BranchInfo:
        branch = self.g.create_branch(
            request.repository,
            request.name,
            request.source_ref,
            hidden=request.hidden,
            deadline=_deadline(context),
            by=self._event_user(request.user),
        )
        self._ref_event(ev.BRANCH_CREATED, request.repository, request.name, request.user, path=request.source_ref)
        return _branch_info(branch)

    def GetBranch(self, request: api.GetBranchRequest, context: grpc.ServicerContext) -> api.BranchInfo:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return _branch_info(self.g.refs.get_branch(repo, request.name).branch)

    def ListBranches(self, request: api.ListBranchesRequest, context: grpc.ServicerContext) -> api.ListBranchesResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        branches, more = take_page(self.g.refs.list_branches(repo, request.after), request.amount)
        return api.ListBranchesResponse(branches=[_branch_info(b) for b in branches], has_more=more)

    def DeleteBranch(self, request: api.DeleteBranchRequest, context: grpc.ServicerContext) -> api.DeleteBranchResponse:
        check = self._key_check(request.repository, request.name, request.user)
        self.g.delete_branch(
            request.repository,
            request.name,
            deadline=_deadline(context),
            check=check,
            by=self._event_user(request.user),
        )
        self._ref_event(ev.BRANCH_DELETED, request.repository, request.name, request.user)
        return api.DeleteBranchResponse()

    # tags
    def CreateTag(self, request: api.CreateTagRequest, context: grpc.ServicerContext) -> api.TagInfo:
        tag = self.g.create_tag(
            request.repository, request.id, request.ref, deadline=_deadline(context), by=self._event_user(request.user)
        )
        self._tag_event(ev.TAG_CREATED, request.repository, request.id, request.user)
        return api.TagInfo(id=tag.id, commit_id=tag.commit_id)

    def GetTag(self, request: api.GetTagRequest, context: grpc.ServicerContext) -> api.TagInfo:
        tag = self.g.refs.get_tag(self.g.refs.repository(request.repository, _deadline(context)), request.id)
        return api.TagInfo(id=tag.id, commit_id=tag.commit_id)

    def ListTags(self, request: api.ListTagsRequest, context: grpc.ServicerContext) -> api.ListTagsResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        tags, more = take_page(self.g.refs.list_tags(repo, request.after), request.amount)
        return api.ListTagsResponse(tags=[api.TagInfo(id=t.id, commit_id=t.commit_id) for t in tags], has_more=more)

    def DeleteTag(self, request: api.DeleteTagRequest, context: grpc.ServicerContext) -> api.DeleteTagResponse:
        self.g.delete_tag(
            request.repository, request.id, deadline=_deadline(context), by=self._event_user(request.user)
        )
        self._tag_event(ev.TAG_DELETED, request.repository, request.id, request.user)
        return api.DeleteTagResponse()

    # commits
    def Commit(self, request: api.CommitRequest, context: grpc.ServicerContext) -> api.CommitInfo:
        with metered.timed_commit():
            commit = self._commit(request, context)
        self._ref_event(
            ev.COMMIT,
            request.repository,
            request.branch,
            request.committer,
            commit_id=commit.id,
            message=commit.message,
        )
        return commit_info(commit)

    def _commit(self, request: api.CommitRequest, context: grpc.ServicerContext) -> pb.Commit:
        recorded = _recorded(request) if request.HasField("recorded") else None
        return self.g.commit(
            request.repository,
            request.branch,
            request.message,
            _unreserved(dict(request.metadata)),
            request.committer
            if recorded is not None
            else self._committing(request.committer, COMMIT_BRANCH, request.repository, request.branch),
            request.allow_empty,
            list(request.prefixes),
            deadline=_deadline(context),
            recorded=recorded,
            by=self._event_user(request.committer),
        )

    def GetCommit(self, request: api.GetCommitRequest, context: grpc.ServicerContext) -> api.CommitInfo:
        return commit_info(self.g.get_commit(request.repository, request.commit_id, deadline=_deadline(context)))

    def Log(self, request: api.LogRequest, context: grpc.ServicerContext) -> api.LogResponse:
        page = self.g.log(
            request.repository,
            request.ref,
            request.after,
            request.amount,
            objects=list(request.objects),
            prefixes=list(request.prefixes),
            first_parent=request.first_parent,
            limit=request.limit,
            since_nanos=request.since.ToNanoseconds() if request.HasField("since") else 0,
            stop_at=request.stop_at,
            deadline=_deadline(context),
        )
        return api.LogResponse(
            commits=[commit_info(c) for c in page.commits], has_more=bool(page.next_after), next_after=page.next_after
        )

    # entries
    def StatEntry(self, request: api.StatEntryRequest, context: grpc.ServicerContext) -> api.EntryInfo:
        validate_key(request.key)
        repo, deadline = self._repository(request.repository, context)
        return api.EntryInfo(key=request.key, entry=self.g.entries.stat(repo, request.ref, request.key, deadline))

    def ListEntries(self, request: api.ListEntriesRequest, context: grpc.ServicerContext) -> api.ListEntriesResponse:
        return api.ListEntriesResponse.FromString(self.serialized_list_entries(request, context))

    def serialized_list_entries(self, request: api.ListEntriesRequest, context: grpc.ServicerContext) -> bytes:
        """ListEntries' answer serialized: what the server sends (registration.py)."""
        repo, deadline = self._repository(request.repository, context)
        page = self.g.entries.list_stored(
            repo, request.ref, request.prefix, request.delimiter, request.after, request.amount, deadline
        )
        return serialized_list_response(page)

    def StageEntry(self, request: api.StageEntryRequest, context: grpc.ServicerContext) -> api.StageEntryResponse:
        condition = None
        if request.if_absent or request.if_match_etag:
            condition = Condition(
                if_absent=request.if_absent,
                if_match_etag=request.if_match_etag,
                fresh_address=request.fresh_address,
            )
        self.g.stage_entry(
            request.repository,
            request.branch,
            request.key,
            request.entry,
            condition,
            repository_id=request.repository_id,
            deadline=_deadline(context),
            neutral=request.neutral,
        )
        metered.staged("put")
        return api.StageEntryResponse()

    def GetNeutralEntry(self, request: api.GetNeutralEntryRequest, context: grpc.ServicerContext) -> api.EntryInfo:
        repo, _ = self._repository(request.repository, context)
        return api.EntryInfo(key=request.key, entry=self.g.neutral.get(repo, request.key))

    def RecordNeutralEntries(
        self, request: api.RecordNeutralEntriesRequest, context: grpc.ServicerContext
    ) -> api.RecordNeutralEntriesResponse:
        self.g.record_neutral_entries(
            request.repository,
            request.branch,
            [(info.key, info.entry) for info in request.entries],
            repository_id=request.repository_id,
            deadline=_deadline(context),
        )
        return api.RecordNeutralEntriesResponse()

    def StageEntries(self, request: api.StageEntriesRequest, context: grpc.ServicerContext) -> api.StageEntriesResponse:
        deadline = _deadline(context)
        outcomes = self.g.stage_entries(
            request.repository,
            request.branch,
            [(staged.key, staged.entry) for staged in request.entries],
            repository_id=request.repository_id,
            deadline=deadline,
            # Each entry's time ends slack_ms before the call's deadline, which gRPC counts from
            # the call's arrival: time spent queued and in the interceptors counts against it.
            entry_deadlines=[deadline.less(staged.slack_ms / 1000) for staged in request.entries],
        )
        return _with_outcomes(
            api.StageEntriesResponse(per_entry_deadlines=True), outcomes, _STAGE_RESULTS, "staged", "put"
        )

    def StageEntriesIf(
        self, request: api.StageEntriesIfRequest, context: grpc.ServicerContext
    ) -> api.StageEntriesIfResponse:
        writes: list[tuple[str, pb.Entry, Condition]] = []
        for staged in request.entries:
            if not staged.if_absent and not staged.if_match_etag:
                raise InvalidArgument(f"the entry for {staged.key!r} has no condition (if_absent or if_match_etag)")
            condition = Condition(if_absent=staged.if_absent, if_match_etag=staged.if_match_etag)
            writes.append((staged.key, staged.entry, condition))
        self.g.stage_entries_if(
            request.repository,
            request.branch,
            writes,
            repository_id=request.repository_id,
            deadline=_deadline(context),
        )
        for _ in writes:
            metered.staged("put")
        return api.StageEntriesIfResponse()

    def DeleteEntry(self, request: api.DeleteEntryRequest, context: grpc.ServicerContext) -> api.DeleteEntryResponse:
        self.g.delete_entry(request.repository, request.branch, request.key, deadline=_deadline(context))
        metered.staged("delete")
        return api.DeleteEntryResponse()

    def DeleteEntries(
        self, request: api.DeleteEntriesRequest, context: grpc.ServicerContext
    ) -> api.DeleteEntriesResponse:
        outcomes = self.g.delete_entries(
            request.repository, request.branch, list(request.keys), deadline=_deadline(context)
        )
        return _with_outcomes(api.DeleteEntriesResponse(), outcomes, _DELETE_RESULTS, "deleted", "delete")

    # refs
    def ResolveRef(self, request: api.ResolveRefRequest, context: grpc.ServicerContext) -> api.ResolveRefResponse:
        resolved = self.g.refs.resolve(self.g.refs.repository(request.repository, _deadline(context)), request.ref)
        kinds = {
            "branch": api.ResolveRefResponse.REF_TYPE_BRANCH,
            "tag": api.ResolveRefResponse.REF_TYPE_TAG,
            "commit": api.ResolveRefResponse.REF_TYPE_COMMIT,
        }
        return api.ResolveRefResponse(
            type=kinds[resolved.kind],
            commit_id=resolved.commit_id,
            branch=resolved.branch.branch.name if resolved.branch else "",
        )

    # branching
    def Diff(self, request: api.DiffRequest, context: grpc.ServicerContext) -> api.DiffResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        page = self.g.branching.diff(
            repo,
            request.left_ref,
            request.right_ref,
            request.three_dot,
            request.prefix,
            request.delimiter,
            request.after,
            request.amount,
        )
        return diff_response(page)

    def DiffSummary(self, request: api.DiffSummaryRequest, context: grpc.ServicerContext) -> api.DiffSummaryResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        page = self.g.branching.diff_summary(
            repo, request.left_ref, request.right_ref, request.three_dot, request.after, request.amount
        )
        return summary_response(page)

    def DiffBranch(self, request: api.DiffBranchRequest, context: grpc.ServicerContext) -> api.DiffResponse:
        repo, deadline = self._repository(request.repository, context)
        page = self.g.branching.diff_branch(
            repo, request.branch, request.prefix, request.delimiter, request.after, request.amount, deadline
        )
        return diff_response(page)

    def Merge(self, request: api.MergeRequest, context: grpc.ServicerContext) -> api.MergeResponse:
        outcome = self.g.merge(
            request.repository,
            request.source_ref,
            request.destination_branch,
            _STRATEGY[request.strategy],
            [(p.pattern, _STRATEGY[p.strategy]) for p in request.path_strategies],
            request.squash,
            request.allow_empty,
            request.message,
            _unreserved(dict(request.metadata)),
            self._committing(request.committer, COMMIT_BRANCH, request.repository, request.destination_branch),
            deadline=_deadline(context),
            check=self._key_check(request.repository, request.destination_branch, request.committer),
            by=self._event_user(request.committer),
            resolutions=[_resolution(r) for r in request.resolutions],
        )
        self._merge_event(ev.MERGE, request.repository, request.destination_branch, request.committer, outcome)
        return _merge_response(outcome)

    def Revert(self, request: api.RevertRequest, context: grpc.ServicerContext) -> api.MergeResponse:
        outcome = self.g.revert(
            request.repository,
            request.branch,
            request.ref,
            request.parent_number,
            request.message,
            _unreserved(dict(request.metadata)),
            self._committing(request.committer, REVERT_BRANCH, request.repository, request.branch),
            allow_empty=request.allow_empty,
            deadline=_deadline(context),
            check=self._key_check(request.repository, request.branch, request.committer),
            by=self._event_user(request.committer),
        )
        self._merge_event(ev.REVERT, request.repository, request.branch, request.committer, outcome)
        return _merge_response(outcome)

    def CherryPick(self, request: api.CherryPickRequest, context: grpc.ServicerContext) -> api.MergeResponse:
        pick = CherryPickOverrides(
            message=request.message,
            metadata=_unreserved(dict(request.metadata)),
            allow_empty=request.allow_empty,
        )
        outcome = self.g.cherry_pick(
            request.repository,
            request.branch,
            request.ref,
            request.parent_number,
            self._committing(request.committer, COMMIT_BRANCH, request.repository, request.branch),
            pick=pick,
            deadline=_deadline(context),
            check=self._key_check(request.repository, request.branch, request.committer),
            by=self._event_user(request.committer),
        )
        self._merge_event(ev.CHERRY_PICK, request.repository, request.branch, request.committer, outcome)
        return _merge_response(outcome)

    def ResetBranch(self, request: api.ResetBranchRequest, context: grpc.ServicerContext) -> api.ResetBranchResponse:
        target = request.WhichOneof("target")
        if target is None or (target == "all" and not request.all):
            raise InvalidArgument("reset needs one of: all, key, prefix, hard_ref")
        branch = self.g.reset_branch(
            request.repository,
            request.branch,
            key=request.key if target == "key" else None,
            prefix=request.prefix if target == "prefix" else None,
            hard_ref=request.hard_ref if target == "hard_ref" else None,
            deadline=_deadline(context),
            check=self._key_check(request.repository, request.branch, request.user),
        )
        reset = request.key if target == "key" else request.prefix if target == "prefix" else ""
        self._ref_event(ev.RESET, request.repository, request.branch, commit_id=branch.commit_id, path=reset)
        return api.ResetBranchResponse(branch=_branch_info(branch))

    def FindMergeBase(
        self, request: api.FindMergeBaseRequest, context: grpc.ServicerContext
    ) -> api.FindMergeBaseResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        base = self.g.branching.find_merge_base(repo, request.left_ref, request.right_ref)
        return api.FindMergeBaseResponse(commit_id=base)

    def DumpRefs(self, request: api.DumpRefsRequest, context: grpc.ServicerContext) -> api.DumpRefsResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return api.DumpRefsResponse(**self.g.lifecycle.dump_refs(repo)._asdict())

    def RestoreRefs(self, request: api.RestoreRefsRequest, context: grpc.ServicerContext) -> api.RestoreRefsResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        restored = self.g.lifecycle.restore_refs(repo, request.location)
        return api.RestoreRefsResponse(**restored._asdict())

    def StartDump(self, request: api.StartDumpRequest, context: grpc.ServicerContext) -> api.RefsTaskInfo:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return api.RefsTaskInfo(task=self.g.refs_tasks.start_dump(repo))

    def GetDumpStatus(self, request: api.GetDumpStatusRequest, context: grpc.ServicerContext) -> api.RefsTaskInfo:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return api.RefsTaskInfo(task=self.g.refs_tasks.status(repo, DUMP, request.id))

    def StartRestore(self, request: api.StartRestoreRequest, context: grpc.ServicerContext) -> api.RefsTaskInfo:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return api.RefsTaskInfo(task=self.g.refs_tasks.start_restore(repo, request.location))

    def GetRestoreStatus(self, request: api.GetRestoreStatusRequest, context: grpc.ServicerContext) -> api.RefsTaskInfo:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return api.RefsTaskInfo(task=self.g.refs_tasks.status(repo, RESTORE, request.id))

    def CreateCommitRecord(
        self, request: api.CreateCommitRecordRequest, context: grpc.ServicerContext
    ) -> api.CreateCommitRecordResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        self.g.lifecycle.create_commit_record(repo, request.commit)
        return api.CreateCommitRecordResponse()

    # garbage collection
    def SetGCRules(self, request: api.SetGCRulesRequest, context: grpc.ServicerContext) -> api.GCRulesInfo:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        rules = self.g.retention.set_rules(repo, request.rules, request.keep_last_access_rules)
        return api.GCRulesInfo(repository=request.repository, rules=rules, is_set=True)

    def GetGCRules(self, request: api.GetGCRulesRequest, context: grpc.ServicerContext) -> api.GCRulesInfo:
        rules = self.g.retention.get_rules(self.g.refs.repository(request.repository, _deadline(context)))
        return api.GCRulesInfo(repository=request.repository, rules=rules, is_set=rules is not None)

    def DeleteGCRules(
        self, request: api.DeleteGCRulesRequest, context: grpc.ServicerContext
    ) -> api.DeleteGCRulesResponse:
        self.g.retention.delete_rules(self.g.refs.repository(request.repository, _deadline(context)))
        return api.DeleteGCRulesResponse()

    def PrepareGC(self, request: api.PrepareGCRequest, context: grpc.ServicerContext) -> api.PrepareGCResponse:
        repo, deadline = self._repository(request.repository, context)
        run = self.g.retention.prepare(repo, deadline, lakefs_formats=request.lakefs_formats)
        return api.PrepareGCResponse(**_prepared_run_fields(run))

    def StartPrepareGC(
        self, request: api.StartPrepareGCRequest, context: grpc.ServicerContext
    ) -> api.PrepareGCTaskInfo:
        repo, _ = self._repository(request.repository, context)
        return _task_info(self.g.gc_tasks.start(repo), repo.namespace)

    def GetPrepareGCTask(
        self, request: api.GetPrepareGCTaskRequest, context: grpc.ServicerContext
    ) -> api.PrepareGCTaskInfo:
        repo, _ = self._repository(request.repository, context)
        return _task_info(self.g.gc_tasks.status(repo, request.task_id), repo.namespace)

    def PrepareGCUncommitted(
        self, request: api.PrepareGCUncommittedRequest, context: grpc.ServicerContext
    ) -> api.PrepareGCUncommittedResponse:
        repo, deadline = self._repository(request.repository, context)
        run = self.g.retention.prepare_uncommitted(repo, deadline)
        return api.PrepareGCUncommittedResponse(
            run_id=run.run_id, storage_namespace=run.namespace, location=run.location, staged_entries=run.staged_entries
        )

    # retention by last access
    def PrepareLastAccess(
        self, request: api.PrepareLastAccessRequest, context: grpc.ServicerContext
    ) -> api.PrepareLastAccessResponse:
        repo, deadline = self._repository(request.repository, context)
        run = self.g.last_access.prepare(repo, request.branch, deadline)
        return api.PrepareLastAccessResponse(**_prepared_run_fields(run))

    def ExpireEntries(
        self, request: api.ExpireEntriesRequest, context: grpc.ServicerContext
    ) -> api.ExpireEntriesResponse:
        deadline = _deadline(context)
        expiry = self.g.last_access.expire(
            self.g.refs.repository(request.repository, deadline),
            request.branch,
            request.rule,
            [(e.key, e.physical_address) for e in request.entries],
            request.run_id,
            _committer(""),  # who asked, recorded beside the system user's commit
            deadline,
        )
        return api.ExpireEntriesResponse(commit_id=expiry.commit_id, expired=expiry.expired, spared=expiry.spared)

    # branch protection
    def GetBranchProtection(
        self, request: api.GetBranchProtectionRequest, context: grpc.ServicerContext
    ) -> api.BranchProtectionInfo:
        record, etag = self.g.protection.get(self.g.refs.repository(request.repository, _deadline(context)))
        return api.BranchProtectionInfo(rules=record.rules, etag=etag)

    def SetBranchProtection(
        self, request: api.SetBranchProtectionRequest, context: grpc.ServicerContext
    ) -> api.BranchProtectionInfo:
        repo, deadline = self._repository(request.repository, context)
        record, etag = self.g.protection.set(repo, list(request.rules), request.if_match, deadline)
        return api.BranchProtectionInfo(rules=record.rules, etag=etag)

    def _committing(self, requested: str, action: str, repository: str, branch: str) -> str:
        """Who a new commit on branch is by: the user the call is made for, as for pull requests
        (`_user`), never a service that forwarded it; a name the caller may not act for is
        ignored. Reviews rely on it: whoever committed to a pull request's source cannot approve
        it. That user must hold the branch action there too, as the caller did
        (services/graveler/permissions.py), so that a policy on one branch holds here whatever
        route the request came by."""
        user, caller = self._user(requested)
        resource = branch_resource(repository, branch)
        if user != caller and not self._user_may(user, action, resource):
            raise PermissionDenied(f"user {user!r} may not {action} on {resource!r}")
        return user

    def _key_check(self, repository: str, branch: str, requested: str) -> ChangeCheck | None:
        """The check of the keys an operation on branch changes, for its caller and the user it
        is made for (`_user`); None when both hold every key of the repository (or, for writes
        and removals, WriteBranch on the branch)."""
        user, caller = self._user(requested)
        if user == caller:
            return self._key_checks.for_users(repository, branch, [(caller, _caller_address())])
        # The named user is judged from the client address the caller reported for them, as
        # `_user_may` judges them.
        principal = current_principal()
        return self._key_checks.for_users(
            repository, branch, [(user, principal.reported_ip), (caller, principal.source_ip)]
        )

    def _event_user(self, requested: str) -> EventUser:
        """Who an operation that runs hooks is made for (`_user`), from the address graveler
        judges them from (as `_key_check` does): its hooks' `lakefs` reads are that user's."""
        user, caller = self._user(requested)
        if user == caller:
            return EventUser(user, _caller_address())
        return EventUser(user, current_principal().reported_ip)

    # pull requests
    def _user(self, requested: str) -> tuple[str, str]:
        """(who opens, reviews, comments or merges; who really called): the caller, or the user
        the REST API names (it holds auth:ActForUser on users/<id>, granted literally to its
        service user alone, so neither admins nor other services can review under N names)."""
        caller = _committer(requested)
        if requested and requested != caller and self._may(ACT_FOR_USER, user_resource(requested)):
            return requested, caller
        return caller, caller

    def _pull_infos(
        self, repository: str, pulls: list[pb.PullRequest], context: grpc.ServicerContext
    ) -> list[api.PullRequestInfo]:
        repo, deadline = self._repository(repository, context)  # one repository read for all of them
        standings = [self.g.pulls.standing(repo, pull, deadline) for pull in pulls]
        infos = []
        for pull, standing in zip(pulls, standings, strict=True):
            shown = pb.PullRequest()
            shown.CopyFrom(pull)
            shown.ClearField("merge_claim")  # the claim token is the merging call's own
            infos.append(
                api.PullRequestInfo(
                    pull_request=shown,
                    approvals=standing.approvals,
                    required_approvals=standing.required,
                    merge_blocked_reason=standing.blocked_reason,
                    required_checks=standing.required_checks,
                )
            )
        return infos

    def _pull_info(self, repository: str, pull: pb.PullRequest, context: grpc.ServicerContext) -> api.PullRequestInfo:
        return self._pull_infos(repository, [pull], context)[0]

    def CreatePullRequest(
        self, request: api.CreatePullRequestRequest, context: grpc.ServicerContext
    ) -> api.PullRequestInfo:
        author, caller = self._user(request.author)
        pull = self.g.pulls.create(
            self.g.refs.repository(request.repository, _deadline(context)),
            request.title,
            request.description,
            request.source_branch,
            request.destination_branch,
            author,
            caller,
        )
        self.g.checks.opened(self.g.refs.repository(request.repository), pull)
        return self._pull_info(
            request.repository, self.g.pulls.get(self.g.refs.repository(request.repository), pull.id), context
        )

    def GetPullRequest(self, request: api.GetPullRequestRequest, context: grpc.ServicerContext) -> api.PullRequestInfo:
        pull = self.g.pulls.get(self.g.refs.repository(request.repository, _deadline(context)), request.id)
        return self._pull_info(request.repository, pull, context)

    def ListPullRequests(
        self, request: api.ListPullRequestsRequest, context: grpc.ServicerContext
    ) -> api.ListPullRequestsResponse:
        repo, deadline = self._repository(request.repository, context)
        pulls, more, next_after = self.g.pulls.list_page(repo, request.status, request.after, request.amount, deadline)
        return api.ListPullRequestsResponse(
            pull_requests=self._pull_infos(request.repository, pulls, context), has_more=more, next_after=next_after
        )

    def UpdatePullRequest(
        self, request: api.UpdatePullRequestRequest, context: grpc.ServicerContext
    ) -> api.PullRequestInfo:
        repo, deadline = self._repository(request.repository, context)
        was_open = self.g.pulls.get(repo, request.id).status == pb.PULL_REQUEST_STATUS_OPEN
        pull = self.g.pulls.update(
            repo,
            request.id,
            request.title if request.HasField("title") else None,
            request.description if request.HasField("description") else None,
            request.status,
            deadline,
        )
        if not was_open and pull.status == pb.PULL_REQUEST_STATUS_OPEN:  # reopened: checked afresh
            self.g.checks.opened(repo, pull)
            pull = self.g.pulls.get(repo, pull.id)
        return self._pull_info(request.repository, pull, context)

    def RerunPullRequestCheck(
        self, request: api.RerunPullRequestCheckRequest, context: grpc.ServicerContext
    ) -> api.PullRequestInfo:
        repo, deadline = self._repository(request.repository, context)
        pull = self.g.checks.rerun(repo, request.id, request.name, deadline)
        return self._pull_info(request.repository, pull, context)

    # actions
    def ListActionRuns(
        self, request: api.ListActionRunsRequest, context: grpc.ServicerContext
    ) -> api.ListActionRunsResponse:
        repo, deadline = self._repository(request.repository, context)
        runs, more, next_after = self.g.actions.runs.list_page(
            repo, request.branch, request.commit_id, request.after, request.amount, deadline
        )
        return api.ListActionRunsResponse(runs=runs, has_more=more, next_after=next_after)

    def GetActionRun(self, request: api.GetActionRunRequest, context: grpc.ServicerContext) -> pb.ActionRun:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return self.g.actions.runs.get(repo, request.run_id)

    def MergePullRequest(
        self, request: api.MergePullRequestRequest, context: grpc.ServicerContext
    ) -> api.MergePullRequestResponse:
        metadata = _unreserved(dict(request.metadata))
        strategy = _STRATEGY.get(request.strategy)
        if strategy is None:
            raise InvalidArgument(f"unknown merge strategy {request.strategy}")
        repo, deadline = self._repository(request.repository, context)
        # The destination is fixed when the pull request is opened: the merge commits there.
        destination = self.g.pulls.get(repo, request.id).destination_branch
        if self._authorized and not self._may(COMMIT_BRANCH, branch_resource(request.repository, destination)):
            raise PermissionDenied(f"the caller may not {COMMIT_BRANCH} on {request.repository}@{destination}")
        committer = self._committing(request.committer, COMMIT_BRANCH, request.repository, destination)
        check = self._key_check(request.repository, destination, request.committer)
        pull, outcome = self.g.pulls.merge(
            repo,
            request.id,
            strategy,
            request.message,
            metadata,
            committer,
            deadline,
            check,
            self._event_user(request.committer),
            Resolutions(
                [_resolution(r) for r in request.resolutions], repo.namespace, self.g.options.allowed_import_prefixes
            ),
        )
        if outcome.commit is not None:  # a push to the destination: pull requests from it are checked again
            self.g.checks.pushed(repo, pull.destination_branch)
        self._merge_event(ev.MERGE, request.repository, pull.destination_branch, request.committer, outcome)
        return api.MergePullRequestResponse(
            pull_request=self._pull_info(request.repository, pull, context), merge=_merge_response(outcome)
        )

    def AddPullRequestComment(
        self, request: api.AddPullRequestCommentRequest, context: grpc.ServicerContext
    ) -> pb.PullRequestComment:
        author, caller = self._user(request.author)
        repo = self.g.refs.repository(request.repository, _deadline(context))
        return self.g.pulls.comment(repo, request.id, author, request.body, caller)

    def ListPullRequestComments(
        self, request: api.ListPullRequestCommentsRequest, context: grpc.ServicerContext
    ) -> api.ListPullRequestCommentsResponse:
        repo = self.g.refs.repository(request.repository, _deadline(context))
        comments, more = self.g.pulls.comments(repo, request.id, request.after, request.amount)
        return api.ListPullRequestCommentsResponse(comments=comments, has_more=more)

    def SubmitPullRequestReview(
        self, request: api.SubmitPullRequestReviewRequest, context: grpc.ServicerContext
    ) -> api.PullRequestInfo:
        author, caller = self._user(request.author)
        repo, deadline = self._repository(request.repository, context)
        pull = self.g.pulls.review(repo, request.id, author, request.verdict, request.body, deadline, caller)
        return self._pull_info(request.repository, pull, context)

    def ListPullRequestReviews(
        self, request: api.ListPullRequestReviewsRequest, context: grpc.ServicerContext
    ) -> api.ListPullRequestReviewsResponse:
        pull = self.g.pulls.get(self.g.refs.repository(request.repository, _deadline(context)), request.id)
        return api.ListPullRequestReviewsResponse(reviews=pull.reviews)


_STRATEGY: dict[int, MergeStrategy] = {
    api.MERGE_STRATEGY_FAIL: "fail",
    api.MERGE_STRATEGY_SOURCE_WINS: "source-wins",
    api.MERGE_STRATEGY_DEST_WINS: "dest-wins",
}


def _entry(record: Record | None) -> pb.Entry | None:
    return None if record is None else decode_entry(record.value)


def _resolution(resolution: api.MergeResolution) -> MergeResolution:
    return MergeResolution(
        resolution.key,
        resolution.expected_source if resolution.HasField("expected_source") else None,
        resolution.expected_destination if resolution.HasField("expected_destination") else None,
        resolution.result if resolution.HasField("result") else None,
    )


def _merge_response(outcome: MergeOutcome) -> api.MergeResponse:
    if outcome.commit is not None:
        return api.MergeResponse(commit=commit_info(outcome.commit))
    return api.MergeResponse(
        conflicts=[
            api.Conflict(key=c.key.decode(), base=_entry(c.base), source=_entry(c.source), destination=_entry(c.dest))
            for c in outcome.conflicts
        ],
        conflicts_truncated=outcome.conflicts_truncated,
    )
