"""Parsing ref expressions: ``<base>[@][~N|^N]*`` (engine/core/refs/expr.py)."""

from __future__ import annotations

import pytest

from engine.core.refs.expr import MIN_COMMIT_PREFIX, RefExpr, looks_like_commit_prefix, parse
from silt.errors import InvalidArgument


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("main", RefExpr("main", False, ())),
        ("main@", RefExpr("main", True, ())),
        ("main~", RefExpr("main", False, (("~", 1),))),
        ("main~1", RefExpr("main", False, (("~", 1),))),
        ("main~12", RefExpr("main", False, (("~", 12),))),
        ("main~0", RefExpr("main", False, (("~", 0),))),  # git's HEAD~0: the commit itself
        ("main~007", RefExpr("main", False, (("~", 7),))),
        ("main^", RefExpr("main", False, (("^", 1),))),
        ("main^2", RefExpr("main", False, (("^", 2),))),
        ("main^^", RefExpr("main", False, (("^", 1), ("^", 1)))),
        ("main~~", RefExpr("main", False, (("~", 1), ("~", 1)))),
        ("main~2^2~", RefExpr("main", False, (("~", 2), ("^", 2), ("~", 1)))),
        ("main@~3", RefExpr("main", True, (("~", 3),))),
        ("main@^2~1", RefExpr("main", True, (("^", 2), ("~", 1)))),
        ("v1.0", RefExpr("v1.0", False, ())),
        ("feature-x_y", RefExpr("feature-x_y", False, ())),
        ("a1b2c3d4^2", RefExpr("a1b2c3d4", False, (("^", 2),))),
        ("main~999999999", RefExpr("main", False, (("~", 999_999_999),))),
    ],
)
def test_parses(expression: str, expected: RefExpr) -> None:
    assert parse(expression) == expected


@pytest.mark.parametrize(
    ("expression", "plain"),
    [("main", True), ("main@", False), ("main~0", False), ("main^", False), ("0123abcd", True)],
)
def test_only_a_bare_name_is_plain(expression: str, plain: bool) -> None:
    assert parse(expression).plain is plain


@pytest.mark.parametrize(
    "expression",
    [
        "",  # nothing at all
        "@",  # '@' with no base
        "~1",  # modifier with no base
        "^2",
        "@~1",
        "main@@",  # '@' twice
        "ma@in",  # '@' inside the base
        "@main",
        "main~x",  # not a number
        "main^-1",
        "main~1.5",
        "main~2@",  # '@' after a modifier
        "main~ 1",
        "main^0",  # names no parent
        "main~1^0",
        "main~\u0663",  # ARABIC-INDIC DIGIT THREE: a digit to Python, not in a ref
        "main^\uff12",  # FULLWIDTH DIGIT TWO
        "main~1234567890",  # ten digits: more generations than any history could hold
        "main~" + "9" * 5000,  # past Python's int-from-string limit: still a typed error
    ],
)
def test_rejects_malformed_expressions_with_a_typed_error(expression: str) -> None:
    with pytest.raises(InvalidArgument):
        parse(expression)


def test_the_error_names_the_expression() -> None:
    with pytest.raises(InvalidArgument, match="main~x"):
        parse("main~x")


@pytest.mark.parametrize(
    ("name", "looks"),
    [
        ("abcd", True),  # the shortest prefix accepted
        ("0123456789abcdef", True),
        ("a" * 64, True),  # a full sha256 id
        ("abc", False),  # too short to be unambiguous in practice
        ("ABCD", False),  # ids are lower-case hex
        ("abcg", False),
        ("main", False),
        ("", False),
        ("abcd~1", False),
    ],
)
def test_commit_prefixes_are_lower_case_hex_of_at_least_four_digits(name: str, looks: bool) -> None:
    assert MIN_COMMIT_PREFIX == 4
    assert looks_like_commit_prefix(name) is looks
