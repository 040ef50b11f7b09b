"""silt/same_named.py: a record built from another copies exactly the fields both declare."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.same_named import built_from, field_names


class _Section(BaseModel):
    limit: int = 3
    name: str = "n"
    only_here: str = "section"


@dataclass(frozen=True)
class _Options:
    limit: int = 0
    name: str = ""
    only_there: str = "options"
    derived: str = field(default="", init=False)


def test_shared_fields_are_copied_and_the_others_keep_their_defaults() -> None:
    assert built_from(_Section(limit=7, name="x"), _Options) == _Options(limit=7, name="x")


def test_converted_fields_are_taken_as_given() -> None:
    assert built_from(_Section(limit=7, name="x"), _Options, name="y", only_there="z") == _Options(7, "y", "z")


def test_fields_set_after_construction_are_not_declared() -> None:
    assert field_names(_Options) == {"limit", "name", "only_there"}


def test_protobuf_to_protobuf() -> None:
    record = pb.ImportRecord(
        id="i", branch="b", update_time=Timestamp(seconds=5), ingested_objects=3, completed=True, commit_id="c"
    )
    assert built_from(record, api.ImportStatusInfo) == api.ImportStatusInfo(
        id="i", completed=True, update_time=Timestamp(seconds=5), ingested_objects=3
    )


def test_a_kind_without_declared_fields_is_refused() -> None:
    with pytest.raises(TypeError):
        field_names(dict)
