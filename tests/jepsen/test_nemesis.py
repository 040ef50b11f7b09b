"""The nemesis's heal order, with recording stand-ins for the topology and the cluster."""

from __future__ import annotations

import random
from typing import cast

from tests.jepsen.nemesis import Nemesis, Window
from tests.jepsen.topology import Topology
from tests.support.cassandra_cluster import CassandraCluster


class _Node:
    def __init__(self, name: str, done: list[str]) -> None:
        self.name, self.done = name, done

    def kill(self) -> None:
        self.done.append(f"kill {self.name}")

    def pause(self) -> None:
        self.done.append(f"pause {self.name}")

    def resume(self) -> None:
        self.done.append(f"resume {self.name}")


class _Cluster:
    def __init__(self, done: list[str]) -> None:
        self.done = done
        self.nodes = [_Node(f"node{i}", done) for i in range(3)]

    def restart(self, node: _Node) -> None:
        # The real one waits until every node sees every other: a paused one never does.
        paused = {d.split()[1] for d in self.done if d.startswith("pause")} - {
            d.split()[1] for d in self.done if d.startswith("resume")
        }
        assert not paused, f"restarted {node.name} while {paused} still paused"
        self.done.append(f"restart {node.name}")


def test_a_node_paused_with_a_kill_in_the_same_window_is_resumed_before_the_restart() -> None:
    done: list[str] = []
    cluster = _Cluster(done)
    # Injected pause first, kill second: healing in reverse would restart while node0 is paused.
    window = Window(("cassandra-pause", "cassandra-kill"), start_s=0.0, duration_s=0.0, targets=(0, 1))
    nemesis = Nemesis(cast(Topology, object()), cast(CassandraCluster, cluster), random.Random(0), [window])
    nemesis.run()
    assert nemesis.errors == []
    assert done == ["pause node0", "kill node1", "resume node0", "restart node1"]


def test_failed_requests_are_counted_per_fault_4xx_refusals_and_final_reads_apart() -> None:
    from tests.jepsen.checker import FINAL
    from tests.jepsen.history import Op, Outcome
    from tests.jepsen.runner import failed_by_fault

    def op(i: int, start: int, end: int, outcome: Outcome, error: str = "", process: str = "s3-0") -> Op:
        return Op(i, process, "write", "dev/a0", start, complete_ns=end, outcome=outcome, error=error)

    window = Window(("cassandra-kill",), 0.0, 1.0, (1,), injected_ns=100, healed_ns=200)
    ops = [
        op(0, 10, 20, Outcome.UNKNOWN, "503 SlowDown"),  # before the fault
        op(1, 90, 110, Outcome.UNKNOWN, "503 ServiceUnavailable"),  # overlaps it
        op(2, 120, 130, Outcome.FAIL, "EndpointConnectionError"),  # never sent: still failed
        op(3, 120, 130, Outcome.FAIL, "404 NoSuchKey"),  # a refusal, not a failure
        op(4, 120, 130, Outcome.OK),
        op(5, 150, 160, Outcome.UNKNOWN, "ReadTimeoutError", process=FINAL),
    ]
    assert failed_by_fault(ops, [window]) == {"cassandra-kill": 2, "none": 1}
