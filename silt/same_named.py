"""Building one record from another whose fields it shares by name: a config section into the
options of the part it configures, a stored protobuf record into the message that answers for it.

Only the fields both kinds declare are copied (a dataclass's fields, a protobuf message's, a
pydantic model's), so a field one side lacks is never guessed at; the caller passes the fields
that change type or name on the way.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from google.protobuf.message import Message
from pydantic import BaseModel

T = TypeVar("T")


def field_names(kind: type) -> frozenset[str]:
    """The fields a dataclass, protobuf message or pydantic model declares."""
    if dataclasses.is_dataclass(kind):
        return frozenset(f.name for f in dataclasses.fields(kind) if f.init)
    if issubclass(kind, Message):
        return frozenset(kind.DESCRIPTOR.fields_by_name)
    if issubclass(kind, BaseModel):
        return frozenset(kind.model_fields)
    raise TypeError(f"{kind.__qualname__} declares no fields to copy (not a dataclass, message or model)")


def built_from(source: object, target: type[T], **converted: Any) -> T:
    """A target holding source's values of the fields both declare, and the converted ones as given."""
    shared = field_names(type(source)) & field_names(target)
    return target(**{name: getattr(source, name) for name in sorted(shared - converted.keys())}, **converted)
