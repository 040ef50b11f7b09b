"""The `lakefs` module: lakeFS's REST calls from a hook, answering ``status, body``.

As in lakeFS, ``get_object`` answers the body's bytes and ``stat_object`` the response's
JSON text (scripts decode it with `encoding/json`); the others answer the decoded JSON as a
table, or the status alone when the response has no body. Arguments a script leaves out
(or passes as nil) take the API's defaults.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.actions.lua.bridge import Builder
from engine.actions.lua.calls import DEFAULT_AMOUNT, LakeFSCalls


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _amount(value: int | None) -> int:
    return DEFAULT_AMOUNT if value is None else value


def _flag(value: bool | None) -> bool:
    return True if value is None else value


def _decoded(b: Builder, status: int, body: Any) -> tuple[Any, ...]:
    if body is None:
        return (int(status),)
    return (int(status), b.value(body))


def functions(calls: LakeFSCalls) -> dict[str, Callable[..., tuple[Any, ...]]]:
    def stat_object(
        b: Builder, repository: bytes, ref: bytes, path: bytes, user_metadata: bool | None
    ) -> tuple[Any, ...]:
        status, body = calls.stat_object(_text(repository), _text(ref), _text(path), _flag(user_metadata))
        text = "" if body is None else json.dumps(body, separators=(",", ":"))
        return (int(status), b.text(text))

    def get_object(b: Builder, repository: bytes, ref: bytes, path: bytes) -> tuple[Any, ...]:
        status, body = calls.get_object(_text(repository), _text(ref), _text(path))
        data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else bytes(body or b"")
        b.check_bytes(len(data))
        return (int(status), data)

    def list_objects(
        b: Builder,
        repository: bytes,
        ref: bytes,
        after: bytes,
        prefix: bytes,
        delimiter: bytes,
        amount: int | None,
        user_metadata: bool | None,
    ) -> tuple[Any, ...]:
        status, body = calls.list_objects(
            _text(repository),
            _text(ref),
            _text(after),
            _text(prefix),
            _text(delimiter),
            _amount(amount),
            _flag(user_metadata),
        )
        return _decoded(b, status, body)

    def diff_refs(
        b: Builder,
        repository: bytes,
        left_ref: bytes,
        right_ref: bytes,
        after: bytes,
        prefix: bytes,
        delimiter: bytes,
        amount: int | None,
    ) -> tuple[Any, ...]:
        status, body = calls.diff_refs(
            _text(repository),
            _text(left_ref),
            _text(right_ref),
            _text(after),
            _text(prefix),
            _text(delimiter),
            _amount(amount),
        )
        return _decoded(b, status, body)

    def diff_branch(
        b: Builder,
        repository: bytes,
        branch: bytes,
        after: bytes,
        amount: int | None,
        prefix: bytes,
        delimiter: bytes,
    ) -> tuple[Any, ...]:
        status, body = calls.diff_branch(
            _text(repository), _text(branch), _text(after), _amount(amount), _text(prefix), _text(delimiter)
        )
        return _decoded(b, status, body)

    def create_tag(b: Builder, repository: bytes, ref: bytes, tag: bytes) -> tuple[Any, ...]:
        status, body = calls.create_tag(_text(repository), _text(ref), _text(tag))
        return _decoded(b, status, body)

    return {
        "lakefs.stat_object": stat_object,
        "lakefs.get_object": get_object,
        "lakefs.list_objects": list_objects,
        "lakefs.diff_refs": diff_refs,
        "lakefs.diff_branch": diff_branch,
        "lakefs.create_tag": create_tag,
    }
