"""History events through a real graveler gRPC server on each KV driver: recorded batches,
graveler's own ref events, pages, a followed stream, retention and repository deletion."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from engine.features.history_events import reading
from engine.features.history_events.manager import HistoryEvents
from engine.features.history_events.retention import RetentionPolicy
from engine.features.history_events.streams import MAX_STREAMS_PER_CALLER, StreamLimits
from engine.open import open_graveler
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.history_events import layout
from silt.history_events.reader import all_event_hours
from silt.kv import Store
from tests.integration.graveler.conftest import GravelerEnv
from tests.support.wait import wait_until

# graveler.history.stream_write_timeout_seconds, shorter than its 10 s default: the bounded-streams
# test waits it out (the timeout works alike at any length), and must see the streams held first.
WRITE_TIMEOUT_SECONDS = 3.0


@pytest.fixture
def history_env(store: Store, tmp_path: Path) -> Iterator[tuple[GravelerEnv, HistoryEvents]]:
    graveler = open_graveler(store, LocalAdapter(tmp_path / "data"))
    streams = StreamLimits(write_timeout_seconds=WRITE_TIMEOUT_SECONDS)
    policy = RetentionPolicy(retention_days=1)
    history = HistoryEvents(graveler.refs, policy, flush_interval=0.05, streams=streams).start()
    server, port = start(graveler, "127.0.0.1:0", history=history)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield GravelerEnv(api_grpc.GravelerServiceStub(channel), graveler, tmp_path / "data"), history
    finally:
        channel.close()
        server.stop(None)
        history.close()
        graveler.close()


def _now_us() -> int:
    return time.time_ns() // 1000


def _event(repo: str, path: str, kind: ev.HistoryEventType.ValueType = ev.WRITE, **fields: object) -> ev.HistoryEvent:
    values: dict[str, object] = {
        "timestamp_us": _now_us(),
        "branch": "main",
        "user": "alice",
        "source": ev.S3,
        "size": 4,
        **fields,
    }
    return ev.HistoryEvent(repository=repo, type=kind, path=path, **values)  # type: ignore[arg-type]


def _all(env: GravelerEnv, repo: str, branch: str = "main", amount: int = 0) -> list[ev.HistoryEvent]:
    found: list[ev.HistoryEvent] = []
    after = ""
    while True:
        page = env.stub.ListEvents(ev.ListEventsRequest(repository=repo, branch=branch, after=after, amount=amount))
        found.extend(page.events)
        if not page.has_more:
            return found
        after = page.next_after


def test_recorded_events_are_stored_and_paged(history_env: tuple[GravelerEnv, HistoryEvents]) -> None:
    env, _ = history_env
    repo = env.new_repo()
    batch = [_event(repo, f"k{n:03d}") for n in range(250)]
    batch += [
        _event(repo, "x", branch="no-such-branch"),  # skipped: not a branch
        _event(repo, "y", branch="main~1"),  # skipped: a ref expression, not a branch name
        _event("no-such-repo", "z"),  # skipped: no such repository
        _event(repo, "old", timestamp_us=_now_us() - 2 * 3600 * 10**6),  # skipped: far in the past
    ]
    reply = env.stub.RecordEvents(ev.RecordEventsRequest(events=batch))
    assert (reply.recorded, reply.skipped) == (250, 4)

    pages = env.stub.ListEvents(ev.ListEventsRequest(repository=repo, branch="main", amount=100))
    assert len(pages.events) == 100 and pages.has_more and pages.next_after == pages.events[-1].id
    every = _all(env, repo, amount=100)
    assert [e.path for e in every] == [f"k{n:03d}" for n in range(250)]
    assert [e.id for e in every] == sorted(e.id for e in every)
    first = every[0]
    assert (first.user, first.source, first.type, first.size, first.repository) == ("alice", ev.S3, ev.WRITE, 4, repo)

    since = every[100].timestamp_us
    later = env.stub.ListEvents(ev.ListEventsRequest(repository=repo, branch="main", since_us=since, amount=1000))
    assert all(e.timestamp_us >= since for e in later.events) and later.events[0].timestamp_us == since


def test_bad_batches_and_requests_are_refused(history_env: tuple[GravelerEnv, HistoryEvents]) -> None:
    env, _ = history_env
    repo = env.new_repo()
    for request in (
        ev.RecordEventsRequest(events=[_event(repo, "k")] * 1001),
        ev.RecordEventsRequest(events=[_event(repo, "k" * 1025)]),
        ev.RecordEventsRequest(events=[_event(repo, "k", kind=ev.HISTORY_EVENT_TYPE_UNSPECIFIED)]),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            env.stub.RecordEvents(request)
        assert refused.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
    for listing in (
        ev.ListEventsRequest(repository=repo, branch="main", after="not-an-id"),
        ev.ListEventsRequest(repository=repo, branch="a/b"),
        ev.ListEventsRequest(repository=repo, branch="main", amount=-1),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            env.stub.ListEvents(listing)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as missing:
        env.stub.ListEvents(ev.ListEventsRequest(repository="no-such-repo", branch="main"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_followed_stream_sees_new_events_within_a_poll(
    history_env: tuple[GravelerEnv, HistoryEvents], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "POLL_INTERVAL_SECONDS", 0.05)  # read at every poll
    env, _ = history_env
    repo = env.new_repo()
    env.stub.RecordEvents(ev.RecordEventsRequest(events=[_event(repo, "before")]))
    seen: list[tuple[str, float]] = []
    stream = env.stub.WatchEvents(
        ev.WatchEventsRequest(repository=repo, branch="main", since_us=_now_us() - 60 * 10**6, follow=True), timeout=20
    )

    def follow() -> None:
        try:
            for event in stream:
                seen.append((event.path, time.monotonic()))
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.CANCELLED

    reader = threading.Thread(target=follow)
    reader.start()
    try:
        wait_until(lambda: seen, 5, "the stored event")
        sent_at = time.monotonic()
        env.stub.RecordEvents(ev.RecordEventsRequest(events=[_event(repo, "after")]))
        wait_until(lambda: len(seen) == 2, 5, "the new event on the stream")
        assert [path for path, _ in seen] == ["before", "after"]
        assert seen[1][1] - sent_at < 2.0
        # Deliberate: more polls pass, and nothing is sent twice; nothing signals a poll that
        # sent nothing.
        time.sleep(4 * reading.POLL_INTERVAL_SECONDS)
        assert len(seen) == 2
    finally:
        stream.cancel()
        reader.join(10)
    assert not reader.is_alive()


def test_a_stream_without_follow_ends_and_resumes_after_an_id(history_env: tuple[GravelerEnv, HistoryEvents]) -> None:
    env, _ = history_env
    repo = env.new_repo()
    env.stub.RecordEvents(ev.RecordEventsRequest(events=[_event(repo, f"k{n}") for n in range(5)]))
    events = list(env.stub.WatchEvents(ev.WatchEventsRequest(repository=repo, branch="main"), timeout=10))
    assert [e.path for e in events] == [f"k{n}" for n in range(5)]
    rest = env.stub.WatchEvents(ev.WatchEventsRequest(repository=repo, branch="main", after=events[1].id), timeout=10)
    assert [e.path for e in rest] == ["k2", "k3", "k4"]


def test_ref_changes_are_recorded_by_graveler(history_env: tuple[GravelerEnv, HistoryEvents]) -> None:
    env, history = history_env
    repo = env.new_repo()
    stub = env.stub
    stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"))
    env.put(repo, "dev", "a")
    commit = env.commit(repo, "dev", "add a")
    merged = stub.Merge(api.MergeRequest(repository=repo, source_ref="dev", destination_branch="main", message="m"))
    env.put(repo, "main", "scratch")
    stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", all=True))
    stub.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref="main"))
    stub.DeleteBranch(api.DeleteBranchRequest(repository=repo, name="dev"))
    history.own.flush()

    dev = [(e.type, e.commit_id, e.message) for e in _all(env, repo, "dev")]
    assert dev == [
        (ev.BRANCH_CREATED, "", ""),
        (ev.COMMIT, commit.id, "add a"),
        (ev.BRANCH_DELETED, "", ""),
    ]
    main = _all(env, repo, "main")
    assert [e.type for e in main] == [ev.MERGE, ev.RESET, ev.TAG_CREATED]
    assert main[0].commit_id == merged.commit.id and main[2].path == "v1"
    assert all(e.source == ev.GRAVELER for e in main)


def test_retention_and_repository_deletion_drop_history(
    history_env: tuple[GravelerEnv, HistoryEvents], store: Store
) -> None:
    env, history = history_env
    repo = env.new_repo()
    env.stub.RecordEvents(ev.RecordEventsRequest(events=[_event(repo, "k")]))
    partition = env.graveler.refs.get_repository(repo).partition
    # Two days on, the hour is past the one-day retention.
    real = history.retention._clock
    history.retention._clock = lambda: real() + 2 * 86400
    try:
        stats = history.retention.prune(env.graveler.refs.get_repository(repo))
    finally:
        history.retention._clock = real
    assert (stats.hours, stats.events) == (1, 1)
    assert _all(env, repo) == [] and list(all_event_hours(store, partition)) == []

    env.stub.RecordEvents(ev.RecordEventsRequest(events=[_event(repo, "k2")]))
    hour = layout.hour_of(_now_us())
    assert list(store.scan(layout.events_partition(partition, "main", hour)))
    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    env.graveler.lifecycle.clean_deleted_repositories()
    assert list(store.scan(layout.events_partition(partition, "main", hour))) == []


def test_far_future_since_is_an_invalid_argument(history_env: tuple[GravelerEnv, HistoryEvents]) -> None:
    env, _ = history_env
    repo = env.new_repo()
    far = 253402300800000000  # year 10000: no hour can hold it
    with pytest.raises(grpc.RpcError) as refused:
        env.stub.ListEvents(ev.ListEventsRequest(repository=repo, branch="main", since_us=far))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as refused:
        list(env.stub.WatchEvents(ev.WatchEventsRequest(repository=repo, branch="main", since_us=far), timeout=10))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# Flow control is the gRPC server's, whatever the KV: writing the 30,000 events to Cassandra
# alone takes a minute, so that leg runs in `make test-all`.
@pytest.mark.slow
@pytest.mark.parametrize(
    "store",
    ["mem", "local", pytest.param("cassandra", marks=[pytest.mark.cassandra, pytest.mark.nightly])],
    indirect=True,
)
def test_unread_streams_are_bounded_and_released(history_env: tuple[GravelerEnv, HistoryEvents]) -> None:
    """Streams without follow that are opened and never read hold a bounded number of graveler's
    workers, and each is cancelled once its client has taken nothing for the write timeout."""
    env, _ = history_env
    repo = env.new_repo()
    for batch in range(30):  # 30,000 events of about 1 KiB: far more than flow control buffers
        events = [_event(repo, f"{batch:02d}/{n:04d}/" + "x" * 1000) for n in range(1000)]
        env.stub.RecordEvents(ev.RecordEventsRequest(events=events))
    request = ev.WatchEventsRequest(repository=repo, branch="main")
    unread = [env.stub.WatchEvents(request, timeout=120) for _ in range(MAX_STREAMS_PER_CALLER)]
    for stream in unread:
        next(stream)  # started on the server; then never read again

    def another_refused() -> bool:
        try:
            list(env.stub.WatchEvents(ev.WatchEventsRequest(repository=repo, branch="empty"), timeout=5))
        except grpc.RpcError as exc:
            return exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        return False

    try:
        wait_until(another_refused, 10, "a stream beyond the caller's share refused")
        started = time.monotonic()
        env.stub.GetRepository(api.GetRepositoryRequest(name=repo), timeout=5)
        assert time.monotonic() - started < 1.0
        # The write timeout cancels the unread streams; their slots serve new streams again.
        wait_until(lambda: not another_refused(), 3 * WRITE_TIMEOUT_SECONDS, "the unread streams released")
        with pytest.raises(grpc.RpcError) as cancelled:
            for _ in unread[0]:
                pass
        assert cancelled.value.code() == grpc.StatusCode.CANCELLED
    finally:
        for stream in unread:
            stream.cancel()
