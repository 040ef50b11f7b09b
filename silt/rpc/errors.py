"""Silt's typed errors <-> gRPC status codes, in one place for every service and client.

Servers turn a SiltError into its status code and message (``ErrorMappingInterceptor``,
``abort``); a NotFound's ``what`` travels as a ``google.rpc.ResourceInfo`` in the standard
rich status (``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer, as
grpcio-status writes it), so any gRPC client can read it. Clients turn a failed call back
into the typed error with ``error_from_rpc``.
"""

from __future__ import annotations

from typing import Any, NoReturn, cast, get_args

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from silt.errors import (
    Aborted,
    AlreadyExists,
    ConditionFailed,
    ConfigError,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    KeptBySetup,
    KeysRefused,
    NotFound,
    NotFoundKind,
    OutcomeUnknown,
    PermissionDenied,
    PredicateFailed,
    ProtectedBranch,
    ResourceExhausted,
    SiltError,
    Unauthenticated,
    Unavailable,
)
from silt.grpc_handlers import HandlerInterceptor, within

# The trailer grpcio-status and the other languages' gRPC libraries read rich status from.
STATUS_DETAILS_KEY = "grpc-status-details-bin"

STATUS_OF: list[tuple[type[SiltError], grpc.StatusCode]] = [
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (PredicateFailed, grpc.StatusCode.FAILED_PRECONDITION),
    (Aborted, grpc.StatusCode.ABORTED),
    (DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
]
# The first class listed for a code is the one a client raises for it.
_ERROR_OF: dict[grpc.StatusCode, type[SiltError]] = {code: cls for cls, code in reversed(STATUS_OF)}
# Codes with no class of their own.
_ERROR_OF[grpc.StatusCode.OUT_OF_RANGE] = InvalidArgument
_KINDS: frozenset[str] = frozenset(get_args(NotFoundKind))
# The ResourceInfo type a KeysRefused travels with: a PERMISSION_DENIED carrying it is a user's
# object-scoped refusal, told apart from a refusal of the caller's own credentials by type.
KEYS_REFUSED = "object-keys"
# The ResourceInfo type a KeptBySetup travels with: a FAILED_PRECONDITION told apart by type.
KEPT_BY_SETUP = "kept-by-setup"
# The ResourceInfo type a ConditionFailed travels with, its resource_name the key that failed.
CONDITION_FAILED = "condition-failed"
# A ProtectedBranch travels with a ResourceInfo of this type naming the branch, then one of
# PROTECTION_RULE per rule that matched it (at most MAX_RULES_CARRIED: a trailer is bounded).
PROTECTED_BRANCH_INFO = "protected-branch"
PROTECTION_RULE = "protection-rule"
MAX_RULES_CARRIED = 8
# The ResourceInfo type an OutcomeUnknown travels with: an UNAVAILABLE whose write may or may not
# have been applied (a compare-and-set the KV could not settle), told apart from a dependency
# that refused or could not be reached. Overload is a code of its own (RESOURCE_EXHAUSTED).
OUTCOME_UNKNOWN = "outcome-unknown"


# A status message travels in a trailer, percent-encoded, and a peer refuses trailers over
# 16 KiB: a message echoing a client's megabyte-long name turned a refusal (INVALID_ARGUMENT)
# into RESOURCE_EXHAUSTED at the caller, which the gateway answers 503 SlowDown.
MAX_DETAILS_BYTES = 1024


def details_of(exc: BaseException) -> str:
    """The message of exc, cut to MAX_DETAILS_BYTES of UTF-8 (at most 3 KiB once percent-encoded)."""
    text = str(exc)
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_DETAILS_BYTES:
        return text
    return encoded[:MAX_DETAILS_BYTES].decode("utf-8", "ignore") + "… (message truncated)"


def status_of(exc: SiltError) -> grpc.StatusCode:
    for cls, code in STATUS_OF:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def rich_status(
    code: grpc.StatusCode, message: str, what: str | None = None, resources: tuple[tuple[str, str], ...] = ()
) -> bytes:
    """The serialized google.rpc.Status for a failure; `what` becomes a ResourceInfo detail, and
    so does each (type, name) of resources after it."""
    status = status_pb2.Status(code=code.value[0], message=message)
    infos = [error_details_pb2.ResourceInfo(resource_type=what, description=message)] if what is not None else []
    infos += [error_details_pb2.ResourceInfo(resource_type=kind, resource_name=name) for kind, name in resources]
    for info in infos:
        detail = any_pb2.Any()
        detail.Pack(info)
        status.details.append(detail)
    return status.SerializeToString()


def _protection_details(code: grpc.StatusCode, message: str, exc: ProtectedBranch) -> bytes:
    rules = [(PROTECTION_RULE, rule) for rule in exc.rules[:MAX_RULES_CARRIED]]
    resources = ((PROTECTED_BRANCH_INFO, exc.branch), *rules)
    return rich_status(code, message, resources=resources)


def abort(context: grpc.ServicerContext, exc: SiltError) -> NoReturn:
    """End the call with exc's status code and message, and its `what` in the rich status."""
    code = status_of(exc)
    message = details_of(exc)
    if isinstance(exc, NotFound) and exc.what is not None:
        context.set_trailing_metadata(((STATUS_DETAILS_KEY, rich_status(code, message, exc.what)),))
    elif isinstance(exc, KeysRefused):
        context.set_trailing_metadata(((STATUS_DETAILS_KEY, rich_status(code, message, KEYS_REFUSED)),))
    elif isinstance(exc, KeptBySetup):
        context.set_trailing_metadata(((STATUS_DETAILS_KEY, rich_status(code, message, KEPT_BY_SETUP)),))
    elif isinstance(exc, ConditionFailed):
        trailer = rich_status(code, message, resources=((CONDITION_FAILED, exc.key),))
        context.set_trailing_metadata(((STATUS_DETAILS_KEY, trailer),))
    elif isinstance(exc, ProtectedBranch):
        context.set_trailing_metadata(((STATUS_DETAILS_KEY, _protection_details(code, message, exc)),))
    elif isinstance(exc, OutcomeUnknown):
        context.set_trailing_metadata(((STATUS_DETAILS_KEY, rich_status(code, message, OUTCOME_UNKNOWN)),))
    context.abort(code, message)
    raise AssertionError("grpc's abort returned")  # it raises; this keeps the NoReturn honest


def _what(exc: grpc.RpcError) -> NotFoundKind | None:
    resource_type = _resource_type(exc)
    return cast(NotFoundKind, resource_type) if resource_type in _KINDS else None


def _resource_type(exc: grpc.RpcError) -> str | None:
    """The first ResourceInfo type in a failed call's rich status, if it has one."""
    infos = _resource_infos(exc)
    return str(infos[0].resource_type) if infos else None


def _resource_infos(exc: grpc.RpcError) -> list[error_details_pb2.ResourceInfo]:
    """The ResourceInfo details in a failed call's rich status, in order."""
    trailing = getattr(exc, "trailing_metadata", None)
    for key, value in (trailing() if callable(trailing) else None) or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except DecodeError:  # a malformed trailer from a foreign server: no details
            return []
        infos = []
        for detail in status.details:
            info = error_details_pb2.ResourceInfo()
            if detail.Unpack(info):
                infos.append(info)
        return infos
    return []


def _protected_branch(details: str, infos: list[error_details_pb2.ResourceInfo]) -> ProtectedBranch:
    rules = tuple(str(info.resource_name) for info in infos[1:] if info.resource_type == PROTECTION_RULE)
    return ProtectedBranch(details, branch=str(infos[0].resource_name), rules=rules)


def error_from_rpc(exc: grpc.RpcError) -> SiltError:
    """The typed error for a failed call, sync or grpc.aio: the class follows the status code
    (UNAVAILABLE when the server is unreachable), NotFound carries `what` when the server sent it, and
    an UNAVAILABLE marked OUTCOME_UNKNOWN is an OutcomeUnknown.
    Codes without a Silt meaning (UNKNOWN, INTERNAL, CANCELLED, ...) give a plain SiltError."""
    code_of = getattr(exc, "code", None)
    code = code_of() if callable(code_of) else grpc.StatusCode.UNKNOWN
    details_of = getattr(exc, "details", None)
    details = (details_of() if callable(details_of) else str(exc)) or code.name
    cls = _ERROR_OF.get(code, SiltError)
    if cls is NotFound:
        return NotFound(details, what=_what(exc))
    infos = _resource_infos(exc)
    first = str(infos[0].resource_type) if infos else None
    if cls is PermissionDenied and first == KEYS_REFUSED:
        return KeysRefused(details)
    if cls is PermissionDenied and first == PROTECTED_BRANCH_INFO:
        return _protected_branch(details, infos)
    if cls is FailedPrecondition and first == KEPT_BY_SETUP:
        return KeptBySetup(details)
    if cls is FailedPrecondition and first == CONDITION_FAILED:
        return ConditionFailed(details, key=str(infos[0].resource_name))
    if cls is Unavailable and _resource_type(exc) == OUTCOME_UNKNOWN:
        return OutcomeUnknown(details)
    return cls(details)


class _AbortingOnSiltError:
    """A call's scope: a SiltError raised inside ends the call with its status code (abort)."""

    __slots__ = ("_context",)

    def __init__(self, request: Any, context: grpc.ServicerContext) -> None:
        self._context = context

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, SiltError):
            abort(self._context, exc)


class ErrorMappingInterceptor(HandlerInterceptor):
    """Turns SiltErrors raised by any handler into the matching status code and message."""

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return within(handler, _AbortingOnSiltError)
