"""The acting-user header's parsing and the audit name (services/auth/acting.py)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from services.auth.acting import ACTING_METHODS, ACTING_USER_HEADER, acting_user, describe_caller
from services.auth.permissions import RULES
from silt.errors import InvalidArgument


class Entry(NamedTuple):
    key: str
    value: str | bytes


def test_no_header_is_no_acting_user() -> None:
    assert acting_user([Entry("x-silt-date", "1")]) is None
    assert acting_user(None) is None


def test_the_header_names_a_valid_user_once() -> None:
    assert acting_user([Entry(ACTING_USER_HEADER, "alice@example.com")]) == "alice@example.com"
    for bad in ("", "../admin", "a" * 129, "with space"):
        with pytest.raises(InvalidArgument):
            acting_user([Entry(ACTING_USER_HEADER, bad)])
    with pytest.raises(InvalidArgument):
        acting_user([Entry(ACTING_USER_HEADER, "a"), Entry(ACTING_USER_HEADER, "b")])
    with pytest.raises(InvalidArgument):
        acting_user([Entry(ACTING_USER_HEADER + "-bin", b"a"), Entry(ACTING_USER_HEADER, b"admin")])


def test_only_iam_methods_accept_it() -> None:
    assert RULES.keys() >= ACTING_METHODS
    names = {method.rsplit("/", 1)[1] for method in ACTING_METHODS}
    assert not names & {"Authorize", "AuthorizeMany", "WhoAmI", "VerifySecret", "CreateSession", "VerifySession"}
    assert not names & {"VerifyS3Signature", "GetCallSigningKey"}


def test_describe_caller_outside_a_call() -> None:
    assert describe_caller() == "an unauthenticated caller"
