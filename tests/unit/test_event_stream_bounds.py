"""The bounds of event streams without servers: slots with a reserve for administrators (graveler's
StreamSlots, the REST API's FeedSlots), and re-authorization that asks auth once per interval,
however many events flow."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from edge.api.errors import ApiError
from edge.api.live_feed import FeedAccess, FeedSlots
from engine.features.history_events.streams import StreamAccess, StreamLimits, StreamSlots
from silt.errors import PermissionDenied, ResourceExhausted
from silt.iam_actions import READ_REPO
from silt.key_scope import KeyScope
from silt.rpc.authority import CallKey
from tests.support.clock import ManualClock


class Answers:
    """An authority whose answers the test sets, counting the questions."""

    def __init__(self) -> None:
        self.allow = True
        self.calls = 0

    def call_key(self, access_key_id: str, day: str, audience: str) -> CallKey:
        raise AssertionError("streams never look up keys")

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        self.calls += 1
        return [self.allow for _ in resources]


class AsyncAnswers(Answers):
    async def allowed_many(  # type: ignore[override]
        self, user_id: str, action: str, resources: Sequence[str], source_ip: str = ""
    ) -> list[bool]:
        return Answers.allowed_many(self, user_id, action, resources)

    async def key_scope(
        self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = ""
    ) -> KeyScope:
        # Object actions as the repository's: every key or none.
        return KeyScope(repository, every_key=(await self.allowed_many(user_id, action, [repository]))[0])


def test_others_fill_only_the_shared_part_and_administrators_the_reserve_first() -> None:
    slots = StreamSlots(total=5, per_caller=2, admin_reserve=2)
    with slots.hold("admin", admin=True), slots.hold("ann"), slots.hold("ann"), slots.hold("bob"):
        # The administrator's stream took a reserved slot: the others filled the shared three.
        with pytest.raises(ResourceExhausted, match="kept for administrators"), slots.hold("cat"):
            pass
        with slots.hold("admin", admin=True):  # the reserve's second slot
            with pytest.raises(ResourceExhausted, match="of 'admin'"), slots.hold("admin", admin=True):
                pass
            with pytest.raises(ResourceExhausted, match="at once"), slots.hold("eve", admin=True):
                pass
    # Everything was given back: three others fill the shared part again.
    with (
        slots.hold("ann"),
        slots.hold("bob"),
        slots.hold("cat"),
        pytest.raises(ResourceExhausted, match="kept for administrators"),
        slots.hold("dan"),
    ):
        pass


def test_a_reserve_must_leave_others_a_stream() -> None:
    with pytest.raises(ValueError, match="reserve"):
        StreamLimits(total=2, admin_reserve=2)


def test_feeds_keep_a_reserve_for_administrators() -> None:
    slots = FeedSlots(total=3, per_user=2, admin_reserve=1)
    leases = [slots.take("ann"), slots.take("ann")]
    with pytest.raises(ApiError, match="kept for administrators") as refused:
        slots.take("bob")
    assert refused.value.status == 503
    leases.append(slots.take("admin", admin=True))
    leases[-1].release()
    leases[0].release()
    assert slots.open() == 1
    slots.take("bob")


def test_a_stream_asks_auth_once_per_interval_however_many_events() -> None:
    answers, clock = Answers(), ManualClock()
    access = StreamAccess(answers, ttl=2.0, clock=clock)
    check = access.checker("ann", READ_REPO, "repo")
    for _ in range(10_000):
        check()
    assert answers.calls == 1
    answers.allow = False
    clock.advance(1.9)
    check()  # still the decision of under 2 s ago
    clock.advance(0.2)
    with pytest.raises(PermissionDenied, match="may no longer ReadRepo"):
        check()
    assert answers.calls == 2


def test_a_feed_asks_auth_once_per_interval() -> None:
    answers, clock = AsyncAnswers(), ManualClock()
    access = FeedAccess(answers, ttl=5.0, clock=clock)

    async def ask(times: int) -> list[bool]:
        return [await access.allowed("ann", READ_REPO, "repo") for _ in range(times)]

    assert all(asyncio.run(ask(1000))) and answers.calls == 1
    answers.allow = False
    clock.advance(5.1)
    assert not any(asyncio.run(ask(10))) and answers.calls == 2
