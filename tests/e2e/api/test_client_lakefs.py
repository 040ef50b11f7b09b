"""lakeFS's high-level Python client (`lakefs`) driving a whole scenario against the REST API: it
reads /config for the storage settings, and since they say presigned URLs are supported its
uploads go through getPhysicalAddress, a presigned PUT and linkPhysicalAddress, its reads are
ranged GETs of presigned URLs (test_presign.py covers its raw uploads, chunked POSTs with
`x-lakefs-meta-*` headers); its listings follow `next_offset`."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator

import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client
from lakefs.exceptions import (
    BadRequestException,
    ConflictException,
    NotFoundException,
    ObjectExistsException,
    ObjectNotFoundException,
)

from tests.e2e.api.conftest import Api


@pytest.fixture(scope="module")
def lakefs_client(api: Api) -> Client:
    admin = api.stack.admin
    # The endpoint as a user gives it: the client adds /api/v1 itself.
    return Client(
        host=api.stack.endpoint,
        username=admin.access_key_id,
        password=admin.secret_access_key.get_secret_value(),
    )


@pytest.fixture
def repository(lakefs_client: Client) -> Iterator[lakefs.Repository]:
    name = f"hl-{secrets.token_hex(5)}"
    repo = lakefs.Repository(name, client=lakefs_client).create(storage_namespace=f"local://{name}")
    yield repo
    repo.delete()


def test_client_reads_the_server_configuration(lakefs_client: Client) -> None:
    assert lakefs_client.version == lakefs_sdk.__version__
    storage = lakefs_client.storage_config
    # Presigned URLs are on: the client's uploads and reads below go through them by default.
    assert storage.pre_sign_support is True and storage.blockstore_type


def test_repository_properties_and_exist_ok(lakefs_client: Client, repository: lakefs.Repository) -> None:
    props = repository.properties
    assert props.id == repository.id and props.default_branch == "main"
    assert props.storage_namespace == f"local://{repository.id}" and props.storage_id == ""
    again = lakefs.Repository(repository.id, client=lakefs_client).create(
        storage_namespace=f"local://{repository.id}", exist_ok=True
    )
    assert again.properties == props
    with pytest.raises(ConflictException):
        lakefs.Repository(repository.id, client=lakefs_client).create(storage_namespace=f"local://{repository.id}")
    assert repository.id in [r.id for r in lakefs.repositories(client=lakefs_client, prefix=repository.id)]
    first = repository.ref("main").get_commit()
    assert first.message == "Repository created" and first.metadata == {}


def test_upload_read_stat_list_and_delete(repository: lakefs.Repository) -> None:
    main = repository.branch("main")
    data = b"id,name\n1,alice\n2,bob\n"
    obj = main.object("people/all.csv").upload(data, mode="wb", content_type="text/csv", metadata={"owner": "ana"})
    stat = obj.stat()
    assert (stat.path, stat.size_bytes, stat.content_type) == ("people/all.csv", len(data), "text/csv")
    assert stat.checksum == hashlib.md5(data).hexdigest() and stat.metadata == {"owner": "ana"}
    with obj.reader("rb") as reader:
        assert reader.read() == data
    with obj.reader("rb") as reader:
        reader.seek(8)
        assert reader.read(7) == b"1,alice"
        # A read past the end returns what is there, then nothing.
        assert reader.read(100) == data[15:]
        assert reader.read(1) == b""
    with obj.reader("r") as text:
        assert text.readline() == "id,name\n"

    with pytest.raises(ObjectExistsException):
        main.object("people/all.csv").upload(b"other", mode="xb")
    for i in range(12):
        main.object(f"people/p{i:02d}.csv").upload(f"{i}\n")
    # Pages of five: the client follows next_offset until has_more is false.
    listed = [o.path for o in main.objects(prefix="people/", amount=5)]
    assert listed == ["people/all.csv"] + [f"people/p{i:02d}.csv" for i in range(12)]
    assert [o.path for o in main.objects(prefix="people/p", max_amount=3, amount=2)] == [
        "people/p00.csv",
        "people/p01.csv",
        "people/p02.csv",
    ]
    top = list(main.objects(delimiter="/"))
    assert [(type(o).__name__, o.path) for o in top] == [("CommonPrefix", "people/")]

    copied = obj.copy("main", "copies/all.csv")
    assert copied.stat().checksum == stat.checksum and copied.stat().metadata == {"owner": "ana"}
    main.object("people/p00.csv").delete()
    main.delete_objects(["people/p01.csv", "people/p02.csv"])
    assert not main.object("people/p01.csv").exists()
    with pytest.raises(ObjectNotFoundException):
        main.object("people/p00.csv").stat()
    assert {c.path for c in main.uncommitted() if c.type == "added"} >= {"people/all.csv", "copies/all.csv"}


def test_branch_commit_diff_merge_log_and_tags(repository: lakefs.Repository) -> None:
    main = repository.branch("main")
    main.object("a.txt").upload("a0")
    base = main.commit("base", metadata={"step": "1"})
    dev = repository.branch("dev").create(main)
    assert dev.head.id == base.id
    dev.object("a.txt").upload("a1")
    dev.object("b.txt").upload("b1")
    assert sorted((c.type, c.path) for c in dev.uncommitted()) == [("added", "b.txt"), ("changed", "a.txt")]
    dev_commit = dev.commit("dev work")
    changes = list(main.diff(dev))
    assert [(c.type, c.path) for c in changes] == [("changed", "a.txt"), ("added", "b.txt")]

    merge_id = dev.merge_into(main, message="merge dev")
    merged = repository.commit(merge_id).get_commit()
    assert merged.message == "merge dev" and merged.parents == [base.id, dev_commit.id]
    with main.object("a.txt").reader("r") as fd:
        assert fd.read() == "a1"
    with pytest.raises(BadRequestException, match="no changes"):
        dev.merge_into(main)

    log_of_b = [c.id for c in main.log(objects=["b.txt"])]
    assert log_of_b == [merge_id, dev_commit.id]
    assert [c.message for c in main.log(max_amount=3)] == ["merge dev", "dev work", "base"]

    tag = repository.tag("v1").create(base)
    assert tag.get_commit().id == base.id
    with pytest.raises(ConflictException):
        repository.tag("v1").create(main)
    repository.tag("v2").create(main)
    assert [t.id for t in repository.tags()] == ["v1", "v2"]
    with repository.ref("v1").object("a.txt").reader("r") as old:
        assert old.read() == "a0"
    tag.delete()
    with pytest.raises(NotFoundException):
        repository.tag("v1").get_commit()


def test_conflict_then_source_wins(repository: lakefs.Repository) -> None:
    main = repository.branch("main")
    main.object("cfg").upload("0")
    main.commit("zero")
    other = repository.branch("other").create(main)
    main.object("cfg").upload("main")
    main.commit("main edits")
    other.object("cfg").upload("other")
    other.commit("other edits")
    head = main.get_commit().id
    with pytest.raises(ConflictException):
        other.merge_into(main)
    assert main.get_commit().id == head
    other.merge_into(main, strategy="source-wins")
    with main.object("cfg").reader("r") as fd:
        assert fd.read() == "other"


def test_revert_reset_and_cherry_pick(repository: lakefs.Repository) -> None:
    main = repository.branch("main")
    main.object("v").upload("one")
    main.commit("one")
    main.object("v").upload("two")
    two = main.commit("two")
    reverted = main.revert(two)
    assert reverted.message.startswith("Revert") and reverted.parents == [two.id]
    with main.object("v").reader("r") as fd:
        assert fd.read() == "one"

    main.object("tmp/a").upload("x")
    main.object("tmp/b").upload("y")
    main.object("keep").upload("z")
    main.reset_changes("object", "tmp/a")
    assert sorted(c.path for c in main.uncommitted()) == ["keep", "tmp/b"]
    main.reset_changes("common_prefix", "tmp/")
    assert [c.path for c in main.uncommitted()] == ["keep"]
    main.reset_changes()
    assert list(main.uncommitted()) == []

    side = repository.branch("side").create(main)
    side.object("picked").upload("p")
    source = side.commit("pick me", metadata={"why": "test"}).get_commit()
    picked = main.cherry_pick(source)
    assert picked.message == "pick me" and picked.metadata is not None
    assert picked.metadata.get("why") == "test" and picked.metadata.get("cherry-pick-origin") == source.id
    assert main.object("picked").exists()


def test_transaction_commits_and_merges_back(repository: lakefs.Repository) -> None:
    main = repository.branch("main")
    with main.transact(commit_message="in a transaction", commit_metadata={"by": "test"}) as tx:
        tx.object("tx/one").upload("1")
        tx.object("tx/two").upload("2")
        # The transaction's branch is hidden from listings.
        assert [b.id for b in repository.branches()] == ["main"]
    log = list(main.log(max_amount=2))
    assert log[0].message.startswith("Merge transaction") and log[1].message == "in a transaction"
    assert log[1].metadata == {"by": "test"}
    assert main.object("tx/two").exists()
