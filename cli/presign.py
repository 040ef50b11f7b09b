"""`silt fs presign` (lakectl's fs presign): a URL that reads one object without credentials,
until it expires. It is the REST API's presigned address (stat with presign), so it is the
store's own URL on S3, and the edge's signed one on local disk, as lakeFS clients get it.

RestApi is also what `silt fs` and `silt local` move bytes with when the server presigns
(cli/transfer.py): the presigning calls of lakeFS's REST API, on the CLI's REST client
(cli/rest.py).
"""

from __future__ import annotations

import json
from typing import Any

import click

from cli.common import json_option, output, state
from cli.rest import exit_of_status, segment
from silt.client_base import EXIT_USAGE, ClientError, parse_uri

_NOT_ASKED = object()  # the storage config before /config is asked (None is an answer)


def http_error(what: str, status: int, body: str | bytes) -> ClientError:
    """The CLI's error for an HTTP error answer: its JSON message (lakeFS's `{"message": ...}`)
    or its text, in words and exit code."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        message = str(json.loads(text)["message"])
    except (ValueError, KeyError, TypeError):
        message = text
    message = " ".join(message.split())[:300] or "(no message)"
    words = {401: "permission denied", 403: "permission denied", 404: "not found"}.get(status)
    prefix = f"{words}: " if words else ""
    return ClientError(f"{prefix}{what}: {status} {message}", exit_of_status(status))


class RestApi:
    """The REST API's presigning calls, with the CLI's endpoint and credentials. Made in the
    command's thread (it reads click's context); its calls may then run in transfer threads
    (the REST client keeps a connection per thread)."""

    def __init__(self) -> None:
        self._rest = state().rest()
        self.endpoint = self._rest.endpoint
        self.ca_file = self._rest.connection.ca_file
        self._storage: Any = _NOT_ASKED

    def _objects(self, repo: str, ref: str) -> str:
        return f"/repositories/{segment(repo)}/refs/{segment(ref)}/objects"

    def _staging(self, repo: str, branch: str) -> str:
        return f"/repositories/{segment(repo)}/branches/{segment(branch)}/staging/backing"

    def storage_config(self) -> dict[str, Any] | None:
        """The server's storage config (lakeFS's /config: its storage_config, else the first of
        storage_config_list; None when it has neither); asked once."""
        if self._storage is _NOT_ASKED:
            config = self._rest.get("/config", what="GET /config") or {}
            self._storage = config.get("storage_config") or (config.get("storage_config_list") or [None])[0]
        storage: dict[str, Any] | None = self._storage
        return storage

    def presigns(self) -> bool:
        """Whether the server hands out presigned URLs (the storage config's pre_sign_support)."""
        storage = self.storage_config()
        return bool(storage is not None and storage.get("pre_sign_support"))

    def presigned_url(self, repo: str, ref: str, path: str) -> str:
        """The REST API's presigned GET address of the object at ref."""
        stats = self._rest.get(
            self._objects(repo, ref) + "/stat", {"path": path, "presign": "true"}, what=f"lakefs://{repo}/{ref}/{path}"
        )
        address = str(stats.get("physical_address") or "")
        if not address.startswith(("http://", "https://")):
            raise ClientError(f"the server gave no presigned URL for {path!r} (its blockstore cannot presign)")
        return address

    def upload_location(self, repo: str, branch: str, path: str) -> tuple[str, str]:
        """A new physical address for path on branch, and the presigned PUT URL that writes it."""
        location = self._rest.get(
            self._staging(repo, branch), {"path": path, "presign": "true"}, what=f"lakefs://{repo}/{branch}/{path}"
        )
        if not location.get("physical_address") or not location.get("presigned_url"):
            raise ClientError(f"the server gave no presigned upload URL for {path!r} (its blockstore cannot presign)")
        return str(location["physical_address"]), str(location["presigned_url"])

    def link(
        self,
        repo: str,
        branch: str,
        path: str,
        address: str,
        etag: str,
        size: int,
        metadata: dict[str, str] | None = None,
        content_type: str | None = None,
    ) -> None:
        """Stage the uploaded bytes at address as path on branch (the server checks their size and ETag)."""
        body: dict[str, Any] = {"staging": {"physical_address": address}, "checksum": etag, "size_bytes": size}
        if metadata:
            body["user_metadata"] = metadata
        if content_type:
            body["content_type"] = content_type
        self._rest.put(self._staging(repo, branch), body, {"path": path}, what=f"lakefs://{repo}/{branch}/{path}")

    def close(self) -> None:
        """Nothing of its own: the REST client is closed with the command."""


def rest_api() -> RestApi:
    """The invocation's RestApi (closed when the command ends)."""
    s = state()
    api: RestApi | None = s.rest_api
    if api is None:
        api = s.rest_api = RestApi()
    return api


def presigned_url(repo: str, ref: str, path: str) -> str:
    """The REST API's presigned GET address of the object at ref."""
    return rest_api().presigned_url(repo, ref, path)


@click.command("presign")
@click.argument("uri", metavar="lakefs://REPO/REF/PATH")
@json_option
def presign(uri: str) -> None:
    """A URL that reads the object without credentials until it expires."""
    repo, ref, path = parse_uri(uri)
    if not path:
        raise ClientError(f"expected lakefs://<repository>/<ref>/<path> of an object, got {uri!r}", EXIT_USAGE)
    url = presigned_url(repo, ref, path)
    output({"url": url}, lambda: click.echo(url))
