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
