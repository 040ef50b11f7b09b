"""The one repository-name rule (silt/names.py), as graveler and the gateway apply it."""

from __future__ import annotations

import pytest

from engine.core import validation
from silt.errors import InvalidArgument
from silt.names import is_repository_name, validate_repository_name

NAMES = {
    "abc": True,
    "my-repo-1": True,
    "a" * 63: True,
    "ab": False,
    "a" * 64: False,
    "-abc": False,
    "abc-": False,
    "Abc": False,
    "a.b.c": True,
    "aaa.111": True,
    "a..b": False,
    "a.-b": False,
    "a-.b": False,
    ".abc": False,
    "abc.": False,
    "192.168.5.4": False,
    "abc\n": False,
    "a_b": False,
    "": False,
    "_silt": False,
}


@pytest.mark.parametrize(("name", "valid"), sorted(NAMES.items()))
def test_rule(name: str, valid: bool) -> None:
    assert is_repository_name(name) is valid
    if valid:
        assert validate_repository_name(name) == name
    else:
        with pytest.raises(InvalidArgument):
            validate_repository_name(name)


@pytest.mark.parametrize(("name", "valid"), sorted(NAMES.items()))
def test_graveler_agrees(name: str, valid: bool) -> None:
    """Graveler refuses exactly the names the gateway refuses up front."""
    if valid:
        assert validation.validate_repository_name(name) == name
    else:
        with pytest.raises(InvalidArgument):
            validation.validate_repository_name(name)
