"""`silt fs presign` (lakectl's fs presign): a URL that reads one object without credentials,
until it expires. It is the REST API's presigned address (stat with presign), so it is the
store's own URL on S3, and the edge's signed one on local disk, as lakeFS clients get it.

RestApi is also what `silt fs` and `silt local` move bytes with when the server presigns
(cli/transfer.py): lakeFS's REST API on the gateway's endpoint, with the CLI's credentials.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli.common import client, json_option, output, state
from silt.client import EXIT_DENIED, EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, ClientError, parse_uri

_EXIT_OF_STATUS = {400: EXIT_USAGE, 401: EXIT_DENIED, 403: EXIT_DENIED, 404: EXIT_NOT_FOUND}
_T = TypeVar("_T")
_NOT_ASKED = object()  # the storage config before /config is asked (None is an answer)


def exit_of_status(status: int) -> int:
    """The CLI's exit code for an HTTP error status."""
    return _EXIT_OF_STATUS.get(status, EXIT_FAILURE)


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
    """lakeFS's REST API (lakefs_sdk) at the gateway's endpoint, signed in with the CLI's
    credentials. Made in the command's thread (it reads click's context); its calls may then
    run in transfer threads (urllib3's pools are thread-safe)."""

    def __init__(self) -> None:
        # lakeFS's own client (a runtime dependency already: the API's schemas), imported here
        # only: it is large, and most commands never need it.
        import lakefs_sdk

        c = client()
        creds = c.credentials()
        settings = c.settings
        self.endpoint = settings.s3_endpoint
        configuration = lakefs_sdk.Configuration(
            host=settings.s3_endpoint.rstrip("/") + "/api/v1",
            username=creds.access_key_id,
            password=creds.secret_access_key.get_secret_value(),
        )
        if settings.s3_ca_file:
            configuration.ssl_ca_cert = settings.s3_ca_file
        self.ca_file = settings.s3_ca_file
        self._api_client = lakefs_sdk.ApiClient(configuration)
        self.objects = lakefs_sdk.ObjectsApi(self._api_client)
        self.staging = lakefs_sdk.StagingApi(self._api_client)
        self._config = lakefs_sdk.ConfigApi(self._api_client)
        self._storage: Any = _NOT_ASKED

    def call(self, what: str, fn: Callable[[], _T]) -> _T:
        """fn(), with the API's errors as the CLI's one-line errors and exit codes."""
        from lakefs_sdk.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn()
        except ApiException as exc:
            raise http_error(what, int(exc.status or 0), exc.body or exc.reason or "") from None
        except (OSError, HTTPError) as exc:  # connection errors (urllib3's and the socket's)
            raise ClientError(f"REST API unavailable at {self.endpoint}: {exc}", EXIT_UNAVAILABLE) from None

    def storage_config(self) -> Any:
        """The server's storage config (lakeFS's /config: its storage_config, else the first of
        storage_config_list; None when it has neither); asked once."""
        if self._storage is _NOT_ASKED:
            config = self.call("GET /config", self._config.get_config)
            self._storage = config.storage_config or (config.storage_config_list or [None])[0]
        return self._storage

    def presigns(self) -> bool:
        """Whether the server hands out presigned URLs (the storage config's pre_sign_support)."""
        storage = self.storage_config()
        return bool(storage is not None and storage.pre_sign_support)

    def presigned_url(self, repo: str, ref: str, path: str) -> str:
        """The REST API's presigned GET address of the object at ref."""
        stats = self.call(
            f"lakefs://{repo}/{ref}/{path}", lambda: self.objects.stat_object(repo, ref, path, presign=True)
        )
        address = str(stats.physical_address)
        if not address.startswith(("http://", "https://")):
            raise ClientError(f"the server gave no presigned URL for {path!r} (its blockstore cannot presign)")
        return address

    def upload_location(self, repo: str, branch: str, path: str) -> tuple[str, str]:
        """A new physical address for path on branch, and the presigned PUT URL that writes it."""
        location = self.call(
            f"lakefs://{repo}/{branch}/{path}",
            lambda: self.staging.get_physical_address(repo, branch, path, presign=True),
        )
        if not location.physical_address or not location.presigned_url:
            raise ClientError(f"the server gave no presigned upload URL for {path!r} (its blockstore cannot presign)")
        return str(location.physical_address), str(location.presigned_url)

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
        from lakefs_sdk import StagingLocation, StagingMetadata

        body = StagingMetadata(
            staging=StagingLocation(physical_address=address, presigned_url=None, presigned_url_expiry=None),
            checksum=etag,
            size_bytes=size,
            user_metadata=metadata or None,
            content_type=content_type,
            mtime=None,
        )
        self.call(
            f"lakefs://{repo}/{branch}/{path}", lambda: self.staging.link_physical_address(repo, branch, path, body)
        )

    def default_namespace_prefix(self) -> str | None:
        """Where the server puts a repository created without a namespace (/config)."""
        storage = self.storage_config()
        return storage.default_namespace_prefix if storage is not None else None

    def create_repository(self, name: str, storage_namespace: str | None, default_branch: str, sample: bool) -> None:
        """POST /repositories; without a namespace, the server's default prefix plus the name,
        as lakeFS's clients do."""
        import lakefs_sdk

        if not storage_namespace:
            prefix = self.default_namespace_prefix()
            if prefix is None:
                raise ClientError("the server has no default storage namespace: pass --storage-namespace", EXIT_USAGE)
            storage_namespace = prefix + name if prefix.endswith(("/", "://")) else f"{prefix}/{name}"
        creation = lakefs_sdk.RepositoryCreation(
            name=name,
            storage_namespace=storage_namespace,
            default_branch=default_branch,
            sample_data=sample,
            storage_id=None,
            read_only=None,
        )
        repositories = lakefs_sdk.RepositoriesApi(self._api_client)
        self.call(f"create repository {name}", lambda: repositories.create_repository(creation))

    def close(self) -> None:
        self._api_client.close()


def rest_api() -> RestApi:
    """The invocation's RestApi (closed when the command ends)."""
    s = state()
    api: RestApi | None = s.rest_api
    if api is None:
        api = s.rest_api = RestApi()
        click.get_current_context().find_root().call_on_close(api.close)
    return api


def presigned_url(repo: str, ref: str, path: str) -> str:
    """The REST API's presigned GET address of the object at ref."""
    return rest_api().presigned_url(repo, ref, path)


@click.command("presign")
@click.argument("uri", metavar="silt://REPO/REF/PATH")
@json_option
def presign(uri: str) -> None:
    """A URL that reads the object without credentials until it expires."""
    repo, ref, path = parse_uri(uri)
    if not path:
        raise ClientError(f"expected silt://<repository>/<ref>/<path> of an object, got {uri!r}", EXIT_USAGE)
    url = presigned_url(repo, ref, path)
    output({"url": url}, lambda: click.echo(url))
