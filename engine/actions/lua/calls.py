"""What a Lua hook's `lakefs` module asks of the server: lakeFS REST calls, as Python methods.

Each method answers as the REST API would: an HTTP status code and the response body, shaped
as the API's JSON (ObjectStats, ObjectStatsList, DiffList, Ref, or an Error's
``{"message": ...}``) in plain dicts and lists. A body of None stands for an empty response.
The implementer scopes every call to what the hook may see (its own repository) and bounds
what it reads; the runtime passes arguments through unchanged.

An exception raised by a method becomes a short Lua error in the script ("lakefs.get_object:
internal error"); its text never reaches the script. Time spent in a call counts against the
hook's deadline, but a call cannot be interrupted: implementations should carry their own
timeouts.
"""

from __future__ import annotations

from typing import Any, Protocol

# Filled in by the runtime where a script leaves an optional argument out, as lakeFS's API
# does for a request without the parameter.
DEFAULT_AMOUNT = 100


class LakeFSCalls(Protocol):
    def stat_object(self, repository: str, ref: str, path: str, user_metadata: bool) -> tuple[int, Any]:
        """GET /repositories/{repository}/refs/{ref}/objects/stat?path=...: ObjectStats."""
        ...

    def get_object(self, repository: str, ref: str, path: str) -> tuple[int, bytes]:
        """GET /repositories/{repository}/refs/{ref}/objects?path=...: the object's bytes (or the
        error body's bytes when the status is not 200)."""
        ...

    def list_objects(
        self,
        repository: str,
        ref: str,
        after: str,
        prefix: str,
        delimiter: str,
        amount: int,
        user_metadata: bool,
    ) -> tuple[int, Any]:
        """GET /repositories/{repository}/refs/{ref}/objects/ls: ObjectStatsList."""
        ...

    def diff_refs(
        self,
        repository: str,
        left_ref: str,
        right_ref: str,
        after: str,
        prefix: str,
        delimiter: str,
        amount: int,
    ) -> tuple[int, Any]:
        """GET /repositories/{repository}/refs/{left_ref}/diff/{right_ref}: DiffList."""
        ...

    def diff_branch(
        self, repository: str, branch: str, after: str, amount: int, prefix: str, delimiter: str
    ) -> tuple[int, Any]:
        """GET /repositories/{repository}/branches/{branch}/diff (uncommitted changes): DiffList."""
        ...

    def create_tag(self, repository: str, ref: str, tag: str) -> tuple[int, Any]:
        """POST /repositories/{repository}/tags with {"id": tag, "ref": ref}: Ref."""
        ...
