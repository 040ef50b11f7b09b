"""Tags through lakefs-sdk's TagsApi, the `lakefs` high-level client, and raw requests for bad
input; commits are made with objects written by boto3 on the same port."""

from __future__ import annotations

import json
from typing import Any

import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import ConflictException, NotFoundException
from lakefs_sdk.exceptions import ApiException

from edge.api.paging import MAX_AFTER
from tests.e2e.api.conftest import Api
from tests.e2e.api.conftest import error_message as _message
from tests.e2e.api.conftest import json_post as _json_post


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


def _commit(client: lakefs_sdk.ApiClient, s3: Any, repo: str, key: str, message: str) -> str:
    s3.put_object(Bucket=repo, Key=f"main/{key}", Body=message.encode())
    commit: lakefs_sdk.Commit = lakefs_sdk.CommitsApi(client).commit(
        repo, "main", lakefs_sdk.CommitCreation(message=message)
    )
    return commit.id


def test_tag_create_list_get_delete(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    tags = lakefs_sdk.TagsApi(client)
    first = _commit(client, s3, repo, "a.txt", "first")
    second = _commit(client, s3, repo, "b.txt", "second")
    created = tags.create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main~1"))
    assert created == lakefs_sdk.Ref(id="v1", commit_id=first)
    # A branch, a commit id, a tag and ref expressions all name the commit to tag.
    assert tags.create_tag(repo, lakefs_sdk.TagCreation(id="v2", ref="main")).commit_id == second
    assert tags.create_tag(repo, lakefs_sdk.TagCreation(id="v2-again", ref="v2")).commit_id == second
    assert tags.create_tag(repo, lakefs_sdk.TagCreation(id="release", ref=first[:16])).commit_id == first
    assert tags.create_tag(repo, lakefs_sdk.TagCreation(id="root", ref="main^^")).commit_id not in (first, second)

    listed = tags.list_tags(repo)
    assert [t.id for t in listed.results] == ["release", "root", "v1", "v2", "v2-again"]
    assert not listed.pagination.has_more and listed.pagination.next_offset == ""
    page = tags.list_tags(repo, amount=2)
    assert [t.id for t in page.results] == ["release", "root"]
    assert page.pagination.has_more and page.pagination.next_offset == "root" and page.pagination.max_per_page == 2
    rest = tags.list_tags(repo, after="root", amount=2)
    assert [t.id for t in rest.results] == ["v1", "v2"] and rest.pagination.has_more
    assert [t.id for t in tags.list_tags(repo, prefix="v2").results] == ["v2", "v2-again"]
    assert [t.id for t in tags.list_tags(repo, prefix="v2", after="v2").results] == ["v2-again"]
    assert tags.list_tags(repo, prefix="zz").results == []

    assert tags.get_tag(repo, "v1") == lakefs_sdk.Ref(id="v1", commit_id=first)
    # A tag names its commit wherever a ref is taken.
    assert lakefs_sdk.CommitsApi(client).get_commit(repo, "v1").message == "first"
    tags.delete_tag(repo, "v1")
    with pytest.raises(ApiException) as gone:
        tags.get_tag(repo, "v1")
    assert gone.value.status == 404
    with pytest.raises(ApiException) as again:
        tags.delete_tag(repo, "v1")
    assert again.value.status == 404


def test_an_existing_tag_is_409_with_lakefs_text(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    tags = lakefs_sdk.TagsApi(client)
    head = tags.create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main")).commit_id
    message = _message(_json_post(api, f"/repositories/{repo}/tags", {"id": "v1", "ref": "main", "force": True}), 409)
    assert "tag already exists" in message
    # A tag named like a branch would make the name ambiguous.
    assert "conflict" in _message(_json_post(api, f"/repositories/{repo}/tags", {"id": "main", "ref": "main"}), 409)
    assert [t.id for t in tags.list_tags(repo).results] == ["v1"]
    assert tags.get_tag(repo, "v1").commit_id == head


@pytest.mark.parametrize("name", ["has space", "-dash", "a..b", "v1.lock", "x~1", "a@b", "", "t" * 300])
def test_invalid_tag_names_are_400_and_nothing_is_stored(api: Api, repo: str, name: str) -> None:
    message = _message(_json_post(api, f"/repositories/{repo}/tags", {"id": name, "ref": "main"}), 400)
    assert "tag name" in message
    assert json.loads(api.request("GET", f"/repositories/{repo}/tags").data)["results"] == []


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"id": "v1"}, "ref"),
        ({"ref": "main"}, "id"),
        ({"id": 5, "ref": "main"}, "id"),
        ({"id": "v1", "ref": ["m"]}, "ref"),
    ],
    ids=["no-ref", "no-id", "id-not-string", "ref-not-string"],
)
def test_malformed_tag_bodies_are_400(api: Api, repo: str, body: dict[str, Any], says: str) -> None:
    assert says in _message(_json_post(api, f"/repositories/{repo}/tags", body), 400)
    assert json.loads(api.request("GET", f"/repositories/{repo}/tags").data)["results"] == []


def test_unknown_refs_tags_and_repositories_are_404(api: Api, repo: str) -> None:
    _message(_json_post(api, f"/repositories/{repo}/tags", {"id": "v1", "ref": "no-such-branch"}), 404)
    _message(_json_post(api, f"/repositories/{repo}/tags", {"id": "v1", "ref": "main~5"}), 404)
    _message(_json_post(api, "/repositories/no-such-repo/tags", {"id": "v1", "ref": "main"}), 404)
    _message(api.request("GET", f"/repositories/{repo}/tags/nope"), 404)
    _message(api.request("GET", "/repositories/no-such-repo/tags"), 404)
    assert json.loads(api.request("GET", f"/repositories/{repo}/tags").data)["results"] == []


@pytest.mark.parametrize("query", ["amount=1001", "amount=1000000000", "amount=-2", "after=" + "a" * (MAX_AFTER + 1)])
def test_tag_paging_out_of_range_is_400(api: Api, repo: str, query: str) -> None:
    assert "invalid parameters" in _message(api.request("GET", f"/repositories/{repo}/tags?{query}"), 400)


def test_a_reader_lists_and_gets_but_cannot_create_or_delete(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    lakefs_sdk.TagsApi(client).create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    reader_tags = lakefs_sdk.TagsApi(api.sdk(api.stack.reader))
    assert [t.id for t in reader_tags.list_tags(repo).results] == ["v1"]
    assert reader_tags.get_tag(repo, "v1").id == "v1"
    with pytest.raises(ApiException) as create:
        reader_tags.create_tag(repo, lakefs_sdk.TagCreation(id="v2", ref="main"))
    assert create.value.status == 403
    with pytest.raises(ApiException) as delete:
        reader_tags.delete_tag(repo, "v1")
    assert delete.value.status == 403
    assert [t.id for t in lakefs_sdk.TagsApi(client).list_tags(repo).results] == ["v1"]
    anonymous = api.request("GET", f"/repositories/{repo}/tags", headers={})
    assert anonymous.status == 401


def test_tags_with_the_lakefs_client(api: Api, client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    admin = api.stack.admin
    lake = lakefs.Client(
        host=api.base, username=admin.access_key_id, password=admin.secret_access_key.get_secret_value()
    )
    repository = lakefs.Repository(repo, client=lake)
    first = _commit(client, s3, repo, "a.txt", "first")
    tag = repository.tag("v1").create("main")
    assert tag.get_commit().id == first and tag.get_commit().message == "first"
    with pytest.raises(ConflictException):
        repository.tag("v1").create("main")
    assert repository.tag("v1").create("main", exist_ok=True).get_commit().id == first
    second = _commit(client, s3, repo, "b.txt", "second")
    repository.tag("v2").create(repository.branch("main"))
    assert [(t.id, t.get_commit().id) for t in repository.tags()] == [("v1", first), ("v2", second)]
    assert [t.id for t in repository.tags(prefix="v2")] == ["v2"]
    assert [t.id for t in repository.tags(max_amount=1)] == ["v1"]
    repository.tag("v1").delete()
    assert [t.id for t in repository.tags()] == ["v2"]
    with pytest.raises(NotFoundException):
        repository.tag("v1").delete()
