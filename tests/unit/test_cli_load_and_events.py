"""Pure parts of `silt abuse` (its load runner and summary) and `silt events` (the Server-Sent
Events reader)."""

from __future__ import annotations

import threading

import click
import pytest

from cli.abuse import failure_kind, parse_duration, run_load
from cli.events import server_sent_events
from cli.rest import ApiError


def test_a_load_run_does_each_item_once_at_most_parallelism_at_a_time_and_counts_failures() -> None:
    running, peak, seen = 0, 0, []
    lock = threading.Lock()

    def work(item: str) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
            seen.append(item)
        try:
            if item.endswith("7"):
                raise ApiError("gone", 4, 404, {})
            if item.endswith("3"):
                raise TimeoutError("slow")
        finally:
            with lock:
                running -= 1

    summary = run_load("op", (str(i) for i in range(100)), 4, work)
    assert sorted(seen, key=int) == [str(i) for i in range(100)] and peak <= 4
    data = summary.as_json()
    assert data["completed"] == 80 and data["failures"] == {"HTTP 404": 10, "TimeoutError": 10}
    assert data["latency_ms"]["p50"] <= data["latency_ms"]["p99"] <= data["latency_ms"]["max"]
    assert failure_kind(ApiError("x", 5, 409, {})) == "HTTP 409" and failure_kind(OSError()) == "OSError"


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("2s", 2.0), ("1m", 60.0), ("3", 3.0), ("0s", 0.0)])
def test_durations_as_go_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "-1s", "1d"])
def test_a_duration_of_another_form_is_refused(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_duration(text)


def test_server_sent_events_are_read_with_ids_kinds_and_multiline_data_and_comments_skipped() -> None:
    stream = [
        b": keepalive\n",
        b"\n",
        b"id: 1\n",
        b"event: history\n",
        b'data: {"a": 1}\n',
        b"\n",
        b"event: error\r\n",
        b"data: line one\n",
        b"data:line two\n",
        b"\n",
        b"id: 3\n",  # no data: no event
        b"\n",
    ]
    assert list(server_sent_events(stream)) == [
        ("1", "history", '{"a": 1}'),
        ("1", "error", "line one\nline two"),
    ]
