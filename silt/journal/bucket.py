"""The journal's place in a storage namespace: write a batch once, list and read batches.

Batches are listed with the block adapter's listing, on every store.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import BinaryIO

from silt.block.adapter import BlockAdapter
from silt.errors import InvalidArgument, NotFound
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
        for item in self._adapter.list_objects(self.namespace, prefix):
            if not any(_bookkeeping(part) for part in item.key[len(prefix) :].split("/")):
                yield item.key


def _bookkeeping(name: str) -> bool:
    """Names that are never batches: the local adapter's temporary and ETag files (".silt-"),
    Spark's output bookkeeping ("_temporary", "_SUCCESS", ".crc")."""
    return name.startswith((".", "_"))
