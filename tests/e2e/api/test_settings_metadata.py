"""Repository metadata through lakefs-sdk (set, get, delete keys), its bounds and permissions,
concurrent writers of different keys (one set_if each on the repository record: none lost),
and a re-created repository starting without the old one's labels."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ApiException

from silt.graveler.v1 import graveler_pb2 as api_pb
from tests.e2e.api.conftest import Api


def _send(api: Api, method: str, path: str, body: Any, reader: bool = False) -> Any:
    creds = api.stack.reader if reader else api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")
    headers["Content-Type"] = "application/json"
    return api.request(method, path, body=json.dumps(body).encode(), headers=headers)


@pytest.mark.filterwarnings("ignore:.* is deprecated:DeprecationWarning")
def test_set_get_delete(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    repositories = lakefs_sdk.RepositoriesApi(client)
    internal = lakefs_sdk.InternalApi(client)
    assert repositories.get_repository_metadata(repo) == {}
    internal.set_repository_metadata(repo, lakefs_sdk.RepositoryMetadataSet(metadata={"team": "data", "tier": "gold"}))
    internal.set_repository_metadata(repo, lakefs_sdk.RepositoryMetadataSet(metadata={"tier": "silver", "x": "1"}))
    assert repositories.get_repository_metadata(repo) == {"team": "data", "tier": "silver", "x": "1"}
    internal.delete_repository_metadata(repo, lakefs_sdk.RepositoryMetadataKeys(keys=["x", "never-set"]))
    assert repositories.get_repository_metadata(repo) == {"team": "data", "tier": "silver"}
    # The labels ride on the repository record: reading the repository still works as before.
    assert repositories.get_repository(repo).id == repo
    assert lakefs_sdk.RepositoriesApi(api.sdk(api.stack.reader)).get_repository_metadata(repo)["team"] == "data"


def test_bad_input_and_permissions(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    path = f"/repositories/{repo}/metadata"
    assert _send(api, "POST", path, {"metadata": {"k": "v"}}, reader=True).status == 403
    assert _send(api, "DELETE", path, {"keys": ["k"]}, reader=True).status == 403
    assert _send(api, "POST", path, {"metadata": {"k": 1}}).status == 400
    assert _send(api, "POST", path, {"metadata": "k"}).status == 400
    assert _send(api, "DELETE", path, {"keys": "k"}).status == 400
    too_long = _send(api, "POST", path, {"metadata": {"k" * 300: "v"}})
    assert too_long.status == 400 and "1..256 bytes" in json.loads(too_long.data)["message"]
    big_value = _send(api, "POST", path, {"metadata": {"k": "v" * 5000}})
    assert big_value.status == 400 and "longer than" in json.loads(big_value.data)["message"]
    assert _send(api, "POST", path, {"metadata": {"": "v"}}).status == 400
    many = {f"k{n}": "v" for n in range(101)}
    assert _send(api, "POST", path, {"metadata": many}).status == 400
    # Within bounds one at a time, the sum still counts.
    assert _send(api, "POST", path, {"metadata": dict(list(many.items())[:100])}).status == 204
    assert _send(api, "POST", path, {"metadata": {"one-more": "v"}}).status == 400
    assert len(lakefs_sdk.RepositoriesApi(client).get_repository_metadata(repo)) == 100
    assert _send(api, "POST", f"/repositories/{repo}-none/metadata", {"metadata": {"k": "v"}}).status == 404
    with pytest.raises(ApiException) as missing:
        lakefs_sdk.RepositoriesApi(client).get_repository_metadata(f"{repo}-none")
    assert missing.value.status == 404


def test_concurrent_writers_lose_nothing(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    path = f"/repositories/{repo}/metadata"
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda n: _send(api, "POST", path, {"metadata": {f"w{n}": str(n)}}), range(16)))
    assert {a.status for a in answers} == {204}
    assert lakefs_sdk.RepositoriesApi(client).get_repository_metadata(repo) == {f"w{n}": str(n) for n in range(16)}


def test_recreated_repository_starts_empty(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    repositories = lakefs_sdk.RepositoriesApi(client)
    assert _send(api, "POST", f"/repositories/{repo}/metadata", {"metadata": {"old": "yes"}}).status == 204
    info = api.stack.graveler.GetRepository(api_pb.GetRepositoryRequest(name=repo))
    assert dict(info.metadata) == {"old": "yes"}
    repositories.delete_repository(repo)
    repositories.create_repository(lakefs_sdk.RepositoryCreation(name=repo, storage_namespace=f"local://{repo}-2"))
    assert repositories.get_repository_metadata(repo) == {}
