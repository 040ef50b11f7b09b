"""The journal's place in a storage namespace: write a batch once, list and read batches.

The block adapter interface has no listing (graveler never lists: committed objects are
named by content), so listing the batches goes to what is under the adapter: the local
adapter's directory tree, or the S3 client's ListObjectsV2, like the GC job's listing.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from typing import Any, BinaryIO

from silt.block.adapter import BlockAdapter
from silt.block.rules import split_namespace
from silt.errors import InvalidArgument, NotFound, Unavailable
from silt.journal.batch import BATCH_PREFIX, MAX_BATCH_BYTES
from silt.journal.mac import mac_key_of


class JournalBucket:
    def __init__(self, adapter: BlockAdapter, namespace: str) -> None:
        self._adapter = adapter
        self.namespace = namespace

    def put_once(self, key: str, data: bytes, mac: bytes) -> bool:
        """Write the batch and its MAC unless an object of that name exists (then it is this
        very batch: its name is the hash of its row keys). True if written.

        The MAC goes first: a batch in the bucket without one would be refused by rebuild,
        while a MAC without its batch is simply rewritten with it by the next round."""
        try:
            self._adapter.stat(self.namespace, key)
            return False
        except NotFound:
            pass
        mac_key = mac_key_of(key)
        self._adapter.put(self.namespace, mac_key, io.BytesIO(mac), len(mac))
        self._adapter.put(self.namespace, key, io.BytesIO(data), len(data))
        return True

    @contextlib.contextmanager
    def open(self, key: str) -> Iterator[BinaryIO]:
        """A batch as a stream, to be read once."""
        size = self._adapter.stat(self.namespace, key).size
        if size > MAX_BATCH_BYTES:
            raise InvalidArgument(f"journal batch {key} is {size} bytes, above the {MAX_BATCH_BYTES}-byte limit")
        with self._adapter.get(self.namespace, key) as stream:
            yield stream

    def read_mac(self, key: str) -> bytes | None:
        """The stored MAC of a batch; None if it has none."""
        try:
            with self._adapter.get(self.namespace, mac_key_of(key)) as stream:
                return stream.read(1024)
        except NotFound:
            return None

    def read(self, key: str) -> bytes:
        size = self._adapter.stat(self.namespace, key).size
        if size > MAX_BATCH_BYTES:
            raise InvalidArgument(f"journal batch {key} is {size} bytes, above the {MAX_BATCH_BYTES}-byte limit")
        with self._adapter.get(self.namespace, key) as stream:
            return stream.read()

    def batches(self) -> list[str]:
        """Keys of every batch in the namespace, sorted (so by hour, then batch id)."""
        return sorted(key for key in self._list(BATCH_PREFIX) if key.endswith(".parquet"))

    def _list(self, prefix: str) -> Iterator[str]:
        adapter = _bare(self._adapter)
        root = getattr(adapter, "root", None)
        if adapter.scheme == "local" and isinstance(root, str):
            yield from _list_local(root, self.namespace, prefix)
        elif adapter.scheme == "s3" and hasattr(adapter, "client"):
            yield from _list_s3(adapter.client, self.namespace, prefix)
        else:
            raise InvalidArgument(f"cannot list journal batches on a {adapter.scheme!r} blockstore")


def _bare(adapter: BlockAdapter) -> BlockAdapter:
    # A traced adapter wraps the real one (silt/telemetry/block.py).
    inner = getattr(adapter, "inner", None)
    return _bare(inner) if isinstance(inner, BlockAdapter) else adapter


def _list_local(root: str, namespace: str, prefix: str) -> Iterator[str]:
    name, parts = split_namespace(namespace, "local")
    base = os.path.join(root, name, *parts)
    top = os.path.join(base, *prefix.strip("/").split("/"))
    for directory, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = [d for d in dirs if not _bookkeeping(d)]
        relative = os.path.relpath(directory, base).replace(os.sep, "/")
        for file_name in files:
            if not _bookkeeping(file_name):
                yield f"{relative}/{file_name}"


def _list_s3(client: Any, namespace: str, prefix: str) -> Iterator[str]:
    bucket, parts = split_namespace(namespace, "s3")
    base = "/".join(parts) + "/" if parts else ""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base + prefix)
    try:
        listed = [item for page in pages for item in page.get("Contents", [])]
    except Exception as exc:  # botocore's errors: the store unreachable or refusing
        raise Unavailable(f"cannot list journal batches in s3://{bucket}/{base}{prefix}: {exc}") from None
    for item in listed:
        key = str(item["Key"])[len(base) :]
        if not any(_bookkeeping(part) for part in key[len(prefix) :].split("/")):
            yield key


def _bookkeeping(name: str) -> bool:
    """Names that are never batches: the local adapter's temporary and ETag files (".silt-"),
    Spark's output bookkeeping ("_temporary", "_SUCCESS", ".crc")."""
    return name.startswith((".", "_"))
