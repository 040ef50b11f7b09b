"""`silt fs presign` (lakectl's fs presign): a URL that reads one object without credentials,
until it expires. It is the REST API's presigned address (stat with presign), so it is the
store's own URL on S3, and the edge's signed one on local disk, as lakeFS clients get it."""

from __future__ import annotations

import click

from silt.cli.common import client, json_option, output
from silt.client import EXIT_DENIED, EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, ClientError, parse_uri

_EXIT_OF_STATUS = {400: EXIT_USAGE, 401: EXIT_DENIED, 403: EXIT_DENIED, 404: EXIT_NOT_FOUND}


def presigned_url(repo: str, ref: str, path: str) -> str:
    """The REST API's presigned GET address of the object at ref."""
    # lakeFS's own client (a runtime dependency already: the API's schemas), imported here only:
    # it is large, and no other command needs it.
    import lakefs_sdk
    from lakefs_sdk.exceptions import ApiException

    c = client()
    creds = c.credentials()
    settings = c.settings
    configuration = lakefs_sdk.Configuration(
        host=settings.s3_endpoint.rstrip("/") + "/api/v1",
        username=creds.access_key_id,
        password=creds.secret_access_key.get_secret_value(),
    )
    if settings.s3_ca_file:
        configuration.ssl_ca_cert = settings.s3_ca_file
    try:
        with lakefs_sdk.ApiClient(configuration) as api_client:
            stats = lakefs_sdk.ObjectsApi(api_client).stat_object(repo, ref, path, presign=True)
    except ApiException as exc:
        words = (exc.body or exc.reason or "").strip().replace("\n", " ")[:300]
        status = int(exc.status or 0)
        raise ClientError(f"{status} {words}", _EXIT_OF_STATUS.get(status, EXIT_FAILURE)) from None
    except OSError as exc:  # urllib3's connection errors are OSErrors
        raise ClientError(f"REST API unavailable at {settings.s3_endpoint}: {exc}", EXIT_UNAVAILABLE) from None
    address = str(stats.physical_address)
    if not address.startswith(("http://", "https://")):
        raise ClientError(f"the server gave no presigned URL for {path!r} (its blockstore cannot presign)")
    return address


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
