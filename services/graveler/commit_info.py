"""A commit as the API answers it (CommitInfo), for every RPC that returns one."""

from __future__ import annotations

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb


def commit_info(commit: pb.Commit) -> api.CommitInfo:
    return api.CommitInfo(
        id=commit.id,
        committer=commit.committer,
        message=commit.message,
        metarange_id=commit.metarange_id,
        creation_date=commit.creation_date,
        parents=list(commit.parents),
        metadata=dict(commit.metadata),
        generation=commit.generation,
    )
