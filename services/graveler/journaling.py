"""Names every graveler call for the journal: event type, caller and repository.

One interceptor around every unary call sets the JournalContext (silt.journal.context) that
graveler's JournaledStore reads for each KV mutation the call makes, so no RPC can forget to.
The event type is the method's name in snake case (``CreateBranch`` -> ``create_branch``),
except where lakeFS's vocabulary names the operation differently.
"""

from __future__ import annotations

import functools
import re
from contextlib import AbstractContextManager
from typing import Any

import grpc

from silt.errors import SiltError
from silt.grpc_handlers import HandlerInterceptor, within
from silt.journal.context import SYSTEM_CLIENT, journal_context
from silt.rpc.interceptor import current_principal

_EVENT_TYPES = {
    "StageEntry": "object_write",
    "DeleteEntry": "object_delete",
    "DeleteEntries": "objects_delete",
    "StageEntries": "objects_write",
    "StageEntriesIf": "objects_write_if",
    "ResetBranch": "reset",
    "CherryPick": "cherry_pick",
}


@functools.lru_cache(maxsize=256)
def event_type(method: str) -> str:
    """The journal event type of a gRPC method, given its full name or its bare name."""
    name = method.rsplit("/", 1)[-1]
    # A word starts at a capital after a small letter, or at the last capital of an acronym
    # (SetGCRules -> set_gc_rules).
    return _EVENT_TYPES.get(name) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def caller_id() -> str:
    """The authenticated caller; "system" when served without authentication (embedded use)."""
    try:
        return current_principal().user_id
    except SiltError:
        return SYSTEM_CLIENT


def repository_of(request: Any) -> str:
    """The repository a request is about: its `repository` field, or `name` for repository calls."""
    fields = request.DESCRIPTOR.fields_by_name
    if "repository" in fields:
        return str(request.repository)
    if "name" in fields and request.DESCRIPTOR.name.endswith("RepositoryRequest"):
        return str(request.name)
    return ""


class JournalContextInterceptor(HandlerInterceptor):
    """Runs each unary call inside the JournalContext naming it (after authentication)."""

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        event = event_type(details.method)

        def naming(request: Any, context: grpc.ServicerContext) -> AbstractContextManager[object]:
            return journal_context(event, caller_id(), repository_of(request))

        return within(handler, naming, streams=False)
