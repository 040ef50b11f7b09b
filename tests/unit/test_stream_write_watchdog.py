"""The write watchdog of graveler's event streams (engine/features/history_events/streams.py):
it cancels a call whose client stops taking items, and never a call that has ended, even when
gRPC leaves the stream's generator suspended mid-send."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from engine.features.history_events.streams import WriteWatchdog, sent_within_deadline
from tests.support.wait import wait_until

SECONDS = 0.05


class Call:
    """A call's cancel and add_callback, counting cancels; end() runs the callbacks as gRPC does."""

    def __init__(self, ended: bool = False) -> None:
        self.cancels = 0
        self.ended = ended
        self.callbacks: list[Callable[[], None]] = []
        self.lock = threading.Lock()

    def cancel(self) -> None:
        with self.lock:
            self.cancels += 1

    def add_callback(self, callback: Callable[[], None]) -> bool:
        if self.ended:
            return False
        self.callbacks.append(callback)
        return True

    def end(self) -> None:
        self.ended = True
        for callback in self.callbacks:
            callback()


def _watchdog_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "event-stream-watchdog")


def _items() -> Iterator[int]:
    yield from range(10)


def test_a_send_that_takes_too_long_cancels_the_call_once() -> None:
    call = Call()
    sent = sent_within_deadline(_items(), call.cancel, SECONDS, call.add_callback)
    assert next(sent) == 0
    wait_until(lambda: call.cancels == 1, 5, "the cancel of a stalled send")
    time.sleep(4 * SECONDS)
    assert call.cancels == 1
    sent.close()


def test_items_taken_in_time_never_cancel() -> None:
    call = Call()
    assert list(sent_within_deadline(_items(), call.cancel, 1.0, call.add_callback)) == list(range(10))
    assert call.cancels == 0


def test_a_call_that_ends_mid_send_is_not_cancelled_though_its_generator_stays_suspended() -> None:
    before = _watchdog_threads()
    call = Call()
    # Long enough that the test's own steps, on a loaded machine, never outlast it.
    seconds = 2.0
    sent = sent_within_deadline(_items(), call.cancel, seconds, call.add_callback)
    assert next(sent) == 0  # armed: the item is being sent
    call.end()  # the client went away; gRPC stops reading the generator without closing it
    wait_until(lambda: _watchdog_threads() <= before, 5, "the watchdog's thread to end")
    time.sleep(seconds + 0.5)
    assert call.cancels == 0
    sent.close()


def test_a_call_that_ended_before_the_stream_began_is_never_cancelled() -> None:
    call = Call(ended=True)
    sent = sent_within_deadline(_items(), call.cancel, SECONDS, call.add_callback)
    assert next(sent) == 0
    time.sleep(6 * SECONDS)
    assert call.cancels == 0
    sent.close()


def test_stop_returns_at_once_and_close_joins() -> None:
    call = Call()
    watchdog = WriteWatchdog(call.cancel, 30.0)
    watchdog.arm()
    started = time.monotonic()
    watchdog.stop()
    watchdog.close()
    assert time.monotonic() - started < 5
    assert not watchdog.fired and call.cancels == 0
