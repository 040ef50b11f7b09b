"""lakeFS's operations against the routes the API serves (edge/api/compatibility.py)."""

from __future__ import annotations

import pytest

from edge.api import compatibility
from edge.api.compatibility import Operation, compare, lakefs_operations, render, served_routes
from edge.api.not_served import NOT_SERVED, NotServed

# What the issue that asked for every operation allows: each argued in NOT_SERVED's reason.
MAX_NOT_SERVED = 5


def test_the_operations_table_is_lakefs_swagger_of_its_commit() -> None:
    operations = lakefs_operations()
    assert len(operations) == 134
    assert len({op.operation_id for op in operations}) == len(operations)
    assert len({op.route for op in operations}) == len(operations)
    assert compatibility.lakefs_commit() == "71a45eeb1639d146d34b8effd7e86d077160ed7c"


def test_every_lakefs_operation_is_served_or_answers_501_with_a_reason() -> None:
    result = compare(lakefs_operations(), served_routes())
    missing = [f"{op.operation_id} ({op.method} {op.path})" for op in result.missing]
    assert not missing, f"lakeFS operations neither served nor listed in NOT_SERVED with a 501 route: {missing}"
    assert len(result.not_served) <= MAX_NOT_SERVED
    assert all(len(NOT_SERVED[op.operation_id].reason) > 20 for op in result.not_served), "each needs a reason"
    for op in result.not_served:
        assert (NOT_SERVED[op.operation_id].method, NOT_SERVED[op.operation_id].path) == (op.method, op.path)
    assert set(NOT_SERVED) <= {op.operation_id for op in lakefs_operations()}, "NOT_SERVED names no such operation"


def test_the_manual_page_is_current() -> None:
    expected = render(compare(lakefs_operations(), served_routes()))
    assert compatibility.PAGE.read_text() == expected, (
        "docs/clients/lakefs-compatibility.md is stale: run `python -m edge.api.compatibility --write`"
    )


def test_path_parameters_match_by_position_not_name() -> None:
    operation = Operation("objects", "getObject", "GET", "/repositories/{repository}/refs/{ref}/objects")
    served = compare(
        [operation], {("GET", "/repositories/{}/refs/{}/objects"): "/api/v1/repositories/{r}/refs/{x}/objects"}
    )
    assert served.served == [operation] and not served.missing and not served.additions
    other_method = compare([operation], {("PUT", "/repositories/{}/refs/{}/objects"): "/api/v1/..."})
    assert other_method.missing == [operation] and other_method.additions == [("PUT", "/api/v1/...")]


def test_an_operation_listed_as_not_served_still_needs_its_501_route(monkeypatch: pytest.MonkeyPatch) -> None:
    operation = Operation("internal", "someOperation", "GET", "/some")
    monkeypatch.setitem(NOT_SERVED, "someOperation", NotServed("GET", "/some", "a reason long enough to count"))
    assert compare([operation], {}).missing == [operation]
    assert compare([operation], {("GET", "/some"): "/api/v1/some"}).not_served == [operation]
