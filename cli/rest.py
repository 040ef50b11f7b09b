"""The `silt` CLI's transport for user commands: lakeFS's REST API (``/api/v1``) on the edge's
HTTP(S) endpoint, signed in with HTTP basic auth (access key ID and secret), as lakectl is. That
one endpoint is all a laptop or a pod outside the cluster reaches; graveler's and auth's gRPC
ports are internal.

Where it connects and as whom (Connection), first match wins:

- Silt's own settings when one is named explicitly (``SILT_ACCESS_KEY_ID``,
  ``SILT_CLIENT_CREDENTIALS_FILE``, ``SILT_DATA_DIR``, ``SILT_CONFIG`` or ``--config``): the key
  from the variables or the credentials file `silt run` saves, the endpoint of the gateway;
- else lakectl's configuration (cli/lakectl_config.py) when it has credentials;
- else `silt run`'s saved credentials (``~/.silt/credentials.json``) and the configuration's
  gateway address.

``--endpoint`` (or ``--s3-endpoint``) overrides the endpoint either way.

Built on the standard library's http.client (one keep-alive connection per thread): it imports in
a few milliseconds, where gRPC's stack costs a tenth of a second of every command's start. Errors
are the CLI's one-line ClientErrors: the API's JSON ``message`` and the exit code of its status.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from silt.client_base import (
    ACCESS_KEY_ENV,
    CREDENTIALS_FILE_ENV,
    EXIT_CONFLICT,
    EXIT_DENIED,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    SECRET_KEY_ENV,
    ClientError,
    _saved,
    credentials_file_candidates,
)

TIMEOUT_SECONDS = 60.0
PAGE_SIZE = 1000
_EXIT_OF_STATUS = {
    400: EXIT_USAGE,
    401: EXIT_DENIED,
    403: EXIT_DENIED,
    404: EXIT_NOT_FOUND,
    409: EXIT_CONFLICT,
    412: EXIT_CONFLICT,
    503: EXIT_UNAVAILABLE,
}
_WORDS_OF_STATUS = {401: "not authenticated", 403: "permission denied", 404: "not found"}
# Variables that name Silt's own credentials or configuration: set, they choose Silt's settings.
_SILT_CHOICES = (ACCESS_KEY_ENV, CREDENTIALS_FILE_ENV, "SILT_DATA_DIR", "SILT_CONFIG")


@dataclass(frozen=True)
class Connection:
    endpoint: str  # the server's base URL: http(s)://host:port, the API below /api/v1
    access_key_id: str
    secret_access_key: str
    ca_file: str | None
    source: str  # where the credentials were found


def resolve_connection(config_path: str | None, endpoint: str | None, lakectl: bool = True) -> Connection:
    """The endpoint and key the CLI's REST calls use (the module's docstring says which);
    lakectl False: never lakectl's."""
    from cli import lakectl_config

    explicit = config_path is not None or any(os.environ.get(name) for name in _SILT_CHOICES)
    if lakectl and not explicit:
        theirs = lakectl_config.load()
        if theirs.has_credentials:
            url = endpoint or theirs.endpoint_url or _silt_endpoint(config_path, {})[0]
            return Connection(
                lakectl_config.base_url(url), theirs.access_key_id, theirs.secret_access_key, None, theirs.source
            )
    saved, source = _saved()
    if os.environ.get(ACCESS_KEY_ENV) and os.environ.get(SECRET_KEY_ENV):
        access, secret = os.environ[ACCESS_KEY_ENV], os.environ[SECRET_KEY_ENV]
        source = f"{ACCESS_KEY_ENV}/{SECRET_KEY_ENV}"
    elif saved.get("access_key_id") and saved.get("secret_access_key"):
        access, secret = str(saved["access_key_id"]), str(saved["secret_access_key"])
    else:
        raise ClientError(
            f"no credentials: set {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or lakectl's (~/.lakectl.yaml,"
            " LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY), or start the stack"
            f" with `silt run` (it saves them to {credentials_file_candidates()[-1]})",
            EXIT_USAGE,
        )
    url, ca_file = _silt_endpoint(config_path, saved)
    return Connection(endpoint or url, access, secret, ca_file, source)


def _silt_endpoint(config_path: str | None, saved: Mapping[str, Any]) -> tuple[str, str | None]:
    """The gateway's URL (the edge serves the REST API there too) and its CA bundle: saved by
    `silt run`, else the configuration's."""
    from cli.config_cache import client_view
    from silt.client_base import find_config_path

    view = client_view(find_config_path(config_path))
    return str(saved.get("gateway") or view.s3_endpoint), view.s3_ca_file


def segment(value: str) -> str:
    """One path segment of a URL (a ref or an object path is one segment: its slashes escaped)."""
    return quote(value, safe="")


class RestClient:
    """lakeFS's REST API at one endpoint; safe to share between threads (a connection each)."""

    def __init__(self, connection: Connection) -> None:
        import base64

        self.connection = connection
        parts = urlsplit(connection.endpoint if "://" in connection.endpoint else f"http://{connection.endpoint}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ClientError(f"not an HTTP(S) endpoint: {connection.endpoint!r}", EXIT_USAGE)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._base = parts.path.rstrip("/") + "/api/v1"
        self.endpoint = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        token = f"{connection.access_key_id}:{connection.secret_access_key}".encode()
        self._auth = "Basic " + base64.b64encode(token).decode()
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()

    # --- the connection --------------------------------------------------------------------

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            import http.client

            if self._https:
                import ssl

                context = ssl.create_default_context(cafile=self.connection.ca_file or None)
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=TIMEOUT_SECONDS, context=context)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=TIMEOUT_SECONDS)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()

    def _send(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> Any:
        """The raw answer. A kept-alive connection the server closed while it was idle fails the
        next request at once: that request is sent again, once, on a new connection."""
        import http.client

        for attempt in (1, 2):
            reused = getattr(self._local, "conn", None) is not None
            conn = self._connection()
            try:
                conn.request(method, url, body=body, headers=headers)
                return conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                self._local.conn = None
                if attempt == 2 or not reused:
                    raise
            except OSError:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def request(
        self, method: str, path: str, params: Mapping[str, Any] | None = None, body: Any = None, what: str = ""
    ) -> Any:
        """Call the API: the decoded JSON answer (its text when it is not JSON, None when it has
        no body). body is sent as JSON; parameters that are None, empty or False are left out."""
        return self.exchange(method, path, params, body, what=what)[0]

    def exchange(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        what: str = "",
    ) -> tuple[Any, Mapping[str, str]]:
        """request(), with headers to send (If-Match) and the answer's headers (ETag)."""
        sent = {"Accept": "application/json", **(headers or {})}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        content, raw_headers = self._call(method, path, params, payload, sent, what)
        if not content:
            return None, raw_headers
        try:
            return json.loads(content), raw_headers
        except ValueError:
            return content, raw_headers

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        """The request's URL; parameters that are None, empty or False are left out."""
        query = {k: v for k, v in (params or {}).items() if v is not None and v != "" and v is not False}
        return self._base + path + ("?" + urlencode(query, doseq=True) if query else "")

    def _call(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        payload: bytes | None,
        headers: Mapping[str, str],
        what: str,
    ) -> tuple[bytes, Mapping[str, str]]:
        """One request on this thread's connection: the answer's body and headers, or the
        ClientError its failure is (unreachable: EXIT_UNAVAILABLE; a status of 300 or more: the
        API's error)."""
        import http.client

        sent = {"Authorization": self._auth, **headers}
        try:
            answer = self._send(method, self._url(path, params), payload, sent)
            content: bytes = answer.read()
        except (OSError, http.client.HTTPException) as exc:
            self._local.conn = None
            raise ClientError(
                f"REST API unavailable at {self.endpoint} ({exc or type(exc).__name__}; is the server running?)",
                EXIT_UNAVAILABLE,
            ) from None
        if answer.status >= 300:
            raise api_error(answer.status, content, what or f"{method} {path}")
        return content, answer.headers

    def raw(self, path: str, params: Mapping[str, Any] | None = None, what: str = "") -> bytes:
        """A GET's body as it came, never decoded (a hook's output may happen to be JSON)."""
        return self._call("GET", path, params, None, {"Accept": "*/*"}, what)[0]

    def stream(
        self, path: str, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        """A GET whose answer is read as it comes (Server-Sent Events): the open response, on a
        connection of its own that the caller closes (response.close()). No read timeout: a
        followed stream may be quiet between keepalives."""
        import http.client

        url = self._url(path, params)
        sent = {"Authorization": self._auth, "Accept": "text/event-stream", **(headers or {})}
        if self._https:
            import ssl

            context = ssl.create_default_context(cafile=self.connection.ca_file or None)
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(self._host, self._port, context=context)
        else:
            conn = http.client.HTTPConnection(self._host, self._port)
        try:
            conn.request("GET", url, headers=sent)
            answer = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ClientError(
                f"REST API unavailable at {self.endpoint} ({exc or type(exc).__name__}; is the server running?)",
                EXIT_UNAVAILABLE,
            ) from None
        if answer.status >= 300:
            content = answer.read()
            conn.close()
            raise api_error(answer.status, content, f"GET {path}")
        return answer

    def send_bytes(
        self, method: str, path: str, data: bytes, params: Mapping[str, Any] | None = None, what: str = ""
    ) -> Any:
        """A request whose body is bytes (application/octet-stream): the decoded JSON answer."""
        sent = {"Accept": "application/json", "Content-Type": "application/octet-stream"}
        content = self._call(method, path, params, data, sent, what)[0]
        return json.loads(content) if content else None

    def get(self, path: str, params: Mapping[str, Any] | None = None, what: str = "") -> Any:
        return self.request("GET", path, params, what=what)

    def post(self, path: str, body: Any = None, params: Mapping[str, Any] | None = None, what: str = "") -> Any:
        return self.request("POST", path, params, body if body is not None else {}, what=what)

    def put(self, path: str, body: Any = None, params: Mapping[str, Any] | None = None, what: str = "") -> Any:
        return self.request("PUT", path, params, body, what=what)

    def delete(self, path: str, params: Mapping[str, Any] | None = None, what: str = "") -> Any:
        return self.request("DELETE", path, params, what=what)

    def pages(self, path: str, params: Mapping[str, Any] | None = None, what: str = "") -> Iterator[dict[str, Any]]:
        """Every result of a paged listing (lakeFS's pagination: next_offset while has_more)."""
        after = ""
        while True:
            answer = self.get(path, {**(params or {}), "after": after, "amount": PAGE_SIZE}, what)
            results = answer.get("results") or []
            yield from results
            pagination = answer.get("pagination") or {}
            if not pagination.get("has_more") or not pagination.get("next_offset"):
                return
            after = pagination["next_offset"]


class ApiError(ClientError):
    """An error answer of the API: the CLI's line and exit code, and the status and JSON body
    (a merge's 409 lists its conflicts there)."""

    def __init__(self, message: str, exit_code: int, status: int, body: dict[str, Any]) -> None:
        super().__init__(message, exit_code)
        self.status = status
        self.body = body


def exit_of_status(status: int) -> int:
    """The CLI's exit code for an HTTP error status."""
    return _EXIT_OF_STATUS.get(status, EXIT_FAILURE)


def api_error(status: int, content: bytes, what: str) -> ApiError:
    """The CLI's error for an error answer: the API's `message` (its text when it has none),
    with the words of its status in front where the message does not already say them."""
    text = content.decode("utf-8", "replace")
    body: dict[str, Any] = {}
    try:
        parsed = json.loads(text)
        message = str(parsed["message"])
        body = parsed
    except (ValueError, KeyError, TypeError):
        message = text
    message = " ".join(message.split())[:1000] or f"{what}: HTTP {status}"
    words = _WORDS_OF_STATUS.get(status)
    if words and words not in message.lower():
        message = f"{words}: {message}"
    return ApiError(message, exit_of_status(status), status, body)
