"""The KV Store interface and the registry of its drivers (docs/design/kv.md).

Semantics every driver must honour (checked by tests/integration/kv/test_conformance.py):

* keys, partitions and values are bytes; keys and partitions are non-empty;
* ``get`` returns the value together with an opaque predicate for ``set_if``;
* ``set_if(.., predicate=None)`` succeeds only if the key does not exist;
* ``scan`` yields entries of one partition in ascending byte order of key, starting at
  or after ``start``, fetched lazily page by page so a scan never holds a whole
  partition in memory; ``scan_chunks`` yields the same entries as lists of consecutive
  ones, for loops that do their per-entry work a list at a time;
* a successful write is visible to every read that starts after it returns;
* ``apply`` writes and deletes several rows of one partition atomically and in isolation:
  all or none, and no reader sees some of them without the others.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, NewType, TypeVar

from silt.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from silt.config import DatabaseConfig

# The value a driver compares against in set_if. Callers must treat it as opaque:
# they get it from `get` and hand it back unchanged.
Predicate = NewType("Predicate", bytes)
_T = TypeVar("_T")


SCAN_CHUNK = 1000  # entries per list of scan_chunks, unless the caller asks for another size
MAX_SCAN_CHUNK = 10_001  # a listing page of 10,000 and the entry that tells whether more follow


def chunk_size(size: int) -> int:
    """size bounded to 1..MAX_SCAN_CHUNK."""
    return max(1, min(size, MAX_SCAN_CHUNK))


class ValueWithPredicate(NamedTuple):
    value: bytes
    predicate: Predicate


Pair = tuple[bytes, bytes]  # a key and its value, as scan_chunks gives them


class Entry(NamedTuple):
    key: bytes
    value: bytes


# Rows one apply may touch: a journaled mutation is a handful; the bound keeps a batch far
# from what Cassandra will take in one mutation.
MAX_APPLY_ROWS = 1000

# (key, predicate): apply only if key's current value matches predicate (None: key absent).
Condition = tuple[bytes, Predicate | None]


class AllOf(tuple[Condition, ...]):
    """Several conditions of one apply, each on its own key: the apply is made only if every
    one of them holds (a compare-and-set of several keys of one partition), and none of its
    rows is written otherwise.

    absence_is_final: the caller's promise that every key these conditions require absent is
    never absent again once written (its writers replace it, none deletes it, while the
    partition is in use). A copy of the apply still in flight can then never apply after a
    later copy has written the key, whatever is deleted in between, so a driver that cannot
    tell whether a send applied may send the apply again without waiting for that send's own
    answer, as it may when every condition is on a value (values that never repeat). Stores
    that never resend ignore it."""

    absence_is_final: bool

    def __new__(cls, conditions: Iterable[Condition] = (), *, absence_is_final: bool = False) -> AllOf:
        made = super().__new__(cls, conditions)
        made.absence_is_final = absence_is_final
        return made


# The write time of an apply's rows: one for all of them, or one per put, in order (a batch
# that stages values each at the stamp its own writer chose, in one atomic write).
Timestamp = int | tuple[int, ...]


class Store(abc.ABC):
    """A partitioned, byte-ordered key/value store with compare-and-set."""

    @abc.abstractmethod
    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        """Return the value of key; raise NotFound if it does not exist."""

    @abc.abstractmethod
    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        """Store value under key, replacing any existing value."""

    @abc.abstractmethod
    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        """Store value only if the current value matches predicate (None: key must be absent).

        Raise PredicateFailed otherwise.
        """

    @abc.abstractmethod
    def delete(self, partition: bytes, key: bytes) -> None:
        """Delete key if it exists; deleting a missing key is not an error."""

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        """Write puts and delete deletes in partition, atomically: all rows or none.

        With a condition (key, predicate), only if that key's current value matches predicate
        (None: the key must be absent); PredicateFailed otherwise, and nothing is written. The
        condition's key must be one of the rows written or deleted. AllOf(conditions): every
        one of them must hold, checked and written as one step. timestamp (microseconds)
        is the write time of every row of an unconditional apply, last write wins: a row
        stored with a newer timestamp is left as it is (every driver; Cassandra natively); a
        tuple gives each put its own (then nothing is deleted). It cannot be combined with a
        condition. See check_apply.

        The arguments are checked here, once for every driver: a driver implements
        apply_checked, which a wrapper also calls to pass a checked batch on unchecked.
        """
        self.apply_checked(check_apply(partition, puts, deletes, condition, timestamp))

    @abc.abstractmethod
    def apply_checked(self, batch: CheckedBatch) -> None:
        """apply, of a batch check_apply made: what a driver implements. A store that overrides
        apply itself (the journal's, which adds to the batch) makes this call its apply, so that
        a wrapper passing a checked batch on does not go around it."""

    def get_many(self, partition: bytes, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored values of those of keys that exist in partition, read at once: at the
        consistency of get (a driver may read them in one request)."""
        found: dict[bytes, bytes] = {}
        for key in keys:
            try:
                found[bytes(key)] = self.get(partition, key).value
            except NotFound:
                continue
        return found

    @abc.abstractmethod
    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        """Yield the entries of partition with key >= start, in ascending byte order."""

    def scan_chunks(self, partition: bytes, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[Sequence[Pair]]:
        """scan's entries as lists of consecutive (key, value) pairs, none empty, of at most size
        entries (at most MAX_SCAN_CHUNK): a caller wanting n entries asks for lists of n, and
        reads no more than it takes. The pairs may be plain tuples rather than Entry: a driver's
        rows pass through as they are read.

        A loop that resumes a generator per entry, layer over layer (driver, journal, staging,
        merge, page), spends more on the resumptions than on the work; one that takes a list at
        a time does not. Drivers that read pages read them in lists of this size.
        """
        return chunked(self.scan(partition, start), chunk_size(size))

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections and files. The store is unusable afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chunked(items: Iterable[_T], size: int = SCAN_CHUNK) -> Iterator[list[_T]]:
    """items as consecutive lists of at most size, none empty."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


# Bytes of one unconditional apply, as row_weight counts them, for writers that split many rows
# into several applies: well under the 50 KiB batch that Cassandra 2.2 to 3.5 refuse
# (batch_size_fail_threshold_in_kb), and small enough that one apply is one short transaction.
SPLIT_WRITE_BYTES = 16 * 1024


def row_weight(key: bytes, value: bytes | None) -> int:
    """What one row adds to an apply as Cassandra sizes a batch, over-estimated: its clustering
    key for the row marker and the value cell, 8-byte timestamps, component headers."""
    return 2 * (len(key) + 8) + (len(value) if value is not None else 0) + 64


def writes_by_weight(
    puts: Sequence[tuple[bytes, bytes]], deletes: Sequence[bytes] = (), limit: int = SPLIT_WRITE_BYTES
) -> Iterator[tuple[list[tuple[bytes, bytes]], list[bytes]]]:
    """puts and deletes as the (puts, deletes) of successive applies, each of at most `limit`
    bytes by row_weight (a larger row alone) and MAX_APPLY_ROWS rows, in their order."""
    some_puts: list[tuple[bytes, bytes]] = []
    some_deletes: list[bytes] = []
    size = 0
    for key, value in [*puts, *((key, None) for key in deletes)]:
        weight = row_weight(key, value)
        rows = len(some_puts) + len(some_deletes)
        if rows and (size + weight > limit or rows == MAX_APPLY_ROWS):
            yield some_puts, some_deletes
            some_puts, some_deletes, size = [], [], 0
        if value is None:
            some_deletes.append(key)
        else:
            some_puts.append((key, value))
        size += weight
    if some_puts or some_deletes:
        yield some_puts, some_deletes


def entries_of(chunks: Iterable[Sequence[Pair]]) -> Iterator[Entry]:
    """The entries of scan_chunks one by one, as Entry: scan in terms of scan_chunks."""
    for chunk in chunks:
        for key, value in chunk:
            yield Entry(key, value)


def flattened(chunks: Iterable[list[_T]]) -> Iterator[_T]:
    """The items of chunks, one by one."""
    for chunk in chunks:
        yield from chunk


def check_key(partition: bytes, key: bytes) -> None:
    """Reject what no driver can store: non-bytes or empty partitions and keys."""
    if not isinstance(partition, bytes | bytearray) or not partition:
        raise InvalidArgument("KV partition must be non-empty bytes")
    if not isinstance(key, bytes | bytearray) or not key:
        raise InvalidArgument("KV key must be non-empty bytes")


def check_value(value: bytes) -> None:
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgument("KV value must be bytes")


class CheckedBatch(NamedTuple):
    """The arguments of an apply as check_apply passes them: checked, and every partition, key,
    value and predicate as bytes (callers may pass bytearrays; drivers compare and store bytes)."""

    partition: bytes
    puts: list[tuple[bytes, bytes]]
    deletes: list[bytes]
    conditions: AllOf  # empty: unconditional
    timestamp: Timestamp | None

    def stamp_of(self, index: int) -> int | None:
        """The write time of puts[index] (None: the store's own)."""
        if isinstance(self.timestamp, tuple):
            return self.timestamp[index]
        return self.timestamp

    def as_arguments(
        self,
    ) -> tuple[bytes, list[tuple[bytes, bytes]], list[bytes], Condition | AllOf | None, Timestamp | None]:
        """The batch as apply's arguments again, its conditions as a caller gives them (None,
        one condition, or AllOf several): for a store that applies it through apply."""
        conditions: Condition | AllOf | None = None
        if len(self.conditions) == 1 and not self.conditions.absence_is_final:
            conditions = self.conditions[0]
        elif self.conditions:
            conditions = self.conditions
        return self.partition, self.puts, self.deletes, conditions, self.timestamp

    def deletes_at(self) -> int | None:
        """The write time of the deletes (a batch with stamps per put has none)."""
        return self.timestamp if isinstance(self.timestamp, int) else None


def check_apply(
    partition: bytes,
    puts: Sequence[tuple[bytes, bytes]],
    deletes: Sequence[bytes],
    condition: Condition | AllOf | None,
    timestamp: Timestamp | None,
) -> CheckedBatch:
    """Reject an apply no driver can do atomically or that would be ambiguous; the checked apply."""
    keys: set[bytes] = set()
    for key, value in puts:
        check_key(partition, key)
        check_value(value)
        keys.add(bytes(key))
    for key in deletes:
        check_key(partition, key)
        keys.add(bytes(key))
    if len(keys) != len(puts) + len(deletes):
        raise InvalidArgument("KV apply: a key may appear only once among puts and deletes")
    if not keys:
        raise InvalidArgument("KV apply: nothing to write")
    if len(keys) > MAX_APPLY_ROWS:
        raise InvalidArgument(f"KV apply: at most {MAX_APPLY_ROWS} rows at once")
    conditions: list[Condition] = []
    absence_is_final = False
    if isinstance(condition, AllOf):
        conditions = list(condition)
        absence_is_final = condition.absence_is_final
    elif condition is not None:
        conditions = [condition]
    deleted = {bytes(k) for k in deletes}
    checked: list[Condition] = []
    for key, predicate in conditions:
        if bytes(key) not in keys:
            raise InvalidArgument("KV apply: the condition's key must be one of the rows written")
        if predicate is not None:
            check_value(predicate)
        if predicate is None and bytes(key) in deleted:
            raise InvalidArgument("KV apply: deleting a key on condition that it is absent")
        checked.append((bytes(key), None if predicate is None else Predicate(bytes(predicate))))
    if len({key for key, _ in checked}) != len(checked):
        raise InvalidArgument("KV apply: one condition per key")
    if checked and timestamp is not None:
        raise InvalidArgument("KV apply: a conditional apply cannot carry a write timestamp")
    stamps = timestamp if isinstance(timestamp, tuple) else (() if timestamp is None else (timestamp,))
    if isinstance(timestamp, tuple) and (len(timestamp) != len(puts) or deletes):
        raise InvalidArgument("KV apply: write times per row are one per put, with nothing deleted")
    for stamp in stamps:
        if not isinstance(stamp, int) or stamp <= 0 or stamp >= 2**63:
            raise InvalidArgument("KV apply: timestamp must be a positive 64-bit integer of microseconds")
    rows = [(bytes(key), bytes(value)) for key, value in puts]
    return CheckedBatch(
        bytes(partition),
        rows,
        [bytes(key) for key in deletes],
        AllOf(checked, absence_is_final=absence_is_final and bool(checked)),
        timestamp,
    )


def scan_prefix(store: Store, partition: bytes, prefix: bytes) -> Iterator[Entry]:
    """Yield the entries of partition whose key starts with prefix."""
    for entry in store.scan(partition, prefix):
        if not entry.key.startswith(prefix):
            return
        yield entry


DriverFactory = Callable[["DatabaseConfig"], Store]
_drivers: dict[str, DriverFactory] = {}


def register_driver(name: str, factory: DriverFactory) -> None:
    _drivers[name] = factory


# Built-in drivers are imported on first use so that a `mem` or `local` user never
# pays for importing cassandra-driver.
_BUILTIN_DRIVERS = {"mem": "silt.kv.mem", "local": "silt.kv.local", "cassandra": "silt.kv.cassandra"}


def open_store(config: DatabaseConfig) -> Store:
    """Open the driver named by config.type, bare: a service opens its stores through
    silt.telemetry.kv.open_observed_store, which wraps this one when the process is observed."""
    if config.type not in _drivers and config.type in _BUILTIN_DRIVERS:
        import importlib

        importlib.import_module(_BUILTIN_DRIVERS[config.type])
    try:
        factory = _drivers[config.type]
    except KeyError:
        raise InvalidArgument(
            f"database.type: unknown KV driver {config.type!r} (expected one of {sorted(_BUILTIN_DRIVERS)})"
        ) from None
    return factory(config)
