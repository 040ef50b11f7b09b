"""Which of the Cassandra driver's failures say a request was certainly never attempted
(NotApplied) and which leave it possibly applied (Unavailable): decided from the driver's
exception types, never from their text."""

from __future__ import annotations

from cassandra import ConsistencyLevel, OperationTimedOut, WriteTimeout, WriteType
from cassandra import Unavailable as DriverUnavailable
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionShutdown

from silt.kv.cassandra import not_attempted


def refused_for_want_of_replicas() -> DriverUnavailable:
    return DriverUnavailable("refused", consistency=ConsistencyLevel.QUORUM, required_replicas=2, alive_replicas=1)


def test_a_request_refused_up_front_was_not_attempted() -> None:
    assert not_attempted(refused_for_want_of_replicas())
    assert not_attempted(NoHostAvailable("no host", {}))
    assert not_attempted(NoHostAvailable("no host", {"127.0.0.1": ConnectionRefusedError()}))
    assert not_attempted(NoHostAvailable("no host", {"127.0.0.1": refused_for_want_of_replicas()}))


def test_a_request_that_timed_out_or_lost_its_connection_may_have_been_applied() -> None:
    timed_out = WriteTimeout(
        "timeout",
        consistency=ConsistencyLevel.QUORUM,
        required_responses=2,
        received_responses=1,
        write_type=WriteType.SIMPLE,
    )
    assert not not_attempted(timed_out)
    assert not not_attempted(OperationTimedOut("no answer"))
    assert not not_attempted(NoHostAvailable("no host", {"127.0.0.1": ConnectionShutdown("lost")}))
    assert not not_attempted(
        NoHostAvailable("no host", {"127.0.0.1": ConnectionRefusedError(), "127.0.0.2": OperationTimedOut("x")})
    )
