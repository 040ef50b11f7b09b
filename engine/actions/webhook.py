"""lakeFS's `webhook` hook: its properties parsed, the event POSTed, the exchange logged.

Properties, as lakeFS reads them: `url` (http or https), `timeout` (a Go duration such as
"30s" or "1m30s"; 1 minute if absent), `query_params` (name to a string or a list of strings,
added to the URL's own query) and `headers` (name to string). A value may take parts from the
environment, `{{ ENV.NAME }}`, which makes the whole value secret: masked in the hook's output.
As in lakeFS, a name is read from the environment only when the actions' environment is enabled
and the name starts with its prefix (`SILTACTION_` here); otherwise it reads as "". Beyond
lakeFS, a variable is read only by hooks of the repositories the configuration grants it to
(`actions.env.repositories`; none unless listed). A name the environment lacks, or one not
granted to the hook's repository, is an error.

Address policy (targets.py), because a webhook lets whoever can write an action file make the
server send requests: cloud metadata, link-local, unspecified, multicast and broadcast targets
are refused, and the configuration may narrow the rest. Loopback and private addresses are
refused unless the deployment opts in (`allow_private`, for on-premises receivers): otherwise
any writer could reach what only the server's own network can. The host is resolved once, every
address it resolves to is checked, and the connection is made to a checked address (the Host
header, TLS's server name and certificate check carry the URL's host name): no second lookup
can answer differently (DNS rebinding). Redirects are not followed, since one could point
anywhere; a 3xx answer fails the hook. No proxy from the environment is used.

Bounded: the whole exchange (lookup, connect, TLS, request, the answer's head and body) by the
hook's timeout or the caller's deadline, whichever ends first; a watchdog shuts the socket at
that moment, so a server trickling bytes cannot stretch it. The answer's body read is at most
RESPONSE_BODY_LIMIT bytes; the output keeps the answer's status line and at most
STORED_BODY_LIMIT bytes of its body (never its headers), the other sections are bounded too. Property values, names,
counts, the URL and the duration text have length limits, and a value's `{{ ENV.… }}` parts are
found in linear time. Connections that ended a complete exchange are kept for a second
(IDLE_SECONDS) for the next webhook to the same checked address; at most MAX_IDLE of them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3.exceptions
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.response import HTTPResponse
from urllib3.util.ssl_ import create_urllib3_context
from urllib3.util.ssl_match_hostname import CertificateError

from engine.actions.targets import IPAddress, WebhookPolicy, normalize_host

__all__ = [
    "DEFAULT_ENV_PREFIX",
    "DEFAULT_TIMEOUT",
    "MASK",
    "RESPONSE_BODY_LIMIT",
    "STORED_BODY_LIMIT",
    "EnvPolicy",
    "HookResult",
    "InvalidHook",
    "SecureValue",
    "WebhookPolicy",
    "WebhookSpec",
    "close_idle_connections",
    "parse_duration",
    "parse_webhook",
    "send_webhook",
]

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 24 * 3600.0
DEFAULT_ENV_PREFIX = "SILTACTION_"
MASK = "*******"
RESPONSE_BODY_LIMIT = 64 * 1024
# What a run keeps of an answer's body: enough to say why a receiver refused, little enough
# that a hook pointed at some internal service does not copy its pages into the repository.
STORED_BODY_LIMIT = 4 * 1024
LOG_SECTION_LIMIT = 64 * 1024
IDLE_SECONDS = 1.0
MAX_IDLE = 32

MAX_URL_CHARS = 8192
MAX_DURATION_CHARS = 32
MAX_NAME_CHARS = 256
MAX_VALUE_CHARS = 8192
MAX_ENTRIES = 64
# A secret shorter than this is not scrubbed from the answer: it would mask unrelated text.
MIN_SCRUBBED_SECRET = 4

_READ_CHUNK = 16 * 1024
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_NUMBER = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)"
_UNIT = r"(?:ns|us|µs|μs|ms|s|m|h)"
_DURATION = re.compile(f"(?:{_NUMBER}{_UNIT})+")
_DURATION_PART = re.compile(f"({_NUMBER})({_UNIT})")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_BAD_URL_CHAR = re.compile(r"[\x00-\x20\x7f]")
_HOST_NAME = re.compile(r"[a-z0-9_.-]+")
# Characters kept as they are in the URL's path and query; the rest is percent-encoded.
_URL_SAFE = "!#$%&'()*+,/:;=?@[]~"
# Set by the hook from the request itself; one from the action file would corrupt the framing.
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade"}
)


class InvalidHook(ValueError):
    """A hook's properties cannot be used; the message names the property."""


@dataclass(frozen=True)
class EnvPolicy:
    """What `{{ ENV.NAME }}` may read (lakeFS's actions.env.enabled and .prefix), and which
    repositories' hooks may read each variable (Silt's actions.env.repositories): a value is a
    secret that any writer of a repository could send to a URL of their choice, so a variable
    is read only by the hooks of the repositories it is granted to, none unless listed."""

    enabled: bool = True
    prefix: str = DEFAULT_ENV_PREFIX
    # None: the process environment, read when a hook is parsed.
    environ: Mapping[str, str] | None = field(default=None, repr=False, compare=False)
    # Variable name -> repository name patterns (fnmatch: `*` any run of characters).
    repositories: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # The repository whose hook reads (for_repository); "" when none.
    repository: str = ""

    def for_repository(self, repository: str) -> EnvPolicy:
        return replace(self, repository=repository)

    def granted(self, name: str) -> bool:
        return any(fnmatchcase(self.repository, pattern) for pattern in self.repositories.get(name, ()))

    def lookup(self, name: str) -> str | None:
        """The value name reads as; None if the environment lacks it. InvalidHook if the
        variable is not granted to the repository."""
        if not self.enabled or not name.startswith(self.prefix):
            return ""
        if not self.granted(name):
            shown = repr(self.repository) if self.repository else "this repository"
            raise InvalidHook(f"environment variable {name} is not granted to {shown} (actions.env.repositories)")
        environ = os.environ if self.environ is None else self.environ
        return environ.get(name)


@dataclass(frozen=True, repr=False)
class SecureValue:
    """A property value; shown masked wherever it is printed if it came from the environment."""

    value: str
    secret: bool = False

    def shown(self) -> str:
        return MASK if self.secret else self.value

    def __str__(self) -> str:
        return self.shown()

    def __repr__(self) -> str:
        return f"SecureValue({self.shown()!r})"


@dataclass(frozen=True)
class WebhookSpec:
    url: str  # as written; the output's request line shows it
    scheme: str
    host: str  # ASCII, lower case; an IP address without brackets
    port: int
    target: str  # the path and the URL's own query, percent-encoded
    timeout: float  # seconds
    query_params: tuple[tuple[str, SecureValue], ...] = ()
    headers: tuple[tuple[str, SecureValue], ...] = ()


@dataclass(frozen=True)
class HookResult:
    ok: bool
    output: str
    error: str  # "" when ok


# --- parsing ---------------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """Seconds in a Go duration ("1m30s", "500ms"); ValueError unless positive and at most a day."""
    if len(text) > MAX_DURATION_CHARS or not _DURATION.fullmatch(text):
        raise ValueError(f"{text[:MAX_DURATION_CHARS]!r} is not a duration such as '30s', '1m30s' or '500ms'")
    seconds = sum(float(number) * _UNITS[unit] for number, unit in _DURATION_PART.findall(text))
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    if seconds > MAX_TIMEOUT:
        raise ValueError(f"{text!r} is longer than 24h")
    return seconds


def _secure(text: str, env: EnvPolicy, where: str) -> SecureValue:
    """text with its `{{ ENV.NAME }}` parts read from the environment (lakeFS's syntax: an
    optional space inside each brace pair; the name ends at the first `}}` on the line)."""
    if len(text) > MAX_VALUE_CHARS:
        raise InvalidHook(f"{where}: longer than {MAX_VALUE_CHARS} characters")
    out: list[str] = []
    at = 0
    secret = False
    while True:
        start = text.find("{{", at)
        if start < 0:
            break
        name_at = start + 2
        if text.startswith(" ", name_at):
            name_at += 1
        if not text.startswith("ENV.", name_at):
            out.append(text[at : start + 1])
            at = start + 1
            continue
        end = text.find("}}", name_at + 4)
        if end < 0:
            break  # no `}}` later on: no later `{{` can be a reference either
        newline = text.find("\n", name_at + 4, end)
        if newline >= 0:
            # Every `{{` before the newline would end past it too: none of them is a reference.
            out.append(text[at : newline + 1])
            at = newline + 1
            continue
        name = text[start : end + 2].strip("{} ").partition(".")[2]
        if not name:
            raise InvalidHook(f"{where}: {text[start : end + 2]!r} names no environment variable")
        try:
            value = env.lookup(name)
        except InvalidHook as exc:
            raise InvalidHook(f"{where}: {exc}") from None
        if value is None:
            raise InvalidHook(f"{where}: environment variable {name} is not set")
        out.append(text[at:start])
        out.append(value)
        secret = True
        at = end + 2
    out.append(text[at:])
    value = "".join(out)
    if len(value) > MAX_VALUE_CHARS:
        raise InvalidHook(f"{where}: longer than {MAX_VALUE_CHARS} characters once read from the environment")
    return SecureValue(value, secret)


def _parse_url(raw: Any) -> tuple[str, str, str, int, str]:
    """(url, scheme, host, port, target) of the url property."""
    if raw is None:
        raise InvalidHook("url: missing")
    if not isinstance(raw, str):
        raise InvalidHook(f"url: must be a string, not {type(raw).__name__}")
    if len(raw) > MAX_URL_CHARS:
        raise InvalidHook(f"url: longer than {MAX_URL_CHARS} characters")
    if _BAD_URL_CHAR.search(raw):
        raise InvalidHook("url: contains a space or a control character")
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise InvalidHook(f"url: {raw!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidHook(f"url: the scheme must be http or https, not {parts.scheme!r}")
    if "@" in parts.netloc:
        raise InvalidHook("url: credentials in the URL are not supported; send them in a header")
    if not parts.hostname:
        raise InvalidHook(f"url: {raw!r} names no host")
    if "%" in parts.hostname:
        raise InvalidHook("url: an IPv6 zone is not supported")
    try:
        host = normalize_host(parts.hostname)
    except ValueError as exc:
        raise InvalidHook(f"url: {exc}") from None
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        if len(host) > 253 or not _HOST_NAME.fullmatch(host):
            raise InvalidHook(f"url: {parts.hostname!r} is not a host name") from None
    if port == 0:
        raise InvalidHook("url: port 0")
    target = quote(parts.path or "/", safe=_URL_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_URL_SAFE)
    return raw, scheme, host, port or (443 if scheme == "https" else 80), target


def _parse_timeout(raw: Any) -> float:
    if raw is None or raw == "":
        return DEFAULT_TIMEOUT
    if not isinstance(raw, str):
        raise InvalidHook(f"timeout: must be a duration string such as '30s', not {type(raw).__name__}")
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise InvalidHook(f"timeout: {exc}") from None


def _mapping(raw: Any, prop: str, of: str) -> Mapping[Any, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidHook(f"{prop}: must be a mapping of names to {of}")
    if len(raw) > MAX_ENTRIES:
        raise InvalidHook(f"{prop}: more than {MAX_ENTRIES} entries")
    return raw


def _parse_query_params(raw: Any, env: EnvPolicy) -> tuple[tuple[str, SecureValue], ...]:
    params: list[tuple[str, SecureValue]] = []
    for name, value in _mapping(raw, "query_params", "strings or lists of strings").items():
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            raise InvalidHook(f"query_params: {name!r} is not a parameter name")
        values = value if isinstance(value, list) else [value]
        for one in values:
            if not isinstance(one, str):
                raise InvalidHook(f"query_params.{name}: values must be strings, not {type(one).__name__}")
            params.append((name, _secure(one, env, f"query_params.{name}")))
        if len(params) > MAX_ENTRIES:
            raise InvalidHook(f"query_params: more than {MAX_ENTRIES} values")
    return tuple(params)


def _parse_headers(raw: Any, env: EnvPolicy) -> tuple[tuple[str, SecureValue], ...]:
    headers: list[tuple[str, SecureValue]] = []
    for name, value in _mapping(raw, "headers", "strings").items():
        if not isinstance(name, str) or len(name) > MAX_NAME_CHARS or not _TOKEN.fullmatch(name):
            raise InvalidHook(f"headers: {name!r} is not a header name")
        if name.lower() in _RESERVED_HEADERS:
            raise InvalidHook(f"headers.{name}: set by the webhook itself")
        if not isinstance(value, str):
            raise InvalidHook(f"headers.{name}: must be a string, not {type(value).__name__}")
        secure = _secure(value, env, f"headers.{name}")
        if _BAD_VALUE_CHAR.search(secure.value):
            raise InvalidHook(f"headers.{name}: contains a line break or a control character")
        headers.append((name, secure))
    return tuple(headers)


def parse_webhook(properties: Mapping[str, Any], env: EnvPolicy) -> WebhookSpec:
    """The webhook a hook's properties describe; InvalidHook naming the property if they cannot."""
    if not isinstance(properties, Mapping):
        raise InvalidHook("properties: a webhook needs a mapping with at least 'url'")
    url, scheme, host, port, target = _parse_url(properties.get("url"))
    params = properties.get("query_params")
    headers = properties.get("headers")
    return WebhookSpec(
        url=url,
        scheme=scheme,
        host=host,
        port=port,
        target=target,
        timeout=_parse_timeout(properties.get("timeout")),
        query_params=() if "query_params" not in properties else _parse_query_params(params, env),
        headers=() if "headers" not in properties else _parse_headers(headers, env),
    )


# --- sending ---------------------------------------------------------------------------


class _Failed(Exception):
    """The exchange ended without an answer; the message is the hook's error."""


class _ConnectFailed(Exception):
    """No connection to one address (the next may do); the message says why."""


def _seconds(value: float) -> str:
    return f"{round(value, 3):g}s"


def _took(value: float) -> str:
    return f"{value * 1000:.1f}ms" if value < 1 else f"{value:.3f}s"


def _clip(text: str, limit: int = LOG_SECTION_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


def _endpoint(ip: IPAddress, port: int) -> str:
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _describe(exc: BaseException, endpoint: str, host: str, timed_out: str) -> str:
    chain = _causes(exc)
    for e in chain:
        # urllib3's NewConnectionError is a ConnectTimeoutError, whatever stopped the connect.
        if isinstance(e, TimeoutError) or (
            isinstance(e, urllib3.exceptions.TimeoutError) and not isinstance(e, urllib3.exceptions.NewConnectionError)
        ):
            return timed_out
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            return f"connection refused by {endpoint}"
        if isinstance(e, ssl.SSLCertVerificationError):
            return f"the TLS certificate of {host} was not accepted: {e.verify_message or e}"
        if isinstance(e, CertificateError):
            return f"the TLS certificate of {host} was not accepted: {e}"
        if isinstance(e, ssl.SSLError):
            return f"TLS with {endpoint} failed: {e.reason or e}"
    for e in chain:
        if isinstance(e, OSError) and e.strerror:
            return f"cannot reach {endpoint}: {e.strerror}"
    first = chain[-1]
    return f"the exchange with {endpoint} failed: {type(first).__name__}: {first}"


# Lookups in flight at once, over every hook: a lookup that never answers keeps its thread until
# the resolver gives up, so hooks naming such hosts in a loop must not pile threads up.
MAX_LOOKUPS = 32
_lookups = threading.BoundedSemaphore(MAX_LOOKUPS)


def _resolve(host: str, port: int, timeout: float, timed_out: str) -> list[IPAddress]:
    """host's addresses, looked up once, in the resolver's order, within timeout."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    found: list[Any] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            failure.append(exc)
        finally:
            _lookups.release()
            done.set()

    if not _lookups.acquire(blocking=False):
        raise _Failed(f"cannot resolve {host}: {MAX_LOOKUPS} lookups are already in flight")
    # A thread of its own: getaddrinfo has no timeout, and a hung lookup must hold up nobody.
    threading.Thread(target=lookup, name="webhook-resolve", daemon=True).start()
    if not done.wait(timeout):
        raise _Failed(f"{timed_out} resolving {host}")
    if failure:
        raise _Failed(f"cannot resolve {host}: {failure[0]}")
    addresses: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in found:
        try:
            addresses[ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])] = None
        except ValueError:
            continue
    return list(addresses)


_Key = tuple[str, str, int, str, "str | None"]


class _IdleConnections:
    """Connections left open by a complete exchange, by the checked address they were opened
    to (and, for https, the host name their certificate was checked against), so that they
    only ever serve a request whose own check allowed that address."""

    def __init__(self, limit: int, max_idle_seconds: float) -> None:
        self._lock = threading.Lock()
        self._idle: list[tuple[_Key, HTTPConnection, float]] = []
        self._limit = limit
        self._max_idle = max_idle_seconds

    def take(self, key: _Key) -> HTTPConnection | None:
        now = time.monotonic()
        found: HTTPConnection | None = None
        with self._lock:
            # Servers close idle connections after a few seconds; one kept longer could be
            # closed as the request goes out, failing a hook that did nothing wrong.
            stale = [c for _, c, since in self._idle if now - since > self._max_idle]
            self._idle = [entry for entry in self._idle if now - entry[2] <= self._max_idle]
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i][0] == key:
                    found = self._idle.pop(i)[1]
                    break
        for conn in stale:
            conn.close()
        if found is not None and not found.is_connected:
            found.close()
            return None
        return found

    def put(self, key: _Key, conn: HTTPConnection) -> None:
        with self._lock:
            self._idle.append((key, conn, time.monotonic()))
            evicted = self._idle[: -self._limit] if len(self._idle) > self._limit else []
            del self._idle[: len(evicted)]
        for _, old, _since in evicted:
            old.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, conn, _since in idle:
            conn.close()


_IDLE = _IdleConnections(MAX_IDLE, IDLE_SECONDS)


def close_idle_connections() -> None:
    """Close the connections kept for reuse (at shutdown, or between tests)."""
    _IDLE.close()


_contexts_lock = threading.Lock()
_contexts: dict[str | None, tuple[float | None, ssl.SSLContext]] = {}


def _ssl_context(ca_certs: str | None) -> ssl.SSLContext:
    """One verifying context per CA file (reloaded when the file changes): loading CAs costs
    more than a handshake."""
    try:
        stamp = os.stat(ca_certs).st_mtime if ca_certs else None
    except OSError as exc:
        raise _Failed(f"cannot read the webhook CA file {ca_certs}: {exc.strerror}") from None
    with _contexts_lock:
        cached = _contexts.get(ca_certs)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    try:
        if ca_certs:
            context.load_verify_locations(cafile=ca_certs)
        else:
            context.load_default_certs()
    except (OSError, ssl.SSLError) as exc:
        raise _Failed(f"cannot load the webhook CA file {ca_certs}: {exc}") from None
    with _contexts_lock:
        _contexts[ca_certs] = (stamp, context)
    return context


class _Watchdog:
    """Shuts the connection's socket down when the budget ends. A socket timeout bounds each
    read; only this bounds their sum, which a server sending a byte now and then would stretch."""

    def __init__(self, conn: HTTPConnection, seconds: float) -> None:
        self.conn = conn
        self.sock: socket.socket | None = None
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            for sock in (self.sock, self.conn.sock):
                if isinstance(sock, socket.socket):
                    # The base class's: SSLSocket's own would drop its TLS state under the
                    # reading thread's feet.
                    with contextlib.suppress(OSError):
                        socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def finish(self) -> bool:
        """Stop watching; whether the budget ran out first."""
        with self._lock:
            self._done = True
        self._timer.cancel()
        return self.fired


@dataclass
class _Answer:
    status: int
    head: str
    body: bytes
    note: str


def _new_connection(spec: WebhookSpec, ip: IPAddress, policy: WebhookPolicy, timeout: float) -> HTTPConnection:
    if spec.scheme == "https":
        return HTTPSConnection(
            str(ip),
            spec.port,
            timeout=timeout,
            server_hostname=spec.host,
            assert_hostname=spec.host,
            ssl_context=_ssl_context(policy.ca_certs),
        )
    return HTTPConnection(str(ip), spec.port, timeout=timeout)


def _read_body(
    response: HTTPResponse, ends: float, watchdog: _Watchdog, endpoint: str, timed_out: str
) -> tuple[bytes, bool, str]:
    """(body, whether it was read to its end, a note on why not)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            if time.monotonic() >= ends:
                return b"".join(chunks), False, f"[reading the body stopped: {timed_out}]"
            data = response.read(_READ_CHUNK, decode_content=False)
            if not data:
                return b"".join(chunks), True, ""
            size += len(data)
            if size > RESPONSE_BODY_LIMIT:
                chunks.append(data[: len(data) - (size - RESPONSE_BODY_LIMIT)])
                note = f"[... the body is longer than {RESPONSE_BODY_LIMIT} bytes; the rest was not read]"
                return b"".join(chunks), False, note
            chunks.append(data)
    except Exception as exc:
        reason = timed_out if watchdog.fired else _describe(exc, endpoint, endpoint, timed_out)
        return b"".join(chunks), False, f"[reading the body stopped: {reason}]"


def _exchange(
    spec: WebhookSpec,
    ip: IPAddress,
    policy: WebhookPolicy,
    target: str,
    headers: Mapping[str, str],
    payload: bytes,
    ends: float,
    timed_out: str,
) -> _Answer:
    """The answer from ip; _ConnectFailed if no connection could be made to it, _Failed if
    the exchange failed otherwise."""
    key: _Key = (spec.scheme, str(ip), spec.port, spec.host if spec.scheme == "https" else "", policy.ca_certs)
    endpoint = _endpoint(ip, spec.port)
    remaining = ends - time.monotonic()
    if remaining <= 0:
        raise _Failed(timed_out)
    conn = _IDLE.take(key)
    fresh = conn is None
    if conn is None:
        conn = _new_connection(spec, ip, policy, remaining)
    conn.timeout = remaining
    watchdog = _Watchdog(conn, remaining)
    response: HTTPResponse | None = None
    reusable = False
    try:
        if fresh:
            try:
                conn.connect()
            except (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError) as exc:
                if watchdog.fired or time.monotonic() >= ends:
                    raise _Failed(timed_out) from None
                raise _ConnectFailed(_describe(exc, endpoint, spec.host, timed_out)) from None
        watchdog.sock = conn.sock
        conn.request("POST", target, body=payload, headers=headers, preload_content=False, decode_content=False)
        response = conn.getresponse()
        version = {10: "HTTP/1.0", 11: "HTTP/1.1"}.get(response.version, "HTTP/?")
        # The status line only: headers (cookies, tokens, internal names) are not kept.
        status_line = f"{version} {response.status} {response.reason or ''}".rstrip()
        body, complete, note = _read_body(response, ends, watchdog, endpoint, timed_out)
        reusable = complete and conn.sock is not None
        return _Answer(response.status, _clip(status_line, 1024), body, note)
    except (_Failed, _ConnectFailed):
        raise
    except Exception as exc:
        raise _Failed(timed_out if watchdog.fired else _describe(exc, endpoint, spec.host, timed_out)) from None
    finally:
        fired = watchdog.finish()
        if reusable and not fired:
            _IDLE.put(key, conn)
        else:
            if response is not None:
                response.close()
            conn.close()


def _request_log(spec: WebhookSpec, payload: bytes) -> list[str]:
    log = ["Request:", f"POST {spec.url}", "Query Params:"]
    log += [f"{name}: {value.shown()}" for name, value in spec.query_params]
    log.append("Headers:")
    log += [f"{name}: {value.shown()}" for name, value in spec.headers if name.lower() != "content-type"]
    log += ["Content-Type: application/json", "Request Body:", _clip(payload.decode(errors="replace")), ""]
    return log


def _request_headers(spec: WebhookSpec) -> dict[str, str]:
    host = f"[{spec.host}]" if ":" in spec.host else spec.host
    if spec.port != (443 if spec.scheme == "https" else 80):
        host = f"{host}:{spec.port}"
    headers = {"Host": host}
    for name, value in spec.headers:
        if name.lower() != "content-type":
            # http.client sends str as Latin-1; this sends the value's UTF-8 bytes, as lakeFS does.
            headers[name] = value.value.encode().decode("latin-1")
    if not any(name.lower() == "user-agent" for name in headers):
        headers["User-Agent"] = "silt-webhook/1"
    headers["Content-Type"] = "application/json"
    return headers


def _scrub(text: str, spec: WebhookSpec) -> str:
    """The answer's text without the spec's secret values: a server that echoes its request
    back must not put them in the output, which the repository's readers see."""
    for _name, value in (*spec.query_params, *spec.headers):
        if value.secret and len(value.value) >= MIN_SCRUBBED_SECRET:
            text = text.replace(value.value, MASK)
    return text


def _kept_body(answer: _Answer, spec: WebhookSpec) -> str:
    """What the run keeps of the answer's body: its first STORED_BODY_LIMIT bytes (scrubbed of
    secrets first, so the cut cannot leave part of one) and a marker saying it was cut."""
    text = _scrub(answer.body.decode(errors="replace"), spec)
    lines = [text]
    encoded = text.encode()
    if len(encoded) > STORED_BODY_LIMIT:
        lines = [
            encoded[:STORED_BODY_LIMIT].decode(errors="ignore"),
            f"[... truncated: only the first {STORED_BODY_LIMIT} bytes of the body are kept]",
        ]
    if answer.note:
        lines.append(answer.note)
    return "\n".join(lines)


def _deliver(
    spec: WebhookSpec, payload: bytes, policy: WebhookPolicy, started: float, ends: float, timed_out: str
) -> _Answer:
    refusal = policy.scheme_refusal(spec.scheme) or policy.host_refusal(spec.host)
    if refusal:
        raise _Failed(refusal)
    if ends <= started:
        raise _Failed("the deadline passed before the webhook was sent")
    addresses = _resolve(spec.host, spec.port, ends - time.monotonic(), timed_out)
    refusal = policy.address_refusal(spec.host, addresses)
    if refusal:
        raise _Failed(refusal)
    target = spec.target
    if spec.query_params:
        added = urlencode([(name, value.value) for name, value in spec.query_params])
        target += ("&" if "?" in target else "?") + added
    headers = _request_headers(spec)
    failure = ""
    for ip in addresses:
        try:
            return _exchange(spec, ip, policy, target, headers, payload, ends, timed_out)
        except _ConnectFailed as exc:
            failure = str(exc)
    raise _Failed(failure or f"no address of {spec.host} could be reached")


def send_webhook(spec: WebhookSpec, payload: bytes, policy: WebhookPolicy, deadline: float | None) -> HookResult:
    """POST payload (JSON) to the webhook; ok if it answered 2xx. Never raises for what the
    network or the server did: that is a failed HookResult. deadline is a time.monotonic()
    instant that cuts the hook's own timeout short."""
    started = time.monotonic()
    budget = spec.timeout
    timed_out = f"timed out after {_seconds(budget)}"
    if deadline is not None and deadline - started < budget:
        budget = deadline - started
        timed_out = f"timed out after {_seconds(max(budget, 0.0))} (the run's deadline)"
    ends = started + budget
    log = _request_log(spec, payload)
    error = ""
    try:
        answer = _deliver(spec, payload, policy, started, ends, timed_out)
    except _Failed as exc:
        answer, error = None, str(exc)
    except Exception as exc:  # a bug here must fail the hook, not the operation running it
        answer, error = None, f"the webhook could not be sent: {type(exc).__name__}: {exc}"
    log.append(f"Request duration: {_took(time.monotonic() - started)}")
    if answer is not None:
        log += ["", "Response:", _scrub(answer.head, spec), "", _kept_body(answer, spec)]
        if 300 <= answer.status < 400:
            error = f"webhook answered {answer.status} (redirects are not followed)"
        elif not 200 <= answer.status < 300:
            error = f"webhook answered {answer.status}"
    return HookResult(ok=not error, output="\n".join(log) + "\n", error=error)
