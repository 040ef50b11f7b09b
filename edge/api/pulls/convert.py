"""Graveler's pull requests, reviews and comments as the REST API shows them.

A pull request is lakefs-sdk's `PullRequest`; Silt adds three fields the model does not name
(the SDK ignores them): `approvals`, `required_approvals`, `merge_blocked_reason`, `checks`
(its pull request checks, engine/actions/checks.py) and `required_checks`, so that a
UI can say why a merge is refused. Reviews and comments are Silt's own shapes (lakeFS has none).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import PullRequest

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

STATUS_NAMES = {
    pb.PULL_REQUEST_STATUS_OPEN: "open",
    pb.PULL_REQUEST_STATUS_CLOSED: "closed",
    pb.PULL_REQUEST_STATUS_MERGED: "merged",
}
STATUSES = {name: status for status, name in STATUS_NAMES.items()}
VERDICT_NAMES = {pb.REVIEW_VERDICT_APPROVE: "approve", pb.REVIEW_VERDICT_REQUEST_CHANGES: "request_changes"}
VERDICTS = {name: verdict for verdict, name in VERDICT_NAMES.items()}


def when(stamp: Timestamp) -> dt.datetime:
    return stamp.ToDatetime(tzinfo=dt.UTC)


def rfc3339(stamp: Timestamp) -> str:
    """As lakeFS writes a date-time (the SDK's model holds a datetime; JSON needs text)."""
    return when(stamp).isoformat().replace("+00:00", "Z")


def pull_request(info: api.PullRequestInfo) -> dict[str, Any]:
    pull = info.pull_request
    model = PullRequest(
        status=STATUS_NAMES.get(pull.status, "open"),
        title=pull.title,
        description=pull.description,
        id=pull.id,
        creation_date=when(pull.creation_date),
        author=pull.author,
        source_branch=pull.source_branch,
        destination_branch=pull.destination_branch,
        merged_commit_id=pull.merged_commit_id or None,
        closed_date=when(pull.closed_date) if pull.HasField("closed_date") else None,
    )
    body: dict[str, Any] = model.to_dict()
    body["creation_date"] = rfc3339(pull.creation_date)
    if pull.HasField("closed_date"):
        body["closed_date"] = rfc3339(pull.closed_date)
    body.update(
        approvals=info.approvals,
        required_approvals=info.required_approvals,
        merge_blocked_reason=info.merge_blocked_reason,
        checks=[check(c) for c in pull.checks],
        required_checks=list(info.required_checks),
    )
    return body


CHECK_STATUS_NAMES = {
    pb.CHECK_STATUS_PENDING: "pending",
    pb.CHECK_STATUS_RUNNING: "running",
    pb.CHECK_STATUS_PASSED: "passed",
    pb.CHECK_STATUS_FAILED: "failed",
}


def check(item: pb.PullRequestCheck) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "name": item.name,
        "status": CHECK_STATUS_NAMES.get(item.status, "pending"),
        "commit_id": item.commit_id,
        "run_id": item.run_id,
        "hook_run_id": item.hook_run_id,
        "error": item.error,
    }
    if item.HasField("started"):
        shown["started_at"] = rfc3339(item.started)
    if item.HasField("ended"):
        shown["ended_at"] = rfc3339(item.ended)
    return shown


def review(item: pb.PullRequestReview, head: str) -> dict[str, Any]:
    """`current`: whether the review is of the source's head commit, so that it counts."""
    return {
        "author": item.author,
        "verdict": VERDICT_NAMES.get(item.verdict, "approve"),
        "body": item.body,
        "creation_date": rfc3339(item.created),
        "commit_id": item.commit_id,
        "current": bool(head) and item.commit_id == head,
    }


def comment(item: pb.PullRequestComment) -> dict[str, Any]:
    return {
        "id": item.id,
        "author": item.author,
        "body": item.body,
        "creation_date": rfc3339(item.created),
    }
