"""The journal event type each graveler RPC is recorded under."""

from __future__ import annotations

import pytest

from services.graveler.journaling import event_type, repository_of
from silt.graveler.v1 import graveler_pb2 as api


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("/silt.graveler.v1.GravelerService/StageEntry", "object_write"),
        ("/silt.graveler.v1.GravelerService/DeleteEntry", "object_delete"),
        ("/silt.graveler.v1.GravelerService/Commit", "commit"),
        ("/silt.graveler.v1.GravelerService/ResetBranch", "reset"),
        ("/silt.graveler.v1.GravelerService/CherryPick", "cherry_pick"),
        ("/silt.graveler.v1.GravelerService/SetGCRules", "set_gc_rules"),
        ("/silt.graveler.v1.GravelerService/PrepareGC", "prepare_gc"),
        ("CreatePullRequest", "create_pull_request"),
        ("UpdateRepositoryMetadata", "update_repository_metadata"),
    ],
)
def test_event_types(method: str, expected: str) -> None:
    assert event_type(method) == expected


def test_every_rpc_has_its_own_event_type() -> None:
    methods = api.DESCRIPTOR.services_by_name["GravelerService"].methods_by_name
    assert len({event_type(name) for name in methods}) == len(methods)


def test_the_repository_of_a_request() -> None:
    assert repository_of(api.CommitRequest(repository="r1")) == "r1"
    assert repository_of(api.CreateRepositoryRequest(name="r2")) == "r2"
    assert repository_of(api.DeleteRepositoryRequest(name="r3")) == "r3"
    assert repository_of(api.ListRepositoriesRequest()) == ""
