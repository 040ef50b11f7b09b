"""Import records on KV: partition ``<repo>-<unique id>``, key ``imports/<id>`` (model.proto's ImportRecord).

Several writers share a record: the runner (progress), the graveler thread that owns the
import (a heartbeat, then the outcome) and whoever cancels it, possibly from other processes.
Every change is a read-modify-set_if, so none is lost, and a change callback sees the record
as it is now: a cancel is never overwritten by a heartbeat.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable

from google.protobuf.timestamp_pb2 import Timestamp

from silt.errors import Aborted, InvalidArgument, NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

IMPORTS = b"imports/"
CANCELED = "Canceled"  # lakeFS's text: clients look for it in the status's error
_ID = re.compile(r"[0-9a-z]{1,64}")
_ATTEMPTS = 20


class ImportCanceled(Exception):
    """The import was canceled: whoever sees it stops and leaves the record as the cancel wrote it."""


def new_import_id() -> str:
    # 20 lowercase characters like lakeFS's xids; random, so ids are not guessable across repositories.
    return secrets.token_hex(10)


def check_import_id(import_id: str) -> bytes:
    if not _ID.fullmatch(import_id):
        raise InvalidArgument(f"invalid import id {import_id!r}")
    return IMPORTS + import_id.encode()


def stamp() -> Timestamp:
    now = Timestamp()
    now.FromNanoseconds(time.time_ns())
    return now


def is_open(record: pb.ImportRecord) -> bool:
    return not (record.completed or record.error)


class ImportRecords:
    def __init__(self, kv: Store) -> None:
        self._kv = kv

    def create(self, partition: bytes, record: pb.ImportRecord) -> None:
        self._kv.set_if(partition, check_import_id(record.id), record.SerializeToString(), None)

    def get(self, partition: bytes, import_id: str) -> pb.ImportRecord:
        try:
            got = self._kv.get(partition, check_import_id(import_id))
        except NotFound:
            raise NotFound(f"import {import_id!r} not found") from None
        record = pb.ImportRecord()
        record.ParseFromString(got.value)
        return record

    def change(self, partition: bytes, import_id: str, change: Callable[[pb.ImportRecord], bool]) -> pb.ImportRecord:
        """Apply change to the record as it is now and store it, unless change returns False.
        The record as stored afterwards (or as found, when nothing was written)."""
        key = check_import_id(import_id)
        for _ in range(_ATTEMPTS):
            try:
                got = self._kv.get(partition, key)
            except NotFound:
                raise NotFound(f"import {import_id!r} not found") from None
            record = pb.ImportRecord()
            record.ParseFromString(got.value)
            if not change(record):
                return record
            record.update_time.CopyFrom(stamp())
            try:
                self._kv.set_if(partition, key, record.SerializeToString(), got.predicate)
            except PredicateFailed:
                continue
            return record
        raise Aborted(f"import {import_id!r}: its record kept changing under {_ATTEMPTS} writes")

    def progress(self, partition: bytes, import_id: str, ingested: int) -> None:
        """Record progress; ImportCanceled if the import was canceled meanwhile."""

        def count(record: pb.ImportRecord) -> bool:
            if record.canceled:
                raise ImportCanceled
            record.ingested_objects = ingested
            return True

        self.change(partition, import_id, count)

    def beat(self, partition: bytes, import_id: str) -> bool:
        """Say the import is alive (update_time); False once it has ended or was canceled."""
        return is_open(self.change(partition, import_id, is_open))
