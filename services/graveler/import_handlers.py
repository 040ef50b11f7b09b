"""The gRPC handlers of imports, mixed into GravelerServicer: StartImport, GetImportStatus, CancelImport."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from engine.core.deadline import Deadline
from engine.core.hooks import EventUser
from engine.features.imports.locations import COMMON_PREFIX, OBJECT, Kind
from engine.features.imports.manager import Imports
from services.graveler.commit_info import commit_info
from silt.changed_keys import ChangeCheck
from silt.errors import InvalidArgument
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import COMMIT_BRANCH
from silt.same_named import built_from

_KINDS: dict[api.ImportLocation.Type.ValueType, Kind] = {
    api.ImportLocation.TYPE_COMMON_PREFIX: COMMON_PREFIX,
    api.ImportLocation.TYPE_OBJECT: OBJECT,
}


def _kind(location: api.ImportLocation) -> Kind:
    kind = _KINDS.get(location.type)
    if kind is None:
        raise InvalidArgument(f"import location {location.path!r}: type must be {COMMON_PREFIX} or {OBJECT}")
    return kind


class ImportHandlers:
    @property
    def _imports(self) -> Imports:
        # The servicer's Graveler (self.g), named loosely here: imports are one of its parts.
        engine: Any = getattr(self, "g")  # noqa: B009
        return engine.imports

    # GravelerServicer's: the user a commit on a branch is by, holding the branch action there.
    _committing: Callable[[str, str, str, str], str]
    # GravelerServicer's: the check of the keys an operation changes (repository, branch,
    # requested user).
    _key_check: Callable[[str, str, str], ChangeCheck | None]
    # GravelerServicer's: who an operation is made for, as its hooks read (requested user).
    _event_user: Callable[[str], EventUser]

    def _import_deadline(self, context: grpc.ServicerContext) -> Deadline:
        return Deadline.after(context.time_remaining(), is_active=context.is_active)

    def StartImport(self, request: api.StartImportRequest, context: grpc.ServicerContext) -> api.StartImportResponse:
        import_id = self._imports.start(
            request.repository,
            request.branch,
            [(_kind(location), location.path, location.destination) for location in request.locations],
            request.message,
            dict(request.metadata),
            self._committing(request.committer, COMMIT_BRANCH, request.repository, request.branch),
            self._import_deadline(context),
            self._key_check(request.repository, request.branch, request.committer),
            self._event_user(request.committer),
        )
        return api.StartImportResponse(id=import_id)

    def GetImportStatus(
        self, request: api.GetImportStatusRequest, context: grpc.ServicerContext
    ) -> api.ImportStatusInfo:
        status = self._imports.status(request.repository, request.branch, request.id, self._import_deadline(context))
        # The stored record's fields the answer shares by name; its commit is looked up.
        info = built_from(status.record, api.ImportStatusInfo)
        if status.commit is not None:
            info.commit.CopyFrom(commit_info(status.commit))
        return info

    def CancelImport(self, request: api.CancelImportRequest, context: grpc.ServicerContext) -> api.CancelImportResponse:
        self._imports.cancel(request.repository, request.branch, request.id, self._import_deadline(context))
        return api.CancelImportResponse()
