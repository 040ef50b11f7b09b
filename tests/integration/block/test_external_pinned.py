"""A read of an imported object is pinned to the version its check saw: on GCS (fake-gcs-server)
and Azure (Azurite) the object's metadata is read, compared with the entry, and the read made
conditional on the generation / Azure ETag that metadata carried, so a source replaced between
the two steps answers SourceChanged instead of serving the replacement under the old entry.

The replacement happens deterministically inside the adapter's metadata read (after it
returned what it found), the one moment a second writer could slip in. On S3 (moto) the check
is the read itself (If-Match in the same GetObject): a replaced source is refused there too.

Nothing a writer of the source can set is trusted: a replacement of the same size carrying
Silt's ETag metadata (`silt-etag` / `silt_etag`) with the imported ETag is refused. An import
records the store's own version of the object (GCS generation, Azure ETag), and the reads of
such an entry ask for exactly that version.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from engine.features.imports.ingest import imported_record
from engine.features.imports.listing import Found
from silt.block import BlockAdapter
from silt.block.azure import ETAG_METADATA as AZURE_ETAG_METADATA
from silt.block.azure import AzureAdapter
from silt.block.external import ExternalFiles, source_reader, split_external
from silt.block.gcs import ETAG_METADATA as GCS_ETAG_METADATA
from silt.block.gcs import GCSAdapter
from silt.block.s3 import S3Adapter
from silt.errors import SourceChanged
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import SOURCE_VERSION_KEY
from tests.support.emulators import AZURITE_ACCOUNT

ORIGINAL = b"the bytes that were imported"
REPLACEMENT = b"other bytes, written later!!"  # same length: only the version tells them apart


@dataclass
class Landing:
    adapter: BlockAdapter
    landing: str  # where imported objects lie
    namespace: str  # the repository's own storage namespace
    # The adapter method that reads an object's metadata (what a check of the source reads).
    metadata_method: str


_GS = pytest.param("gs", marks=pytest.mark.gs)
_AZURE = pytest.param("azure", marks=pytest.mark.azure)
_S3 = pytest.param("s3", marks=pytest.mark.s3)


@pytest.fixture(params=[_GS, _AZURE, _S3])
def landing(request: pytest.FixtureRequest) -> Iterator[Landing]:
    yield from _landing(request)


@pytest.fixture(params=[_GS, _AZURE])
def versioned_landing(request: pytest.FixtureRequest) -> Iterator[Landing]:
    """The stores whose reads Silt pins by a check before the read (S3 checks If-Match in the
    read itself: no step between check and read, no metadata standing in for its ETag)."""
    yield from _landing(request)


def _landing(request: pytest.FixtureRequest) -> Iterator[Landing]:
    if request.param == "gs":
        bucket = request.getfixturevalue("gcs_bucket")
        adapter: BlockAdapter = request.getfixturevalue("gcs_adapter")
        assert isinstance(adapter, GCSAdapter)
        yield Landing(adapter, f"gs://{bucket}/landing", f"gs://{bucket}/lake/repo", "_reload")
    elif request.param == "azure":
        endpoint = request.getfixturevalue("azurite_server")
        container = request.getfixturevalue("azure_container")
        adapter = request.getfixturevalue("azure_adapter")
        assert isinstance(adapter, AzureAdapter)
        base = f"{endpoint}/{AZURITE_ACCOUNT}/{container}"
        yield Landing(adapter, f"{base}/landing", f"{base}/lake/repo", "_properties")
    else:
        bucket = request.getfixturevalue("s3_bucket")
        adapter = request.getfixturevalue("s3_adapter")
        assert isinstance(adapter, S3Adapter)
        yield Landing(adapter, f"s3://{bucket}/landing", f"s3://{bucket}/lake/repo", "_head")


def imported(env: Landing) -> tuple[pb.Entry, str, str]:
    """A source object and the entry an import records of it."""
    key = f"data/{uuid.uuid4().hex}"
    env.adapter.put(env.landing, key, io.BytesIO(ORIGINAL), len(ORIGINAL))
    found = env.adapter.stat(env.landing, key)
    entry = pb.Entry(physical_address=f"{env.landing}/{key}", size=found.size, etag=found.etag)
    namespace, name = split_external(entry.physical_address)
    return entry, namespace, name


def replace_after_metadata(env: Landing, monkeypatch: pytest.MonkeyPatch, namespace: str, key: str) -> list[int]:
    """Replace the source right after the adapter's next metadata read returned; the list
    counts the replacements made."""
    real: Callable[..., Any] = getattr(env.adapter, env.metadata_method)
    done: list[int] = []

    def then_replace(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        if not done:
            done.append(1)
            env.adapter.put(namespace, key, io.BytesIO(REPLACEMENT), len(REPLACEMENT))
        return found

    monkeypatch.setattr(env.adapter, env.metadata_method, then_replace)
    return done


@pytest.mark.parametrize("byte_range", [None, (4, 12)], ids=["whole", "range"])
def test_a_source_replaced_between_its_check_and_its_read_is_never_served(
    versioned_landing: Landing, monkeypatch: pytest.MonkeyPatch, byte_range: tuple[int, int] | None
) -> None:
    entry, namespace, key = imported(versioned_landing)
    reader = source_reader(versioned_landing.adapter, ExternalFiles(()), versioned_landing.namespace, entry)
    with reader.get(namespace, key) as stream:
        assert stream.read() == ORIGINAL  # unchanged: served

    replaced = replace_after_metadata(versioned_landing, monkeypatch, namespace, key)
    with pytest.raises(SourceChanged):
        if byte_range is None:
            reader.get(namespace, key).read()
        else:
            reader.get_range(namespace, key, *byte_range).read()
    assert replaced, "the source was never replaced: the test did not reach the read's check"
    monkeypatch.undo()
    # And it stays refused: the entry names the imported version only.
    with pytest.raises(SourceChanged):
        reader.get(namespace, key)


def test_a_source_replaced_after_the_import_is_refused(landing: Landing) -> None:
    entry, namespace, key = imported(landing)
    reader = source_reader(landing.adapter, ExternalFiles(()), landing.namespace, entry)
    with reader.get_range(namespace, key, 0, 3) as stream:
        assert stream.read() == ORIGINAL[:4]
    landing.adapter.put(namespace, key, io.BytesIO(REPLACEMENT), len(REPLACEMENT))
    for read in (lambda: reader.get(namespace, key), lambda: reader.get_range(namespace, key, 0, 3)):
        with pytest.raises(SourceChanged):
            read().read()
    with pytest.raises(SourceChanged):
        reader.stat(namespace, key)
    landing.adapter.delete(namespace, key)
    with pytest.raises(SourceChanged):
        reader.get(namespace, key)


def forge_etag_metadata(env: Landing, namespace: str, key: str, etag: str) -> None:
    """Set Silt's ETag metadata on the source, as anyone allowed to write it can."""
    if isinstance(env.adapter, GCSAdapter):
        bucket, name, _ = env.adapter._locate(namespace, key)
        blob = bucket.blob(name)
        blob.metadata = {GCS_ETAG_METADATA: etag}
        blob.patch()
    else:
        assert isinstance(env.adapter, AzureAdapter)
        env.adapter._locate(namespace, key).blob.set_blob_metadata({AZURE_ETAG_METADATA: etag})


def recorded_by_import(env: Landing, imported_entry: pb.Entry) -> pb.Entry:
    """The entry an import records of the source, from the store's listing as the import reads it."""
    namespace, key = split_external(imported_entry.physical_address)
    listing = list(env.adapter.list_objects(namespace, key))
    matching = [item for item in listing if item.key == key]
    assert len(matching) == 1, (key, listing)
    listed = matching[0]
    found = Found(listed.key, listed.size, listed.etag, 0, listed.version)
    entry = pb.Entry()
    entry.ParseFromString(imported_record(key.encode(), imported_entry.physical_address, found).value)
    return entry


@pytest.mark.parametrize("recorded", ["version", "no version"])
def test_a_replacement_carrying_the_imported_etag_as_silt_metadata_is_refused(
    versioned_landing: Landing, recorded: str
) -> None:
    entry, namespace, key = imported(versioned_landing)
    if recorded == "version":
        entry = recorded_by_import(versioned_landing, entry)
        assert entry.metadata[SOURCE_VERSION_KEY]
    else:
        entry.metadata.pop(SOURCE_VERSION_KEY, None)  # an entry imported before versions were recorded
    reader = source_reader(versioned_landing.adapter, ExternalFiles(()), versioned_landing.namespace, entry)
    with reader.get(namespace, key) as stream:
        assert stream.read() == ORIGINAL

    versioned_landing.adapter.put(namespace, key, io.BytesIO(REPLACEMENT), len(REPLACEMENT))
    forge_etag_metadata(versioned_landing, namespace, key, entry.etag)
    assert versioned_landing.adapter.stat(namespace, key).etag == entry.etag  # what the old check compared
    for read in (lambda: reader.get(namespace, key), lambda: reader.get_range(namespace, key, 0, 3)):
        with pytest.raises(SourceChanged):
            read().read()


def test_an_import_records_the_stores_version_and_reads_exactly_it(versioned_landing: Landing) -> None:
    entry, namespace, key = imported(versioned_landing)
    entry = recorded_by_import(versioned_landing, entry)
    assert entry.metadata[SOURCE_VERSION_KEY] == versioned_landing.adapter.stat(namespace, key).version != ""
    reader = source_reader(versioned_landing.adapter, ExternalFiles(()), versioned_landing.namespace, entry)
    with reader.get_range(namespace, key, 4, 12) as stream:
        assert stream.read() == ORIGINAL[4:13]
    # The same bytes written again are another version: not the one imported.
    versioned_landing.adapter.put(namespace, key, io.BytesIO(ORIGINAL), len(ORIGINAL))
    with pytest.raises(SourceChanged):
        reader.get(namespace, key).read()
