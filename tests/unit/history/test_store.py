"""History events in KV: hour partitions, time-ordered ids, reading across hours, retention."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cli.events import parse_since
from engine.core.refs import RefManager
from engine.core.refs.manager import RepoHandle
from engine.features.history_events.recorder import EventRecorder, check_batch
from engine.features.history_events.retention import HistoryRetention, RetentionPolicy
from engine.features.history_events.writer import EventWriter
from silt.config import DatabaseConfig
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import model_pb2 as pb
from silt.history_events import layout
from silt.history_events.codec import to_json
from silt.history_events.reader import event_hours, list_branches_with_events, scan_events
from silt.kv import Store, open_store
from silt.kv.mem import MemStore
from silt.kv.store import MAX_APPLY_ROWS, SPLIT_WRITE_BYTES, CheckedBatch, row_weight, writes_by_weight

HOUR = 3_600_000_000
# 2026-11-23 10:00:00 UTC
T0 = 1_795_428_000_000_000


@pytest.fixture
def kv() -> Iterator[Store]:
    with open_store(DatabaseConfig(type="mem")) as store:
        yield store


def _lake(kv: Store) -> RepoHandle:
    return RefManager(kv).create_repository(
        pb.Repository(name="lake", storage_namespace="local://lake", default_branch="main", unique_id="u1")
    )


@pytest.fixture
def repo(kv: Store) -> RepoHandle:
    return _lake(kv)


def _write(writer: EventWriter, repo: RepoHandle, *stamps: int, branch: str = "main") -> list[ev.HistoryEvent]:
    events = [
        ev.HistoryEvent(timestamp_us=t, repository=repo.name, branch=branch, type=ev.WRITE, path=f"k{t}")
        for t in stamps
    ]
    writer.write(repo.partition, events)
    return events


def test_layout_names_hours_and_sorts_ids_by_time() -> None:
    assert layout.hour_of(T0) == 2026112310
    assert layout.hour_of(T0 + HOUR - 1) == 2026112310
    assert layout.hour_start_us(2026112310) == T0
    assert layout.next_hour(2026123123) == 2027010100
    assert layout.events_partition(b"lake-u1", "main", 2026112310) == b"lake-u1-history-main-2026112310"
    early, late = layout.event_key(T0, 0xFFFF, 9), layout.event_key(T0 + 1, 0, 0)
    assert early < late and len(early) == layout.EVENT_ID_LENGTH
    assert layout.timestamp_of_id(late) == T0 + 1
    for bad in ("", "x" * 42, early.upper(), early[:-1], early + "0", "../" + early[3:]):
        with pytest.raises(InvalidArgument):
            layout.timestamp_of_id(bad)


def test_events_are_read_in_time_order_across_hours(kv: Store, repo: RepoHandle) -> None:
    writer = EventWriter(kv, writer_id=1)
    # Written out of order, over three hours (one of them empty), on two branches.
    _write(writer, repo, T0 + 2 * HOUR + 5, T0 + 1, T0 + 2 * HOUR)
    _write(writer, repo, T0 + 7, branch="dev")
    read = list(scan_events(kv, "lake", "main"))
    assert [e.timestamp_us for e in read] == [T0 + 1, T0 + 2 * HOUR, T0 + 2 * HOUR + 5]
    assert all(e.id and layout.timestamp_of_id(e.id) == e.timestamp_us for e in read)
    assert event_hours(kv, repo.partition, "main") == [2026112310, 2026112312]
    assert list_branches_with_events(kv, "lake") == ["dev", "main"]

    # since (inclusive), until (exclusive), after (strictly after an id).
    assert [e.timestamp_us for e in scan_events(kv, "lake", "main", since_us=T0 + 2)] == [
        T0 + 2 * HOUR,
        T0 + 2 * HOUR + 5,
    ]
    assert [e.timestamp_us for e in scan_events(kv, "lake", "main", until_us=T0 + 2 * HOUR)] == [T0 + 1]
    assert [e.timestamp_us for e in scan_events(kv, "lake", "main", after=read[1].id)] == [T0 + 2 * HOUR + 5]
    with pytest.raises(NotFound):
        list(scan_events(kv, "no-such-repo", "main"))


def test_events_of_the_same_microsecond_are_all_kept(kv: Store, repo: RepoHandle) -> None:
    one, two = EventWriter(kv), EventWriter(kv)  # two processes
    _write(one, repo, T0, T0)
    _write(two, repo, T0)
    read = list(scan_events(kv, "lake", "main"))
    assert len(read) == 3 and len({e.id for e in read}) == 3


class CountingStore(MemStore):
    """The mem driver, noting each write it is asked for: (call, partition, rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, bytes, int]] = []

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        self.writes.append(("set", partition, 1))
        super().set(partition, key, value)

    def apply_checked(self, batch: CheckedBatch) -> None:
        self.writes.append(("apply", batch.partition, len(batch.puts)))
        super().apply_checked(batch)


Counted = tuple[CountingStore, RepoHandle, EventWriter]


@pytest.fixture
def counted() -> Counted:
    """A counting store with the repository made, its writes so far forgotten, and a writer."""
    kv = CountingStore()
    repo = _lake(kv)
    kv.writes.clear()
    return kv, repo, EventWriter(kv, writer_id=1)


def test_a_batch_of_events_is_one_write_per_partition_not_one_per_event(counted: Counted) -> None:
    kv, repo, writer = counted
    # 60 events in two hours of main and one of dev, in two calls (as the edge's batches come).
    stamps = [T0 + i for i in range(30)] + [T0 + HOUR + i for i in range(20)]
    events = _write(writer, repo, *stamps) + _write(writer, repo, *(T0 + i for i in range(10)), branch="dev")

    event_writes = [w for w in kv.writes if b"-history-" in w[1]]
    assert sorted(event_writes) == [
        ("apply", layout.events_partition(repo.partition, "dev", 2026112310), 10),
        ("apply", layout.events_partition(repo.partition, "main", 2026112310), 30),
        ("apply", layout.events_partition(repo.partition, "main", 2026112311), 20),
    ]
    # Besides them, one index key per hour, written before the hour's events.
    assert [w[0] for w in kv.writes].count("set") == 3
    read = list(scan_events(kv, "lake", "main")) + list(scan_events(kv, "lake", "dev"))
    assert sorted(e.id for e in read) == sorted(e.id for e in events) and len(read) == 60


def test_a_large_batch_is_split_into_writes_within_the_byte_bound(counted: Counted) -> None:
    kv, repo, writer = counted
    # 300 events with 900-byte paths: about 290 KB, more than any one write may carry.
    events = [
        ev.HistoryEvent(timestamp_us=T0 + i, repository="lake", branch="main", type=ev.READ, path=f"{i:04d}" * 225)
        for i in range(300)
    ]
    assert writer.write(repo.partition, events) == 300
    applies = [rows for call, _, rows in kv.writes if call == "apply"]
    assert len(applies) > 10 and sum(applies) == 300
    partition = layout.events_partition(repo.partition, "main", 2026112310)
    stored = {entry.key: entry.value for entry in kv.scan(partition)}
    assert len(stored) == 300
    assert max(rows for rows in applies) * (2 * (layout.EVENT_ID_LENGTH + 8) + 900 + 64) <= SPLIT_WRITE_BYTES


def test_writes_by_weight_keeps_order_and_both_bounds() -> None:
    puts = [(b"k%05d" % i, b"v" * (i % 50)) for i in range(3000)]
    deletes = [b"d%05d" % i for i in range(10)]
    writes = list(writes_by_weight(puts, deletes, limit=4096))
    assert [p for some, _ in writes for p in some] == puts
    assert [d for _, some in writes for d in some] == deletes
    for some_puts, some_deletes in writes:
        weight = sum(row_weight(k, v) for k, v in some_puts) + sum(row_weight(k, None) for k in some_deletes)
        assert weight <= 4096
    # A row over the bound goes alone; no write passes MAX_APPLY_ROWS rows.
    assert list(writes_by_weight([(b"big", b"x" * 10_000), (b"small", b"y")], limit=4096)) == [
        ([(b"big", b"x" * 10_000)], []),
        ([(b"small", b"y")], []),
    ]
    tiny = [(b"%d" % i, b"") for i in range(2500)]
    assert [len(p) for p, _ in writes_by_weight(tiny, limit=10**9)] == [MAX_APPLY_ROWS, MAX_APPLY_ROWS, 500]


def test_retention_drops_whole_hours_past_the_cutoff(kv: Store, repo: RepoHandle) -> None:
    writer = EventWriter(kv)
    now = [(T0 + 10 * 24 * HOUR) / 1e6]  # ten days after T0
    _write(writer, repo, T0, T0 + 5)  # 10 days old
    _write(writer, repo, T0 + 9 * 24 * HOUR)  # 1 day old
    _write(writer, repo, T0 + 3 * 24 * HOUR, branch="dev")  # 7 days old
    retention = HistoryRetention(RefManager(kv), writer, RetentionPolicy(retention_days=2), clock=lambda: now[0])
    stats = retention.prune_all()
    assert (stats.repositories, stats.hours, stats.events) == (1, 2, 3)
    assert [e.timestamp_us for e in scan_events(kv, "lake", "main")] == [T0 + 9 * 24 * HOUR]
    assert list(scan_events(kv, "lake", "dev")) == []
    assert list_branches_with_events(kv, "lake") == ["main"]
    assert list(kv.scan(layout.events_partition(repo.partition, "main", layout.hour_of(T0)))) == []

    # The claim holds for an interval: a second pass (another replica) leaves the repository alone.
    _write(writer, repo, T0 + 1)
    assert retention.prune_all().repositories == 0
    now[0] += RetentionPolicy().interval_seconds
    assert retention.prune_all().hours == 1


def test_the_json_shape_of_an_event() -> None:
    event = ev.HistoryEvent(
        id="i", timestamp_us=5, type=ev.CHERRY_PICK, path="p", user="u", source=ev.API, commit_id="c", message="m"
    )
    assert to_json(event) == {
        "id": "i",
        "timestamp_us": 5,
        "type": "cherry_pick",
        "path": "p",
        "user": "u",
        "source": "api",
        "commit_id": "c",
        "message": "m",
        "size": 0,
    }


def test_since_takes_a_duration_or_a_time() -> None:
    now = T0 / 1e6
    assert parse_since("90s", now) == T0 - 90_000_000
    assert parse_since("2h", now) == T0 - 2 * HOUR
    assert parse_since("1d", now) == T0 - 24 * HOUR
    assert parse_since("2026-11-23T10:00:00Z", now) == T0
    assert parse_since("2026-11-23T11:00:00+01:00", now) == T0
    assert parse_since("2026-11-23 10:00:00", now) == T0  # no zone: UTC
    for bad in ("yesterday", "5w", "-1h", ""):
        with pytest.raises(Exception, match="--since"):
            parse_since(bad, now)


def test_an_events_hour_is_its_utc_hour_at_every_boundary() -> None:
    """hour_of from the hour's ordinal equals formatting the timestamp itself, around hour,
    day, month, year and leap-day boundaries, before 1970 too."""
    from datetime import UTC, datetime

    def formatted(timestamp_us: int) -> int:
        return int(datetime.fromtimestamp(timestamp_us / 1_000_000, UTC).strftime("%Y%m%d%H"))

    starts = [
        datetime(2026, 11, 23, 10, tzinfo=UTC),
        datetime(2026, 12, 31, 23, tzinfo=UTC),
        datetime(2028, 2, 29, 0, tzinfo=UTC),
        datetime(1970, 1, 1, 0, tzinfo=UTC),
        datetime(1969, 12, 31, 23, tzinfo=UTC),
    ]
    for start in starts:
        base = int(start.timestamp()) * 1_000_000
        for delta in (-HOUR, -1, 0, 1, HOUR // 2, HOUR - 1, HOUR):
            assert layout.hour_of(base + delta) == formatted(base + delta), (start, delta)
    assert layout.hour_of(T0 - 1) == 2026112309


@pytest.mark.parametrize(("field", "limit"), [("path", 1024), ("user", 256), ("message", 4096), ("commit_id", 128)])
def test_an_events_fields_are_bounded_in_utf8_bytes_not_characters(field: str, limit: int) -> None:
    def event(value: str) -> ev.HistoryEvent:
        made = ev.HistoryEvent(timestamp_us=T0, repository="lake", branch="main", type=ev.WRITE)
        setattr(made, field, value)
        return made

    for fits in ("a" * limit, "é" * (limit // 2), "€" * (limit // 3), "😀" * (limit // 4)):
        check_batch([event(fits)])
    for too_long in ("a" * (limit + 1), "é" * (limit // 2 + 1), "€" * (limit // 3 + 1), "😀" * (limit // 4 + 1)):
        with pytest.raises(InvalidArgument, match=f"{field} is longer than {limit} bytes"):
            check_batch([event(too_long)])
    with pytest.raises(InvalidArgument, match="unknown history event type 0"):
        check_batch([ev.HistoryEvent(timestamp_us=T0, repository="lake", branch="main")])


def test_a_stored_event_is_bounded_whatever_a_caller_sends(counted: Counted) -> None:
    kv, repo, writer = counted
    refs = RefManager(kv)
    recorder = EventRecorder(refs, writer, clock=lambda: T0 / 1e6)
    event = ev.HistoryEvent(timestamp_us=T0, repository="lake", branch="main", type=ev.WRITE, path="k")
    long_commit = ev.HistoryEvent()
    long_commit.CopyFrom(event)
    long_commit.commit_id = "c" * 200
    with pytest.raises(InvalidArgument, match="commit_id"):
        recorder.record([long_commit], require_branch=False)
    # 60,000 bytes of a field this version does not know (number 100): stored without it.
    padded = ev.HistoryEvent()
    padded.ParseFromString(event.SerializeToString() + b"\xa2\x06" + _varint(60_000) + b"x" * 60_000)
    assert recorder.record([padded], require_branch=False) == (1, 0)
    partition = layout.events_partition(repo.partition, "main", layout.hour_of(T0))
    (stored,) = kv.scan(partition)
    assert len(stored.value) < 100 and ev.HistoryEvent.FromString(stored.value).path == "k"


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes([*out, value])
