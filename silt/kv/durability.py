"""Whether a Cassandra keyspace and consistency level keep acknowledged writes through the loss
of one node (docs/operations/running.md, "Durability and failures"). Pure functions: the store
feeds them what the cluster reports, `silt check` and service start-up print what they return."""

from __future__ import annotations

SAFE_REPLICATION_FACTOR = 3

# Replicas that must answer for each level, given the replicas a key has (per datacenter for LOCAL_*).
_REQUIRED = {
    "ONE": lambda rf: 1,
    "LOCAL_ONE": lambda rf: 1,
    "TWO": lambda rf: 2,
    "THREE": lambda rf: 3,
    "QUORUM": lambda rf: rf // 2 + 1,
    "LOCAL_QUORUM": lambda rf: rf // 2 + 1,
    "EACH_QUORUM": lambda rf: rf // 2 + 1,
    "ALL": lambda rf: rf,
}


def durability_warnings(keyspace: str, replication_factor: int, consistency: str) -> list[str]:
    """What can go wrong when one node is lost, one line each; empty when nothing can.

    replication_factor: the smallest number of replicas any datacenter keeps.
    """
    warnings = []
    if replication_factor < SAFE_REPLICATION_FACTOR:
        warnings.append(
            f"cassandra keyspace {keyspace} has replication factor {replication_factor} (< {SAFE_REPLICATION_FACTOR}):"
            " losing one node can lose acknowledged writes or stop all writes"
        )
    required = _REQUIRED.get(consistency, lambda rf: rf)(replication_factor)
    if required < 2 and replication_factor > 1:
        warnings.append(
            f"consistency {consistency} acknowledges a write held by one replica only: losing that node"
            " before it replicates loses the write; use LOCAL_QUORUM or QUORUM"
        )
    if required > replication_factor - 1:
        warnings.append(
            f"consistency {consistency} needs {required} of {replication_factor} replicas: with one node down,"
            " requests fail"
        )
    return warnings
