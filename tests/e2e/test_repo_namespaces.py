"""`silt repo create` against the stack `make run` starts: the storage namespace is assigned
below the allowed root when not named, and a named one outside it, walking out of it, or
overlapping another repository's is refused without naming that repository."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import Silt

REPO = "ns-owner"


@pytest.fixture(scope="module")
def owner(silt: Silt) -> str:
    created = json.loads(silt("repo", "create", REPO, "--json").out)
    # The stack's blockstore is the local one: its whole store is the default root.
    assert created["storage_namespace"] == f"local://{REPO}"
    return REPO


@pytest.mark.parametrize(
    ("namespace", "why"),
    [
        ("s3://someone-elses-bucket/data", "outside the allowed namespace roots"),
        (f"local://{REPO}/../escape", "'..'"),
        (f"local://{REPO}//x", "empty path component"),
        (f"local://{REPO}", "overlaps an existing repository's"),
        # The REST API's schema (lakeFS's) takes only lower-case schemes; graveler's own check of
        # another spelling: tests/integration/graveler/test_namespaces.py.
        (f"LOCAL://{REPO}/inner/", "must validate the regular expression"),
    ],
)
def test_repo_create_refuses_a_namespace_it_may_not_take(silt: Silt, owner: str, namespace: str, why: str) -> None:
    result = silt("repo", "create", "ns-intruder", "-s", namespace, ok=False)
    assert result.code != 0
    assert why in result.err
    if "overlaps" in why:
        assert owner not in result.err.replace(namespace, "")
    assert silt("repo", "show", "ns-intruder", ok=False).code != 0
