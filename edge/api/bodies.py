"""Request bodies: read within a size limit, parsed as JSON, validated by the lakefs-sdk model
the contract names for them (pydantic v1 models, so validated here rather than by FastAPI)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, TypeVar

from fastapi import Request
from pydantic.v1 import BaseModel, ValidationError

from edge.api.errors import ApiError, bad_request

M = TypeVar("M", bound=BaseModel)

# Per-route caps below api.max_body_bytes, for routes that read their body before they can
# authorize (the resource is named in the body) or before anyone is authenticated: such a body
# is parsed for whoever sends it, so it is kept to what the route could ever need.
# Ids, names, a login, a repository's creation: a few short strings.
SMALL_BODY_BYTES = 16 * 1024
# A policy: iam/policies.py bounds statements and actions; this bounds the document as a whole,
# several times the largest real policy.
POLICY_BODY_BYTES = 128 * 1024

# The longest pause inside a request body: a client that stops sending is cut off (408)
# rather than holding a connection and its buffer.
BODY_IDLE_TIMEOUT_SECONDS = 60.0


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    stream = request.stream().__aiter__()
    while True:
        try:
            chunk = await asyncio.wait_for(stream.__anext__(), BODY_IDLE_TIMEOUT_SECONDS)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise ApiError(408, "request body stalled: nothing received for a minute") from None
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "body"
        parts.append(f"{where}: {error['msg']}")
    return "invalid request body: " + "; ".join(parts)


def require_json(request: Request) -> None:
    """Refuse a body not declared `application/json` (a charset parameter is fine). A browser
    sends a cross-site form or a text/plain fetch without asking first (no CORS preflight); it
    must preflight `application/json`, which this API never grants, so the check stops CSRF."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(415, "unsupported Content-Type: the request body must be application/json")


async def json_object(request: Request, limit: int) -> dict[str, Any]:
    require_json(request)
    raw = await read_body(request, limit)
    if not raw.strip():
        raise bad_request("request body is missing: expected a JSON object")
    return parsed_object(raw)


def parsed_object(raw: bytes) -> dict[str, Any]:
    """A body that is there, as the JSON object it must be."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise bad_request("request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise bad_request("request body must be a JSON object")
    return data


def validate(model: type[M], data: dict[str, Any]) -> M:
    try:
        return model.parse_obj(data)
    except ValidationError as exc:
        raise bad_request(_describe(exc)) from None


def body_limit(request: Request, cap: int | None = None) -> int:
    """The configured body limit, lowered to a route's own cap if it has one."""
    limit: int = request.app.state.max_body_bytes
    return limit if cap is None else min(limit, cap)


async def json_body(request: Request, model: type[M], cap: int | None = None) -> M:
    return validate(model, await json_object(request, body_limit(request, cap)))


async def optional_json_body(request: Request, model: type[M], cap: int | None = None) -> M:
    """A body the schema does not require: absent or empty means every field's default. One
    that is there, or a declared Content-Type even with none, must be JSON (require_json)."""
    if request.headers.get("content-type") is not None:
        require_json(request)
    raw = await read_body(request, body_limit(request, cap))
    if not raw.strip():
        return model()
    require_json(request)
    return validate(model, parsed_object(raw))
