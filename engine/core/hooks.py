"""The events hooks run on, what a hook is told about one (lakeFS's event payload), and the
protocol through which the core and the features fire them (Hooks), without knowing what runs
them: engine/actions/ implements it, as lakeFS's pkg/actions implements graveler's HooksHandler.

A HookRecord is what graveler knows of an operation when it fires an event. Its `source_ref`
is where the action files are read (lakeFS's choice for each event: the branch being committed
to, the commit merged from, the ref a branch is created from, the commit a tag names, and for a
post-event the commit the operation made). The payload a webhook receives and a Lua hook's
`action` are built from it, with lakeFS's field names.

A record also names the user whose operation fired the event (`user`): a Lua hook's `lakefs`
calls read as that user, as lakeFS's Lua client acts as the user who triggered the action
(engine/actions/read_access.py). It is not part of the payload.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from engine.core.deadline import NO_DEADLINE, Deadline

if TYPE_CHECKING:
    from engine.core.refs import BranchRecord, RepoHandle
    from silt.graveler.v1 import model_pb2 as pb

PRE_EVENTS = (
    "pre-commit",
    "pre-merge",
    "pre-create-branch",
    "pre-delete-branch",
    "pre-create-tag",
    "pre-delete-tag",
    "pre-revert",
    "pre-cherry-pick",
)
POST_EVENTS = tuple("post-" + e[len("pre-") :] for e in PRE_EVENTS)
# Silt's own: a pull request opened or its source pushed to; runs asynchronously as a check.
PULL_REQUEST = "pull-request"
EVENT_TYPES = (*PRE_EVENTS, *POST_EVENTS, PULL_REQUEST)


def is_tag_event(event_type: str) -> bool:
    return event_type.endswith("-tag")


def post_of(pre_event: str) -> str:
    return "post-" + pre_event[len("pre-") :]


@dataclass(frozen=True)
class EventUser:
    """The user an operation is made by or for, and the address their request came from ("" unknown),
    as graveler judged them for the operation itself."""

    user_id: str
    source_ip: str = ""


@dataclass(frozen=True)
class HookRecord:
    event_type: str
    repository: str
    source_ref: str
    branch_id: str = ""
    tag_id: str = ""
    commit_id: str = ""
    commit_message: str = ""
    committer: str = ""
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    merge_source: str = ""
    pre_run_id: str = ""
    pull_request_id: str = ""
    pull_request_action: str = ""  # opened, updated, rerun
    # Where the action files are read, when not source_ref: a pull request's checks come from its
    # destination, so that whoever opens one cannot rewrite the checks it must pass.
    actions_ref: str = ""
    # Whether the ref the actions are read at is a commit id (immutable: its actions are cached);
    # a branch may be named like one, so the name's shape does not say.
    immutable: bool = False
    # Who fired the event; None: nobody known, and a hook then reads nothing (fails closed).
    user: EventUser | None = None

    @classmethod
    def pre_merge(
        cls,
        repository: str,
        source_commit: str,
        destination: str,
        source_name: str,
        message: str,
        committer: str,
        metadata: Mapping[str, str] | None,
        user: EventUser | None = None,
    ) -> HookRecord:
        """A merge's pre-merge event (a merge's or a pull request's): read at the source commit
        the merge decided on, an immutable ref, so that a push to the source meanwhile is
        neither shown to the hooks nor merged."""
        return cls(
            "pre-merge",
            repository,
            source_commit,
            branch_id=destination,
            merge_source=source_name,
            immutable=True,
            commit_message=message,
            committer=committer,
            commit_metadata=dict(metadata or {}),
            user=user,
        )

    @property
    def actions_at(self) -> str:
        return self.actions_ref or self.source_ref

    def payload(self, action_name: str, hook_id: str) -> dict[str, Any]:
        """lakeFS's event information, fields that are empty left out as lakeFS does."""
        info: dict[str, Any] = {
            "event_type": self.event_type,
            "event_time": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "action_name": action_name,
            "hook_id": hook_id,
            "repository_id": self.repository,
        }
        optional: dict[str, Any] = {
            "branch_id": self.branch_id,
            "source_ref": self.source_ref,
            "tag_id": self.tag_id,
            "commit_id": self.commit_id,
            "commit_message": self.commit_message,
            "committer": self.committer,
            "commit_metadata": dict(self.commit_metadata),
            "merge_source": self.merge_source,
            "pre_run_id": self.pre_run_id,
            "pull_request_id": self.pull_request_id,
            "pull_request_action": self.pull_request_action,
        }
        info.update({k: v for k, v in optional.items() if v})
        return info


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


class Hooks(Protocol):
    """What runs an operation's hooks: the pre-event ones before it (they may stop it), the
    post-event ones after it (they may not)."""

    def pre(
        self, repo: RepoHandle, record: HookRecord, deadline: Deadline = NO_DEADLINE, at: BranchRecord | None = None
    ) -> str:
        """Run the pre-event hooks of record; the run id ("" if none matched). Raises to stop the
        operation (a hook failed, an action file is broken)."""
        ...

    def name_commit(self, repo: RepoHandle, run_id: str, commit_id: str) -> None:
        """Record the commit a pre-event run let through (best effort)."""
        ...

    def post(self, repo: RepoHandle, record: HookRecord) -> None:
        """Run the post-event hooks of record; their failures are only recorded."""
        ...


class BranchWatch(Protocol):
    """What re-runs when a branch moves to a commit an operation made (pull requests' checks)."""

    def pushed(self, repo: RepoHandle, branch: str) -> None: ...


def after_commit(hooks: Hooks, repo: RepoHandle, record: HookRecord, pre_run: str, commit: pb.Commit) -> None:
    """What follows an operation that made a commit: its pre-event run names the commit, and the
    post-event hooks run, told of the commit."""
    if pre_run:
        hooks.name_commit(repo, pre_run, commit.id)
    hooks.post(
        repo,
        dataclasses.replace(
            record,
            event_type=post_of(record.event_type),
            source_ref=commit.id,
            commit_id=commit.id,
            commit_message=commit.message,
            committer=commit.committer,
            commit_metadata=dict(commit.metadata),
            pre_run_id=pre_run,
            immutable=True,
        ),
    )
