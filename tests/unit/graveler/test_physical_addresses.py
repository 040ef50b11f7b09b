"""Staged entries may only name bytes inside their repository's storage namespace.

Runs the engine in-process on the in-memory KV driver and a local-disk object store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.core.physical_addresses import validate_physical_address
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig
from silt.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store

NAMESPACE = "local://repoa"

ESCAPES = [
    "local://repob/data/0123",  # another repository
    "local://repoa-evil/data/0123",  # a name that merely starts with the namespace
    "local://repoa/../repob/data/0123",  # traversal out of the namespace
    "local://repoa//data/0123",  # empty segment an adapter may collapse
    "LOCAL://repob/data/0123",  # scheme case
    "s3://any-bucket/secret",  # another store altogether
    "local://repoa",  # the namespace itself, not an object in it
    "../repob/data/0123",  # relative traversal
    "data/../../repob/x",
    "/etc/passwd",
    "data\\..\\x",
    "c:/x",
]


@pytest.mark.parametrize("address", ESCAPES)
def test_addresses_outside_the_namespace_are_refused(address: str) -> None:
    with pytest.raises(InvalidArgument):
        validate_physical_address(address, NAMESPACE)


@pytest.mark.parametrize("address", ["data/0123", "local://repoa/data/0123", "LOCAL://repoa/data/x"])
def test_addresses_inside_the_namespace_are_accepted(address: str) -> None:
    validate_physical_address(address, NAMESPACE)


def test_an_allowed_import_prefix_admits_exactly_what_is_below_it() -> None:
    allowed = ["s3://landing/exports/"]
    validate_physical_address("s3://landing/exports/day1/part-0.parquet", NAMESPACE, allowed)
    with pytest.raises(InvalidArgument):
        validate_physical_address("s3://landing/exports-private/x", NAMESPACE, allowed)
    with pytest.raises(InvalidArgument):
        validate_physical_address("s3://landing/exports/../secret", NAMESPACE, allowed)


@pytest.fixture
def graveler(tmp_path: Path) -> Iterator[Graveler]:
    store = open_store(DatabaseConfig(type="mem"))
    g = open_graveler(store, LocalAdapter(tmp_path / "data"))
    g.lifecycle.create_repository("repoa", NAMESPACE, "main", False)
    g.lifecycle.create_repository("repob", "local://repob", "main", False)
    yield g
    g.close()


def test_stage_entry_refuses_another_repositorys_bytes(graveler: Graveler) -> None:
    with pytest.raises(InvalidArgument, match="outside the repository's storage namespace"):
        graveler.stage_entry("repoa", "main", "stolen", pb.Entry(physical_address="local://repob/data/x", size=1))
    graveler.stage_entry("repoa", "main", "own", pb.Entry(physical_address="data/x", size=1, etag="e"))
    assert (
        graveler.entries.stat(graveler.refs.repository("repoa"), "main", "own", NO_DEADLINE).physical_address
        == "data/x"
    )


@pytest.mark.parametrize("namespace", ["local://repoa", "local://repoa/sub", "LOCAL://repoa/", "local://"])
def test_a_new_repository_cannot_share_another_ones_namespace(graveler: Graveler, namespace: str) -> None:
    with pytest.raises(InvalidArgument):
        graveler.lifecycle.create_repository("intruder", namespace, "main", False)


def test_a_sibling_namespace_with_a_longer_name_is_fine(graveler: Graveler) -> None:
    graveler.lifecycle.create_repository("neighbour", "local://repoa-two", "main", False)


def test_a_bare_restore_target_may_reuse_a_namespace_only_when_allowed(graveler: Graveler) -> None:
    with pytest.raises(PermissionDenied):
        graveler.lifecycle.create_repository("restored", NAMESPACE, "main", True)
    asked: list[str] = []

    def may_share(repository: str) -> bool:
        asked.append(repository)
        return True

    graveler.lifecycle.create_repository("restored", NAMESPACE, "main", True, may_share=may_share)
    assert asked == ["repoa"]  # the permission is checked on the repository whose namespace is shared


@pytest.mark.parametrize("namespace", ["local://repoa/sub", "local://"])
def test_a_bare_repository_never_sits_above_or_below_another(graveler: Graveler, namespace: str) -> None:
    with pytest.raises(InvalidArgument):
        graveler.lifecycle.create_repository("restored", namespace, "main", True, may_share=lambda r: True)


def test_no_namespace_is_derived_below_a_repository_holding_the_whole_root(graveler: Graveler) -> None:
    # A record from before these rules: its namespace is the local store itself.
    graveler.refs.create_repository(pb.Repository(name="everything", storage_namespace="local://", unique_id="u"))
    with pytest.raises(FailedPrecondition):
        graveler.lifecycle.create_repository("late", "", "main", False)


def test_every_control_character_backslash_and_delete_is_refused_raw_or_percent_encoded() -> None:
    for code in [*range(0x20), 0x5C, 0x7F]:
        for address in (f"data/a{chr(code)}b", f"local://repoa/data/a{chr(code)}b", f"data/a%{code:02X}b"):
            with pytest.raises(InvalidArgument):
                validate_physical_address(address, NAMESPACE)
    # Everything else a name may hold passes, non-ASCII included.
    for text in ("a b", "a~b", "ä", "日本", "a%20b", "\u0080", "\u2028", "_silty", "x_silt"):
        validate_physical_address(f"local://repoa/data/{text}", NAMESPACE)


# Upper case, trailing dots and spaces, percent-encoded once and twice, a fullwidth low line, a
# fullwidth letter and a long s (NFKC makes both plain).
FOLDED_FORMS = ["_silt", "_SILT", "_Silt.", "_silt. .", "%5fsilt", "%255Fsilt"]
FOLDED_FORMS += ["\uff3fsilt", "_\uff53ilt", "_\u017filt"]


@pytest.mark.parametrize("segment", FOLDED_FORMS)
def test_the_metadata_tree_is_refused_in_any_case_form_or_encoding(segment: str) -> None:
    for address in (f"data/{segment}/ranges/x", f"local://repoa/{segment}/x"):
        with pytest.raises(InvalidArgument, match="metadata"):
            validate_physical_address(address, NAMESPACE)
