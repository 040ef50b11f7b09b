"""The live feed's bounds in one API process: leases per user and per process, and a response
that stops waiting for a client that takes nothing, giving its lease back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from starlette.types import Message

from edge.api.errors import ApiError
from edge.api.live_feed import FeedSlots, WriteTimedStreamingResponse


def test_leases_are_capped_per_user_then_per_process() -> None:
    slots = FeedSlots(total=3, per_user=2)
    held = [slots.take("ann"), slots.take("ann")]
    with pytest.raises(ApiError) as per_user:
        slots.take("ann")
    assert per_user.value.status == 429
    held.append(slots.take("bob"))
    with pytest.raises(ApiError) as per_process:
        slots.take("cat")
    assert per_process.value.status == 503
    held[0].release()
    held[0].release()  # once only: a second release gives nothing more back
    assert slots.open() == 2 and slots.open("ann") == 1
    slots.take("cat")
    with pytest.raises(ApiError):
        slots.take("dan")


def test_a_client_that_takes_nothing_is_dropped_and_its_lease_given_back() -> None:
    slots = FeedSlots(total=1, per_user=1)
    lease = slots.take("ann")
    produced: list[int] = []

    async def events() -> AsyncIterator[bytes]:
        for n in range(1_000_000):
            produced.append(n)
            yield b"data: x\n\n"

    async def stalled_send(message: Message) -> None:
        if message["type"] == "http.response.body":
            await asyncio.Event().wait()  # flow control closed: the client reads nothing

    async def receive() -> Message:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    response = WriteTimedStreamingResponse(events(), lease=lease, write_timeout=0.2)
    scope = {"type": "http", "asgi": {"spec_version": "2.4"}}
    asyncio.run(asyncio.wait_for(response(scope, receive, stalled_send), 5))
    assert len(produced) == 1 and slots.open() == 0
