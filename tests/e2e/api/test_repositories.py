"""Repositories through lakefs-sdk: create, get, list with paging, delete, metadata."""

from __future__ import annotations

import json
import secrets

import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.e2e.api.conftest import Api


def test_create_get_and_delete(api: Api, client: lakefs_sdk.ApiClient) -> None:
    repos = lakefs_sdk.RepositoriesApi(client)
    name = f"c-{secrets.token_hex(5)}"
    created = repos.create_repository(
        lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}", default_branch="trunk")
    )
    assert (created.id, created.default_branch, created.storage_namespace) == (name, "trunk", f"local://{name}")
    assert created.creation_date > 0
    assert repos.get_repository(name) == created
    assert repos.get_repository_metadata(name) == {}
    # Its first commit is lakeFS's "Repository created", on the default branch.
    log = lakefs_sdk.RefsApi(client).log_commits(name, "trunk")
    assert [c.message for c in log.results] == ["Repository created"]
    with pytest.raises(ApiException) as exists:
        repos.create_repository(lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}-2"))
    assert exists.value.status == 409
    # With sample data asked for, an existing name is still 409 (lakeFS's `exist_ok` callers).
    with pytest.raises(ApiException) as sample:
        repos.create_repository(
            lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}", sample_data=True)
        )
    assert sample.value.status == 409
    with pytest.raises(ApiException) as unsupported:
        repos.create_repository(
            lakefs_sdk.RepositoryCreation(name=name + "-s", storage_namespace=f"local://{name}-s", read_only=True)
        )
    assert unsupported.value.status == 400 and "read-only" in json.loads(unsupported.value.body)["message"]
    response = api.request("DELETE", f"/repositories/{name}")
    assert response.status == 204 and response.data == b""
    with pytest.raises(ApiException) as gone:
        repos.get_repository(name)
    assert gone.value.status == 404 and json.loads(gone.value.body)["message"]


def test_a_repository_without_a_namespace_gets_one_under_the_allowed_root(api: Api) -> None:
    name = f"n-{secrets.token_hex(5)}"
    response = api.request(
        "POST", "/repositories", json={"name": name}, headers={**_admin(api), "Content-Type": "application/json"}
    )
    assert response.status == 201, response.data
    created = lakefs_sdk.Repository.from_json(response.data.decode())
    assert created.id == name and created.storage_namespace.startswith("local://")
    assert created.default_branch == "main"


def _admin(api: Api) -> dict[str, str]:
    import urllib3

    admin = api.stack.admin
    return urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")


def test_list_pages_in_order_with_after_exclusive_and_prefix(client: lakefs_sdk.ApiClient) -> None:
    repos = lakefs_sdk.RepositoriesApi(client)
    prefix = f"p{secrets.token_hex(3)}-"
    names = sorted(f"{prefix}{i:02d}" for i in range(7))
    for name in names:
        repos.create_repository(lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}"))
    seen: list[str] = []
    after = ""
    pages = 0
    while True:
        page = repos.list_repositories(prefix=prefix, after=after, amount=3)
        assert page.pagination.max_per_page == 3
        assert page.pagination.results == len(page.results) <= 3
        seen += [r.id for r in page.results]
        pages += 1
        if not page.pagination.has_more:
            assert page.pagination.next_offset == ""
            break
        assert page.pagination.next_offset == page.results[-1].id
        after = page.pagination.next_offset
    assert seen == names and pages == 3
    # `after` is exclusive; `search` matches anywhere in the name.
    assert [r.id for r in repos.list_repositories(prefix=prefix, after=names[2]).results] == names[3:]
    assert [r.id for r in repos.list_repositories(search=f"{prefix}0", amount=1000).results] == names
    assert [r.id for r in repos.list_repositories(prefix=prefix + "05").results] == [names[5]]
    # The default page is 100.
    assert repos.list_repositories(prefix=prefix).pagination.max_per_page == 100
