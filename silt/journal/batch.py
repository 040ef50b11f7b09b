"""Journal batches: shipped journal records as one Parquet object in the storage namespace.

    <namespace>/_silt/journal/v1/hour=<yyyy-mm-ddThh>/<batch id>.parquet

The hour is the UTC hour of the batch's oldest record; the batch id is the SHA-256 of the
batch's sorted row keys (unique: a row key names its writer and sequence), so shipping the
same rows again names the same object.

One Parquet row per record, the record's fields as columns and its changes as a
``list<struct>``: Spark reads and explodes them natively (the compaction job keeps the last
change per key without decoding protobuf), rebuild sorts on the order columns, and nothing
of the record is lost. The order range of the batch (first and last position) is also in
the file's key/value metadata, so a resumed rebuild can skip a batch from its footer.
"""

from __future__ import annotations

import hashlib
import io
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from silt.errors import InvalidArgument
from silt.journal.record import GUARD_KIND, STAGED_KIND
from silt.journal.v1.journal_pb2 import Change, Record

BATCH_PREFIX = "_silt/journal/v1/"
# Every batch read is held in memory whole; the shipper writes far smaller ones.
MAX_BATCH_BYTES = 256 * 1024 * 1024

CHANGE_TYPE = pa.struct(
    [
        pa.field("partition", pa.binary(), nullable=False),
        pa.field("key", pa.binary(), nullable=False),
        pa.field("op", pa.string(), nullable=False),  # "put" or "delete"
        pa.field("value", pa.binary(), nullable=False),  # as stored (envelope included); empty for delete
        pa.field("kind", pa.string(), nullable=False),
    ]
)
SCHEMA = pa.schema(
    [
        pa.field("logical_timestamp", pa.int64(), nullable=False),
        pa.field("writer_id", pa.string(), nullable=False),
        pa.field("sequence", pa.int64(), nullable=False),
        pa.field("client_id", pa.string(), nullable=False),
        pa.field("repository", pa.string(), nullable=False),
        pa.field("repository_partition", pa.string(), nullable=False),
        pa.field("event_type", pa.string(), nullable=False),
        pa.field("source_partition", pa.binary(), nullable=False),  # where the journal row was
        pa.field("changes", pa.list_(pa.field("item", CHANGE_TYPE, nullable=False)), nullable=False),
    ]
)
_OPS = {Change.PUT: "put", Change.DELETE: "delete"}
_OPS_BACK = {name: op for op, name in _OPS.items()}
FIRST_META = b"silt.journal.first"
LAST_META = b"silt.journal.last"

# Records decoded at a time when a batch is replayed: bounds rebuild's memory per open batch.
REPLAY_CHUNK_ROWS = 1_000
Source = bytes | BinaryIO  # a batch: its bytes, or a seekable file holding them

SHARED_PARTITION = b"graveler"  # graveler's partition shared by every repository

Position = tuple[int, str, int]  # (logical timestamp, writer id, sequence): the replay order


def position(record: Record) -> Position:
    return record.logical_timestamp, record.writer_id, record.sequence


@dataclass(frozen=True)
class ShippedRecord:
    source_partition: bytes
    row_key: bytes
    record: Record


def batch_id(row_keys: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for key in sorted(row_keys):
        digest.update(key)
        digest.update(b"\n")
    return digest.hexdigest()


def hour_of(logical_timestamp: int) -> str:
    return datetime.fromtimestamp(logical_timestamp / 1_000_000, UTC).strftime("%Y-%m-%dT%H")


def batch_key(records: Sequence[ShippedRecord]) -> str:
    """The object key (inside the namespace) of the batch holding records."""
    if not records:
        raise InvalidArgument("a journal batch holds at least one record")
    first = min(item.record.logical_timestamp for item in records)
    return f"{BATCH_PREFIX}hour={hour_of(first)}/{batch_id(item.row_key for item in records)}.parquet"


def encode_batch(records: Sequence[ShippedRecord]) -> bytes:
    """The Parquet bytes of records, in replay order."""
    ordered = sorted(records, key=lambda item: position(item.record))
    rows = [_row(item) for item in ordered]
    columns = {name: [row[name] for row in rows] for name in SCHEMA.names}
    metadata = {
        FIRST_META: _encode_position(position(ordered[0].record)),
        LAST_META: _encode_position(position(ordered[-1].record)),
    }
    table = pa.table(columns, schema=SCHEMA.with_metadata(metadata))
    sink = io.BytesIO()
    # Row groups of a chunk each: rebuild decodes one at a time, not the whole batch.
    pq.write_table(table, sink, compression="zstd", row_group_size=REPLAY_CHUNK_ROWS)
    return sink.getvalue()


def decode_batch(data: bytes) -> list[Record]:
    """The records of a batch, in replay order."""
    table = _read(data)
    records = [_record(row) for row in table.to_pylist()]
    records.sort(key=position)
    return records


class ReplayRecord(NamedTuple):
    """What rebuild needs of a record, without building protobuf messages: replay is bound by
    per-record Python work, and this is a fraction of it."""

    logical_timestamp: int
    writer_id: str
    sequence: int
    repository: str
    changes: list[tuple[bytes, bytes, bytes | None]]  # (partition, key, stored value; None: deleted)


def decode_for_replay(data: Source) -> list[ReplayRecord]:
    """The records of a batch for replay, in replay order, decoded column by column."""
    return _replay_records(_read(data))


def replay_chunks(data: Source, rows: int = REPLAY_CHUNK_ROWS) -> Iterator[list[ReplayRecord]]:
    """The records of a batch for replay, in replay order, a chunk of at most rows records at a
    time: a batch the shipper wrote is sorted (its footer says so) and is decoded as it is
    read; any other (the compaction job's) is read whole and sorted."""
    try:
        parquet = pq.ParquetFile(_source(data))
        metadata = parquet.schema_arrow.metadata or {}
        missing = set(SCHEMA.names) - set(parquet.schema_arrow.names)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidArgument(f"unreadable journal batch: {exc}") from None
    if missing:
        raise InvalidArgument(f"journal batch lacks columns {sorted(missing)}")
    if FIRST_META not in metadata:
        yield decode_for_replay(data)
        return
    try:
        for chunk in parquet.iter_batches(batch_size=rows):
            yield _replay_records(pa.Table.from_batches([chunk]))
    except (pa.ArrowException, OSError) as exc:
        raise InvalidArgument(f"unreadable journal batch: {exc}") from None


def _replay_records(table: pa.Table) -> list[ReplayRecord]:
    changes = table.column("changes").combine_chunks()
    flat = pc.list_flatten(changes)
    owners = pc.list_parent_indices(changes).to_pylist()
    partitions = flat.field("partition").to_pylist()
    keys = flat.field("key").to_pylist()
    values = flat.field("value").to_pylist()
    deleted = pc.equal(flat.field("op"), "delete").to_pylist()
    per_record: list[list[tuple[bytes, bytes, bytes | None]]] = [[] for _ in range(table.num_rows)]
    for owner, partition, key, value, is_delete in zip(owners, partitions, keys, values, deleted, strict=True):
        per_record[owner].append((partition, key, None if is_delete else value))
    # Plain tuples in ReplayRecord's field order: building a NamedTuple per record costs more
    # than the rest of decoding it.
    records: list[ReplayRecord] = list(
        zip(  # type: ignore[arg-type]
            table.column("logical_timestamp").to_pylist(),
            table.column("writer_id").to_pylist(),
            table.column("sequence").to_pylist(),
            table.column("repository").to_pylist(),
            per_record,
            strict=True,
        )
    )
    records.sort(key=REPLAY_ORDER)
    return records


REPLAY_ORDER = operator.itemgetter(0, 1, 2)  # a ReplayRecord's position


class BranchChange(NamedTuple):
    at: Position
    repository: str
    partition: bytes
    key: bytes
    value: bytes | None  # as stored; None: deleted


@dataclass
class TokenFacts:
    """What a batch says about staging tokens: its changes of branch records, and the partitions
    its staged values are in, each with the repository of its record."""

    branches: list[BranchChange]
    staged: set[tuple[str, bytes]]
    # Of the records of the repository asked about: every partition but ``graveler`` they
    # change, with the oldest logical timestamp and the number of changes there, and each of
    # their changes in ``graveler`` (the shared partition, checked key by key).
    partitions: dict[bytes, tuple[int, int]]
    shared: list[BranchChange]


def token_facts(data: Source, repository: str = "") -> TokenFacts:
    """The branch changes and the staged partitions of a batch, selected column-wise: only
    the few branch changes become Python objects, not the staged values around them."""
    table = _read(data)
    changes = table.column("changes").combine_chunks()
    flat = pc.list_flatten(changes)
    owners = pc.list_parent_indices(changes)
    kinds = flat.field("kind")
    repositories = table.column("repository").combine_chunks()

    is_branch = pc.equal(kinds, "branch")
    branch = flat.filter(is_branch)
    rows = owners.filter(is_branch)
    positions = zip(
        pc.take(table.column("logical_timestamp"), rows).to_pylist(),
        pc.take(table.column("writer_id"), rows).to_pylist(),
        pc.take(table.column("sequence"), rows).to_pylist(),
        strict=True,
    )
    branches = [
        BranchChange(at, repository, partition, key, None if op == "delete" else value)
        for at, repository, partition, key, op, value in zip(
            positions,
            pc.take(repositories, rows).to_pylist(),
            branch.field("partition").to_pylist(),
            branch.field("key").to_pylist(),
            branch.field("op").to_pylist(),
            branch.field("value").to_pylist(),
            strict=True,
        )
    ]

    # A token's guards are its rows too: a token holding only a guard (its writer died) is staged.
    is_staged = pc.is_in(kinds, value_set=pa.array([STAGED_KIND, GUARD_KIND]))
    staged = (
        pa.table(
            {
                "repository": pc.take(repositories, owners.filter(is_staged)),
                "partition": flat.filter(is_staged).field("partition"),
            }
        )
        .group_by(["repository", "partition"])
        .aggregate([])
    )
    mine = pc.equal(pc.take(repositories, owners), repository)
    timestamps = pc.take(table.column("logical_timestamp"), owners)
    is_shared = pc.equal(flat.field("partition"), pa.scalar(SHARED_PARTITION, pa.binary()))
    own = pa.table({"partition": flat.field("partition"), "at": timestamps}).filter(pc.and_(mine, pc.invert(is_shared)))
    touched = own.group_by("partition").aggregate([("at", "min"), ("at", "count")])
    partitions = dict(
        zip(
            touched.column("partition").to_pylist(),
            zip(touched.column("at_min").to_pylist(), touched.column("at_count").to_pylist(), strict=True),
            strict=True,
        )
    )
    in_shared = pc.and_(mine, is_shared)
    shared_rows = owners.filter(in_shared)
    shared_changes = flat.filter(in_shared)
    shared = [
        BranchChange(at, repository, partition, key, None if op == "delete" else value)
        for at, partition, key, op, value in zip(
            zip(
                pc.take(table.column("logical_timestamp"), shared_rows).to_pylist(),
                pc.take(table.column("writer_id"), shared_rows).to_pylist(),
                pc.take(table.column("sequence"), shared_rows).to_pylist(),
                strict=True,
            ),
            shared_changes.field("partition").to_pylist(),
            shared_changes.field("key").to_pylist(),
            shared_changes.field("op").to_pylist(),
            shared_changes.field("value").to_pylist(),
            strict=True,
        )
    ]
    return TokenFacts(
        branches,
        set(zip(staged.column("repository").to_pylist(), staged.column("partition").to_pylist(), strict=True)),
        partitions,
        shared,
    )


def batch_range(data: Source) -> tuple[Position, Position]:
    """The first and last position in a batch: from its footer, or (a file the compaction job
    wrote) from its order columns."""
    try:
        metadata = pq.ParquetFile(_source(data)).schema_arrow.metadata or {}
    except (pa.ArrowException, OSError) as exc:
        raise InvalidArgument(f"unreadable journal batch: {exc}") from None
    if FIRST_META in metadata and LAST_META in metadata:
        try:
            return _decode_position(metadata[FIRST_META]), _decode_position(metadata[LAST_META])
        except ValueError:
            raise InvalidArgument("journal batch with a malformed order range in its footer") from None
    table = pq.read_table(_source(data), columns=["logical_timestamp", "writer_id", "sequence"])
    positions = sorted(zip(*(table.column(name).to_pylist() for name in table.column_names), strict=True))
    if not positions:
        raise InvalidArgument("empty journal batch")
    return positions[0], positions[-1]


def _source(data: Source) -> BinaryIO:
    """A batch's bytes, or a seekable file holding them, as a file read from its start."""
    if isinstance(data, bytes):
        return io.BytesIO(data)
    data.seek(0)
    return data


def _read(data: Source) -> pa.Table:
    try:
        table = pq.read_table(_source(data))
    except (pa.ArrowException, OSError) as exc:
        raise InvalidArgument(f"unreadable journal batch: {exc}") from None
    missing = set(SCHEMA.names) - set(table.column_names)
    if missing:
        raise InvalidArgument(f"journal batch lacks columns {sorted(missing)}")
    return table


def _row(item: ShippedRecord) -> dict[str, object]:
    record = item.record
    return {
        "logical_timestamp": record.logical_timestamp,
        "writer_id": record.writer_id,
        "sequence": record.sequence,
        "client_id": record.client_id,
        "repository": record.repository,
        "repository_partition": record.repository_partition,
        "event_type": record.event_type,
        "source_partition": item.source_partition,
        "changes": [
            {
                "partition": change.partition,
                "key": change.key,
                "op": _OPS[change.op],
                "value": change.value,
                "kind": change.kind,
            }
            for change in record.changes
        ],
    }


def _record(row: dict[str, Any]) -> Record:
    changes = row["changes"]
    try:
        return Record(
            logical_timestamp=row["logical_timestamp"],
            writer_id=row["writer_id"],
            sequence=row["sequence"],
            client_id=row["client_id"],
            repository=row["repository"],
            repository_partition=row["repository_partition"],
            event_type=row["event_type"],
            changes=[
                Change(
                    partition=change["partition"],
                    key=change["key"],
                    op=_OPS_BACK[change["op"]],
                    value=change["value"],
                    kind=change["kind"],
                )
                for change in changes
            ],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"malformed journal batch row: {exc}") from None


def _encode_position(at: Position) -> bytes:
    return f"{at[0]}/{at[1]}/{at[2]}".encode()


def _decode_position(text: bytes) -> Position:
    timestamp, writer, sequence = text.decode().split("/")
    return int(timestamp), writer, int(sequence)
