"""Faults injected and healed on a schedule drawn from the run's seeded random.Random.

Kinds: kill -9 and restart, or SIGSTOP / SIGCONT, of an edge, a graveler or a Cassandra node;
a clock offset of ±5 s on one graveler (restarted with SILT_CLOCK_OFFSET_SECONDS, then
without); and the fault proxy between an edge and the gravelers refusing connections,
dropping answers or delaying them. A schedule is a list of windows, each one kind or (mixed)
two at once, separated by quiet periods.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.jepsen.topology import CLOCK_OFFSET_ENV, Topology
from tests.support.cassandra_cluster import CassandraCluster

PROCESS_KINDS = ("edge-kill", "edge-pause", "graveler-kill", "graveler-pause")
CASSANDRA_KINDS = ("cassandra-kill", "cassandra-pause")
OTHER_KINDS = ("clock-offset", "proxy-refuse", "proxy-drop", "proxy-delay")
ALL_KINDS = PROCESS_KINDS + CASSANDRA_KINDS + OTHER_KINDS
CLOCK_OFFSET_S = 5.0


@dataclass
class Window:
    kinds: tuple[str, ...]
    start_s: float  # from the run's start
    duration_s: float
    targets: tuple[int, ...] = ()
    injected_ns: int = 0
    healed_ns: int = 0


def schedule(
    rng: random.Random, kinds: list[str], mixed: bool, fault_s: tuple[float, float] = (2.0, 4.0)
) -> list[Window]:
    """Every kind once, in a random order, then (mixed) pairs of kinds at once; quiet 1-2 s between."""
    order = list(kinds)
    rng.shuffle(order)
    groups: list[tuple[str, ...]] = [(kind,) for kind in order]
    if mixed and len(kinds) > 1:
        groups += [tuple(rng.sample(kinds, 2)) for _ in range(max(1, len(kinds) // 3))]
    windows, at = [], rng.uniform(1.0, 2.0)
    for group in groups:
        duration = rng.uniform(*fault_s)
        targets = tuple(rng.randrange(3 if k.startswith("cassandra") else 2) for k in group)
        windows.append(Window(group, at, duration, targets))
        at += duration + rng.uniform(1.0, 2.0)
    return windows


class Nemesis:
    def __init__(
        self, topology: Topology, cluster: CassandraCluster | None, rng: random.Random, windows: list[Window]
    ) -> None:
        self.topology = topology
        self.cluster = cluster
        self.rng = rng
        self.windows = windows
        self.errors: list[BaseException] = []

    def run(self) -> None:
        """The whole schedule, in the calling thread: it must be one that outlives the run (the
        test's own), since a Cassandra node restarted here dies with the thread that started
        it (tests/support/cassandra.py sets the parent-death signal)."""
        started = time.monotonic()
        for window in self.windows:
            time.sleep(max(0.0, started + window.start_s - time.monotonic()))
            heals: list[Callable[[], None]] = []
            restarts: list[Callable[[], None]] = []
            window.injected_ns = time.monotonic_ns()
            try:
                for kind, target in zip(window.kinds, window.targets, strict=True):
                    heal = self.inject(kind, target)
                    heals.append(heal)
                    if kind.endswith("-kill") or kind == "clock-offset":
                        restarts.append(heal)
                time.sleep(window.duration_s)
            except BaseException as exc:
                self.errors.append(exc)
            finally:
                # Restarts last: a restarted Cassandra node waits until every node sees every
                # other, which a node still paused in the same window never would.
                for heal in sorted(reversed(heals), key=lambda heal: heal in restarts):
                    try:
                        heal()
                    except BaseException as exc:
                        self.errors.append(exc)
                window.healed_ns = time.monotonic_ns()

    def inject(self, kind: str, target: int) -> Callable[[], None]:
        """Inject one fault; returns what heals it."""
        topology = self.topology
        if kind.startswith(("edge-", "graveler-")):
            service = (topology.edges if kind.startswith("edge") else topology.gravelers)[target]
            if kind.endswith("kill"):
                service.kill()

                def restart() -> None:
                    service.restart()
                    topology.spread()  # the edges moved to the graveler that stayed up

                return restart
            service.signal(signal.SIGSTOP)
            return lambda: service.signal(signal.SIGCONT)
        if kind.startswith("cassandra-"):
            assert self.cluster is not None, "a Cassandra fault on a run without the cluster"
            node = self.cluster.nodes[target]
            if kind == "cassandra-kill":
                node.kill()
                cluster = self.cluster

                def restart() -> None:
                    cluster.restart(node)

                return restart
            node.pause()
            return node.resume
        if kind == "clock-offset":
            graveler = topology.gravelers[target]
            offset = CLOCK_OFFSET_S if self.rng.random() < 0.5 else -CLOCK_OFFSET_S
            graveler.restart({CLOCK_OFFSET_ENV: str(offset)})
            # Each edge back on its own graveler: writes of one key then go through both clocks.
            topology.spread()

            def restore() -> None:
                graveler.restart({})
                topology.spread()

            return restore
        assert kind.startswith("proxy-"), kind
        proxy = topology.proxies[target]
        proxy.inject(kind.removeprefix("proxy-"))
        return proxy.heal
