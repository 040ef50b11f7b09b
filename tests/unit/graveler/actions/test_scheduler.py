"""The background scheduler: a repository whose jobs hang holds one worker, never the others'."""

from __future__ import annotations

import functools
import threading

from engine.actions.scheduler import FairScheduler


def test_a_hanging_repository_does_not_delay_another() -> None:
    scheduler = FairScheduler(workers=2, per_repository=1, max_queued=10)
    release = threading.Event()
    ran: list[str] = []
    try:
        for _ in range(5):
            assert scheduler.submit("slow", lambda: release.wait(5))
        done = threading.Event()

        def fast() -> None:
            ran.append("fast")
            done.set()

        assert scheduler.submit("fast", fast)
        assert done.wait(2), "the other repository's job waited behind the hanging one"
        assert ran == ["fast"]
    finally:
        release.set()
        assert scheduler.wait_idle(5)
        scheduler.close()


def test_a_full_queue_refuses_more_and_jobs_run_in_order() -> None:
    scheduler = FairScheduler(workers=1, per_repository=1, max_queued=3)
    gate = threading.Event()
    order: list[int] = []
    try:
        taken = threading.Event()

        def first() -> None:
            taken.set()
            gate.wait(5)

        assert scheduler.submit("r", first)
        assert taken.wait(5), "the worker never took the first job"  # three more fit the queue
        accepted = [scheduler.submit("r", functools.partial(order.append, n)) for n in range(4)]
        assert accepted == [True, True, True, False]
        gate.set()
        assert scheduler.wait_idle(5)
        assert order == [0, 1, 2]
    finally:
        gate.set()
        scheduler.close()


def test_a_failing_job_does_not_stop_the_worker() -> None:
    scheduler = FairScheduler(workers=1)
    done = threading.Event()
    try:
        scheduler.submit("r", lambda: 1 / 0)
        scheduler.submit("r", done.set)
        assert done.wait(2)
    finally:
        scheduler.close()
