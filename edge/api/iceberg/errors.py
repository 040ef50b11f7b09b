"""The Iceberg REST spec's error model: `{"error": {"message", "type", "code"}}`, with the spec's
status codes and exception type names (pyiceberg picks its exception class from the status)."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from edge.api.errors import ApiError, from_silt
from silt.errors import SiltError

_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NotFoundException",
    406: "UnsupportedOperationException",
    409: "AlreadyExistsException",
    500: "InternalServerError",
    501: "NotImplementedException",
    503: "ServiceUnavailableException",
}


class IcebergError(Exception):
    def __init__(self, status: int, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind or _TYPES.get(status, "RESTException")


def bad_request(message: str) -> IcebergError:
    return IcebergError(400, message, "BadRequestException")


def no_such_namespace(levels: tuple[str, ...]) -> IcebergError:
    return IcebergError(404, f"Namespace does not exist: {'.'.join(levels)}", "NoSuchNamespaceException")


def no_such_table(levels: tuple[str, ...], name: str) -> IcebergError:
    return IcebergError(404, f"Table does not exist: {'.'.join((*levels, name))}", "NoSuchTableException")


def no_such_view(levels: tuple[str, ...], name: str) -> IcebergError:
    return IcebergError(404, f"View does not exist: {'.'.join((*levels, name))}", "NoSuchViewException")


def commit_failed(message: str) -> IcebergError:
    return IcebergError(409, message, "CommitFailedException")


def commit_state_unknown(message: str) -> IcebergError:
    """A commit that may or may not stand: the spec's 500 CommitStateUnknownException, after
    which a client reloads the table instead of cleaning up what it wrote."""
    return IcebergError(500, message, "CommitStateUnknownException")


def already_exists(message: str) -> IcebergError:
    return IcebergError(409, message, "AlreadyExistsException")


def body(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def iceberg_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, IcebergError)
    return body(exc.status, exc.message, exc.kind)


async def api_error(request: Request, exc: Exception) -> JSONResponse:
    """The REST API's own errors (authentication, authorization, graveler's refusals) in the
    catalog's model."""
    assert isinstance(exc, ApiError)
    return body(exc.status, exc.message, _TYPES.get(exc.status, "RESTException"))


async def silt_error(request: Request, exc: Exception) -> JSONResponse:
    """A service's typed failure that no route turned into the catalog's terms (Unavailable, a
    deadline): as the REST API would answer it."""
    assert isinstance(exc, SiltError)
    return await api_error(request, from_silt(exc))


async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return body(400, f"malformed request: {exc.errors()[:3]}", "BadRequestException")


HANDLERS = {
    IcebergError: iceberg_error,
    ApiError: api_error,
    SiltError: silt_error,
    RequestValidationError: invalid_request,
}
