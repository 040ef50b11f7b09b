"""Webhook hooks: their properties parsed as lakeFS does, the address policy, and the request
sent to a real HTTP(S) server on the loopback interface, bounded in time and size."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import urllib3.util.connection
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from engine.actions.targets import IPAddress
from engine.actions.webhook import (
    DEFAULT_TIMEOUT,
    MASK,
    RESPONSE_BODY_LIMIT,
    STORED_BODY_LIMIT,
    EnvPolicy,
    HookResult,
    InvalidHook,
    SecureValue,
    WebhookPolicy,
    WebhookSpec,
    close_idle_connections,
    parse_duration,
    parse_webhook,
    send_webhook,
)

PAYLOAD = json.dumps({"event_type": "pre-commit", "repository_id": "repo1", "branch_id": "main"}).encode()
SECRET = "s3cr3t-t0ken-value"
ENV = EnvPolicy(
    environ={"SILTACTION_TOKEN": SECRET, "SILTACTION_OTHER": "other", "HOME": "/root"},
    repositories={name: ("repo1",) for name in ("SILTACTION_TOKEN", "SILTACTION_OTHER", "SILTACTION_MISSING")},
    repository="repo1",
)


# --- a real server --------------------------------------------------------------------


@dataclass
class Received:
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes
    client_port: int


@dataclass
class Server:
    base: str = ""
    port: int = 0
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.base}://{host}:{self.port}{path}"

    def paths(self) -> list[str]:
        with self.lock:
            return [r.path for r in self.requests]


def _serve(state: Server, context: ssl.SSLContext | None) -> Iterator[Server]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so that connection reuse can be seen
        disable_nagle_algorithm = True  # the head and the body are two writes

        def _answer(self, status: int, body: bytes, **headers: str) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # The client may have gone (it stops reading at its bound, or at its timeout).
            with contextlib.suppress(OSError):
                self.wfile.write(body)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            received = Received(
                parts.path, parse_qsl(parts.query), dict(self.headers.items()), body, self.client_address[1]
            )
            with state.lock:
                state.requests.append(received)
            if parts.path == "/fail":
                self._answer(500, b"boom: schema mismatch")
            elif parts.path == "/redirect":
                self._answer(302, b"", Location=state.url("/elsewhere"))
            elif parts.path == "/hang":
                state.release.wait(5)
                self._answer(200, b"late")
            elif parts.path == "/big":
                self._answer(200, b"x" * (RESPONSE_BODY_LIMIT * 3))
            elif parts.path == "/echo":
                self._answer(200, f"you sent {received.headers.get('Authorization')} {parts.query}".encode())
            elif parts.path == "/trickle":
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                try:
                    while not state.release.wait(0.02):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                except OSError:
                    pass
                self.close_connection = True
            else:
                self._answer(200, b'{"ok": true}', **{"Content-Type": "application/json", "X-Answer": "yes"})

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def http_server() -> Iterator[Server]:
    yield from _serve(Server(base="http"), None)


@pytest.fixture
def server(http_server: Server) -> Iterator[Server]:
    with http_server.lock:
        http_server.requests.clear()
    yield http_server


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    yield
    close_idle_connections()


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Fails any connection attempt (and records it): refusals must come before connecting."""
    attempts: list[Any] = []

    def refuse(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        attempts.append(address)
        raise AssertionError(f"connected to {address}")

    monkeypatch.setattr(urllib3.util.connection, "create_connection", refuse)
    return attempts


def _spec(url: str, **properties: Any) -> WebhookSpec:
    return parse_webhook({"url": url, **properties}, ENV)


# The test's servers are on 127.0.0.1: their policy opts in to loopback (off by default).
LOCAL = WebhookPolicy(allow_private=True)


def _send(
    url: str, policy: WebhookPolicy | None = None, deadline: float | None = None, **properties: Any
) -> HookResult:
    return send_webhook(_spec(url, **properties), PAYLOAD, policy or LOCAL, deadline)


# --- parsing --------------------------------------------------------------------------


def test_every_property_is_read() -> None:
    spec = parse_webhook(
        {
            "url": "http://hooks.example.com:8080/gate?from=url",
            "timeout": "1m30s",
            "query_params": {"a": "1", "b": ["2", "3"], "token": "{{ ENV.SILTACTION_TOKEN }}"},
            "headers": {"X-Team": "data", "Authorization": "Bearer {{ENV.SILTACTION_TOKEN}}"},
            "description": "ignored, as lakeFS ignores properties it does not know",
        },
        ENV,
    )
    assert (spec.scheme, spec.host, spec.port, spec.target) == ("http", "hooks.example.com", 8080, "/gate?from=url")
    assert spec.timeout == 90.0
    assert [(k, v.value, v.secret) for k, v in spec.query_params] == [
        ("a", "1", False),
        ("b", "2", False),
        ("b", "3", False),
        ("token", SECRET, True),
    ]
    assert [(k, v.value, v.secret) for k, v in spec.headers] == [
        ("X-Team", "data", False),
        ("Authorization", f"Bearer {SECRET}", True),
    ]
    assert SECRET not in repr(spec)


def test_a_url_is_normalized() -> None:
    spec = _spec("HTTPS://Hooks.Example.COM./a%20b/ü?q=ä#fragment")
    assert (spec.scheme, spec.host, spec.port, spec.target) == (
        "https",
        "hooks.example.com",
        443,
        "/a%20b/%C3%BC?q=%C3%A4",
    )
    assert _spec("http://bücher.example/").host == "xn--bcher-kva.example"
    v6 = _spec("http://[::1]:8080")
    assert (v6.host, v6.port, v6.target) == ("::1", 8080, "/")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1m", 60.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        ("100us", 1e-4),
        ("1µs", 1e-6),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("1h0m0.5s", 3600.5),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


# "\u0661" is an Arabic-Indic digit: Go's durations take ASCII digits only.
@pytest.mark.parametrize(
    "text", ["1", "-1s", "+1s", "1d", "s", "1m 30s", " 1s", "0s", "0", "25h", "1e3s", "\u0661s", "9" * 40 + "s"]
)
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
    with pytest.raises(InvalidHook, match=r"^timeout: "):
        _spec("http://h/", timeout=text)


def test_a_missing_or_empty_timeout_is_a_minute_and_a_number_is_refused() -> None:
    assert _spec("http://h/").timeout == DEFAULT_TIMEOUT == 60.0
    assert _spec("http://h/", timeout="").timeout == 60.0
    with pytest.raises(InvalidHook, match="timeout: must be a duration string"):
        _spec("http://h/", timeout=30)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "url: missing"),
        ({"url": 5}, "url: must be a string"),
        ({"url": "ftp://h/x"}, "url: the scheme must be http or https"),
        ({"url": "h/x"}, "url: the scheme must be http or https"),
        ({"url": "http:///x"}, "url: .* names no host"),
        ({"url": "http://user:pw@h/"}, "url: credentials"),
        ({"url": "http://h:99999/"}, "url: .* is not a URL"),
        ({"url": "http://h:0/"}, "url: port 0"),
        ({"url": "http://h/a b"}, "url: contains a space"),
        ({"url": "http://[fe80::1%25eth0]/"}, "url: an IPv6 zone"),
        ({"url": "http://a$b/"}, "url: .* is not a host name"),
        ({"url": "http://h/" + "x" * 9000}, "url: longer than"),
        ({"url": "http://h/", "query_params": "a=1"}, "query_params: must be a mapping"),
        ({"url": "http://h/", "query_params": None}, "query_params: must be a mapping"),
        ({"url": "http://h/", "query_params": {"a": 1}}, "query_params.a: values must be strings"),
        ({"url": "http://h/", "query_params": {"a": ["b", 2]}}, "query_params.a: values must be strings"),
        ({"url": "http://h/", "query_params": {"": "v"}}, "query_params: '' is not a parameter name"),
        ({"url": "http://h/", "query_params": {f"p{i}": "v" for i in range(65)}}, "query_params: more than 64"),
        ({"url": "http://h/", "query_params": {"p": ["v"] * 65}}, "query_params: more than 64 values"),
        ({"url": "http://h/", "headers": ["X-A"]}, "headers: must be a mapping"),
        ({"url": "http://h/", "headers": {"X Y": "v"}}, "headers: 'X Y' is not a header name"),
        ({"url": "http://h/", "headers": {"Content-Length": "3"}}, "headers.Content-Length: set by the webhook"),
        ({"url": "http://h/", "headers": {"host": "elsewhere"}}, "headers.host: set by the webhook"),
        ({"url": "http://h/", "headers": {"X-A": 1}}, "headers.X-A: must be a string"),
        ({"url": "http://h/", "headers": {"X-A": "a\r\nX-B: b"}}, "headers.X-A: contains a line break"),
        ({"url": "http://h/", "headers": {"X-A": "v" * 9000}}, "headers.X-A: longer than"),
    ],
)
def test_bad_properties_are_refused_naming_the_property(properties: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidHook, match=message):
        parse_webhook(properties, ENV)


def test_properties_must_be_a_mapping() -> None:
    with pytest.raises(InvalidHook, match="properties"):
        parse_webhook(None, ENV)  # type: ignore[arg-type]


def _header(value: str, env: EnvPolicy = ENV) -> SecureValue:
    return parse_webhook({"url": "http://h/", "headers": {"X-V": value}}, env).headers[0][1]


def test_secure_strings_read_the_environment_and_are_secret() -> None:
    assert _header("{{ ENV.SILTACTION_TOKEN }}") == SecureValue(SECRET, True)
    assert _header("{{ENV.SILTACTION_TOKEN}}") == SecureValue(SECRET, True)
    assert _header("a {{ ENV.SILTACTION_TOKEN }} b {{ENV.SILTACTION_OTHER }}") == SecureValue(
        f"a {SECRET} b other", True
    )
    assert _header("plain") == SecureValue("plain", False)
    # Not lakeFS's syntax: kept as written, not secret.
    for text in ["{{ NOTENV.X }}", "{{  ENV.SILTACTION_TOKEN }}", "{{ ENV.SILTACTION_TOKEN", "{ ENV.X }"]:
        assert _header(text) == SecureValue(text, False), text
    across_lines = parse_webhook(
        {"url": "http://h/", "query_params": {"q": "{{ ENV.X\n}} {{ENV.SILTACTION_OTHER}}"}}, ENV
    )
    assert across_lines.query_params[0][1] == SecureValue("{{ ENV.X\n}} other", True)
    assert _header("{{{ENV.SILTACTION_OTHER}}}") == SecureValue("{other}", True)


def test_secure_strings_read_empty_when_disabled_or_outside_the_prefix() -> None:
    # lakeFS's rule: such a reference reads as "" (and is still secret), it is not an error.
    disabled = EnvPolicy(enabled=False, environ={"SILTACTION_TOKEN": SECRET})
    assert _header("Bearer {{ ENV.SILTACTION_TOKEN }}", disabled) == SecureValue("Bearer ", True)
    assert _header("{{ ENV.HOME }}") == SecureValue("", True)
    no_prefix = EnvPolicy(prefix="", environ={"HOME": "/root"}, repositories={"HOME": ("*",)})
    assert _header("{{ ENV.HOME }}", no_prefix) == SecureValue("/root", True)


def test_a_missing_environment_variable_is_an_error_naming_the_property() -> None:
    with pytest.raises(InvalidHook, match=r"headers.X-V: environment variable SILTACTION_MISSING is not set"):
        _header("{{ ENV.SILTACTION_MISSING }}")
    with pytest.raises(InvalidHook, match=r"query_params.q: environment variable SILTACTION_MISSING"):
        parse_webhook({"url": "http://h/", "query_params": {"q": ["{{ENV.SILTACTION_MISSING}}"]}}, ENV)
    with pytest.raises(InvalidHook, match="names no environment variable"):
        _header("{{ ENV. }}")
    assert _header("{{ ENV.SILTACTION_MISSING }}", EnvPolicy(enabled=False)) == SecureValue("", True)


def test_the_process_environment_is_read_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SILTACTION_FROM_PROCESS", "yes")
    granted = EnvPolicy(repositories={"SILTACTION_FROM_PROCESS": ("*",)})
    assert _header("{{ ENV.SILTACTION_FROM_PROCESS }}", granted) == SecureValue("yes", True)


def test_a_variable_is_read_only_by_the_repositories_it_is_granted_to() -> None:
    environ = {"SILTACTION_TOKEN": SECRET, "SILTACTION_OTHER": "other"}
    scoped = EnvPolicy(environ=environ, repositories={"SILTACTION_TOKEN": ("ci-*", "data")})
    for repository in ("ci-main", "data"):
        assert _header("{{ ENV.SILTACTION_TOKEN }}", scoped.for_repository(repository)) == SecureValue(SECRET, True)
    for repository in ("other", "data2", ""):
        with pytest.raises(InvalidHook, match=r"headers.X-V: environment variable SILTACTION_TOKEN is not granted"):
            _header("{{ ENV.SILTACTION_TOKEN }}", scoped.for_repository(repository))
    # Listed for no repository, or nothing listed at all (the default): read by none.
    with pytest.raises(InvalidHook, match="SILTACTION_OTHER is not granted to 'ci-main'"):
        _header("{{ ENV.SILTACTION_OTHER }}", scoped.for_repository("ci-main"))
    with pytest.raises(InvalidHook, match="not granted"):
        _header("{{ ENV.SILTACTION_TOKEN }}", EnvPolicy(environ=environ).for_repository("ci-main"))


def test_secure_values_print_masked() -> None:
    value = SecureValue(SECRET, True)
    assert str(value) == repr(value).removeprefix("SecureValue('").removesuffix("')") == MASK
    assert str(SecureValue("plain")) == "plain"


# --- the address policy ---------------------------------------------------------------


def _ips(*texts: str) -> list[IPAddress]:
    return [ipaddress.ip_address(t) for t in texts]


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("169.254.10.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("::ffff:169.254.169.254", "cloud metadata: 169.254.169.254"),
        ("::169.254.169.254", "cloud metadata: 169.254.169.254"),
        ("64:ff9b::169.254.169.254", "cloud metadata: 169.254.169.254"),
        ("2002:a9fe:a9fe::1", "cloud metadata: 169.254.169.254"),
        ("::ffff:0.0.0.0", "unspecified: 0.0.0.0"),
    ],
)
def test_addresses_always_refused(address: str, reason: str) -> None:
    wide_open = WebhookPolicy(allowed_cidrs=("0.0.0.0/0", "::/0"))
    for policy in (WebhookPolicy(), wide_open):
        refusal = policy.address_refusal("h", _ips(address))
        assert refusal == f"address {ipaddress.ip_address(address)} is not an allowed webhook target ({reason})"


def test_private_addresses_are_refused_unless_opted_in() -> None:
    private = [
        "127.0.0.1",
        "127.1.2.3",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "::1",
        "fd12::1",
        "::ffff:10.0.0.1",
        "::ffff:127.0.0.1",
        "::127.0.0.1",  # IPv4-compatible
        "64:ff9b::127.0.0.1",  # NAT64
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    ]
    assert WebhookPolicy().allow_private is False
    for address in private:
        refusal = WebhookPolicy().address_refusal("h", _ips(address))
        assert refusal is not None and "allow_private is off" in refusal, address
    assert all(LOCAL.address_refusal("h", _ips(a)) is None for a in private)
    assert WebhookPolicy().address_refusal("h", _ips("93.184.216.34", "2606:4700::1")) is None


def test_every_resolved_address_is_checked() -> None:
    refusal = WebhookPolicy().address_refusal("h", _ips("93.184.216.34", "169.254.169.254"))
    assert refusal is not None and "169.254.169.254" in refusal
    assert WebhookPolicy().address_refusal("h", []) == "host h resolved to no address"


def test_allow_and_deny_lists() -> None:
    denied = WebhookPolicy(allow_private=True, denied_cidrs=("10.0.0.0/8",))
    assert denied.address_refusal("h", _ips("10.9.9.9")) == (
        "address 10.9.9.9 is not an allowed webhook target (in denied_cidrs 10.0.0.0/8)"
    )
    assert denied.address_refusal("h", _ips("::ffff:10.9.9.9")) is not None
    assert denied.address_refusal("h", _ips("192.168.0.1")) is None

    cidrs = WebhookPolicy(allow_private=True, allowed_cidrs=("192.168.0.0/16",))
    assert cidrs.host_refusal("anything.example") is None  # decided by its addresses
    assert cidrs.address_refusal("h", _ips("192.168.3.4")) is None
    assert cidrs.address_refusal("h", _ips("::ffff:192.168.3.4")) is None
    refusal = cidrs.address_refusal("h", _ips("192.168.3.4", "10.0.0.1"))
    assert refusal is not None and "10.0.0.1" in refusal and "not in allowed_hosts or allowed_cidrs" in refusal

    hosts = WebhookPolicy(allow_private=True, allowed_hosts=("hooks.example.com", "*.internal.example"))
    assert hosts.host_refusal("hooks.example.com") is None
    assert hosts.host_refusal("a.b.internal.example") is None
    assert hosts.host_refusal("internal.example") is not None
    assert (
        hosts.host_refusal("evil.example.com")
        == "host evil.example.com is not an allowed webhook target (not in allowed_hosts)"
    )
    assert hosts.address_refusal("hooks.example.com", _ips("10.0.0.1")) is None
    # A listed host still never reaches what is always refused, nor a private address when those are off.
    assert hosts.address_refusal("hooks.example.com", _ips("169.254.169.254")) is not None
    strict = WebhookPolicy(allow_private=False, allowed_hosts=("hooks.example.com",))
    assert strict.address_refusal("hooks.example.com", _ips("10.0.0.1")) is not None


def test_metadata_host_names_are_refused_by_name() -> None:
    for name in ("metadata.google.internal", "metadata", "metadata.goog"):
        assert WebhookPolicy().host_refusal(name) == f"host {name} is not an allowed webhook target (cloud metadata)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"allowed_cidrs": ("10.0.0.0/33",)}, "allowed_cidrs"),
        ({"denied_cidrs": ("nonsense",)}, "denied_cidrs"),
        ({"allowed_schemes": ("ftp",)}, "allowed_schemes"),
        ({"allowed_hosts": ("a.*.example",)}, "allowed_hosts"),
    ],
)
def test_a_bad_policy_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WebhookPolicy(**options)


# --- sending --------------------------------------------------------------------------


def test_a_2xx_answer_passes_and_the_request_is_as_configured(server: Server) -> None:
    result = _send(
        server.url("/ok?from=url&x=%2F"),
        query_params={"a": "1", "b": ["2", "three 3"]},
        headers={"X-Team": "data", "content-type": "text/plain"},
    )
    assert result.ok and result.error == "", result
    [got] = server.requests
    assert got.path == "/ok"
    assert got.query == [("from", "url"), ("x", "/"), ("a", "1"), ("b", "2"), ("b", "three 3")]
    assert json.loads(got.body) == json.loads(PAYLOAD)
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-Team"] == "data"
    assert got.headers["Host"] == f"127.0.0.1:{server.port}"
    assert got.headers["User-Agent"] == "silt-webhook/1"
    output = result.output
    assert output.startswith(
        f"Request:\nPOST {server.url('/ok?from=url&x=%2F')}\nQuery Params:\na: 1\nb: 2\nb: three 3\n"
    )
    assert "Headers:\nX-Team: data\nContent-Type: application/json\n" in output
    assert f"Request Body:\n{PAYLOAD.decode()}\n" in output
    assert "Request duration: " in output
    # The answer's status line and body only: its headers are not kept.
    assert "Response:\nHTTP/1.1 200 OK\n\n" in output and "X-Answer" not in output
    assert output.endswith('{"ok": true}\n')


def test_a_5xx_answer_fails_with_its_status_and_body(server: Server) -> None:
    result = _send(server.url("/fail"))
    assert not result.ok and result.error == "webhook answered 500"
    assert "HTTP/1.1 500 Internal Server Error" in result.output
    assert result.output.rstrip().endswith("boom: schema mismatch")


def test_a_redirect_is_not_followed(server: Server) -> None:
    result = _send(server.url("/redirect"))
    assert not result.ok and result.error == "webhook answered 302 (redirects are not followed)"
    assert "Location" not in result.output
    assert server.paths() == ["/redirect"]


def test_a_hanging_server_fails_the_hook_within_its_timeout(server: Server) -> None:
    started = time.monotonic()
    result = _send(server.url("/hang"), timeout="500ms")
    elapsed = time.monotonic() - started
    assert not result.ok and result.error == "timed out after 0.5s", result
    assert 0.45 < elapsed < 5.0, elapsed  # ends at its bound (5 s: a loaded machine)


def test_the_deadline_wins_over_a_longer_timeout(server: Server) -> None:
    started = time.monotonic()
    result = _send(server.url("/hang"), deadline=started + 0.3, timeout="1m")
    elapsed = time.monotonic() - started
    # What was left of the run's deadline when the request went out: 0.3 s less the moments
    # before it ("0.299s" on a busy machine), never the minute.
    said = re.fullmatch(r"timed out after (0\.\d+)s \(the run's deadline\)", result.error)
    assert not result.ok and said is not None and 0.2 < float(said.group(1)) <= 0.3, result
    assert 0.25 < elapsed < 5.0, elapsed  # the deadline, not the minute


def test_a_deadline_already_past_sends_nothing(server: Server) -> None:
    result = _send(server.url("/ok"), deadline=time.monotonic() - 1)
    assert not result.ok and result.error == "the deadline passed before the webhook was sent"
    assert server.paths() == []


def test_a_trickling_body_is_cut_at_the_timeout(server: Server) -> None:
    started = time.monotonic()
    result = _send(server.url("/trickle"), timeout="500ms")
    elapsed = time.monotonic() - started
    # The server answered 200 before it stalled: the hook passed, as in lakeFS; the body is cut.
    assert result.ok, result
    assert "[reading the body stopped: timed out after 0.5s]" in result.output
    assert 0.45 < elapsed < 5.0, elapsed  # ends at its bound (5 s: a loaded machine)


def test_a_large_body_is_read_up_to_the_bound_and_kept_to_a_few_kib(server: Server) -> None:
    result = _send(server.url("/big"))
    assert result.ok
    assert "x" * STORED_BODY_LIMIT in result.output and "x" * (STORED_BODY_LIMIT + 1) not in result.output
    assert f"[... truncated: only the first {STORED_BODY_LIMIT} bytes of the body are kept]" in result.output
    assert f"the body is longer than {RESPONSE_BODY_LIMIT} bytes; the rest was not read" in result.output
    assert len(result.output) < STORED_BODY_LIMIT + 4096


def test_a_connection_is_reused_for_the_same_checked_address(server: Server) -> None:
    assert _send(server.url("/ok")).ok
    assert _send(server.url("/ok")).ok
    assert _send(server.url("/big")).ok  # not read to its end: that connection is closed
    assert _send(server.url("/ok")).ok
    ports = [r.client_port for r in server.requests]
    assert ports[0] == ports[1] == ports[2] != ports[3]


def test_a_refused_connection_fails_the_hook() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = _send(f"http://127.0.0.1:{port}/", timeout="2s")
    assert not result.ok and result.error == f"connection refused by 127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://169.254.169.254/latest/meta-data/", "address 169.254.169.254"),
        ("http://[fe80::1]/", "address fe80::1"),
        ("http://[::ffff:169.254.169.254]/", "169.254.169.254"),
        ("http://[fd00:ec2::254]/", "address fd00:ec2::254"),
        ("http://100.100.100.200/", "address 100.100.100.200"),
        ("http://metadata.google.internal/computeMetadata/v1/", "host metadata.google.internal"),
        ("http://metadata/", "host metadata"),
        ("http://0.0.0.0:8000/", "address 0.0.0.0"),
        ("http://[::]:8000/", "address ::"),
        ("http://2852039166/", "address 169.254.169.254"),  # the decimal spelling, resolved
        ("http://0xa9.0xfe.0xa9.0xfe/", "address 169.254.169.254"),
        ("http://0251.0376.0251.0376/", "address 169.254.169.254"),  # octal
        ("http://[::ffff:a9fe:a9fe]/", "169.254.169.254"),
        ("http://224.0.0.1/", "address 224.0.0.1"),
        ("http://255.255.255.255/", "address 255.255.255.255"),
    ],
)
def test_refused_targets_are_refused_before_connecting(url: str, named: str, no_connections: list[Any]) -> None:
    result = _send(url, timeout="2s")
    assert not result.ok and named in result.error and "is not an allowed webhook target" in result.error, result
    assert no_connections == []
    assert "Request:\nPOST " + url in result.output


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/",
        "http://[::ffff:127.0.0.1]:9/",
        "http://[::ffff:7f00:1]:9/",
        "http://2130706433:9/",  # decimal, read by the resolver as 127.0.0.1
        "http://0177.0.0.1:9/",  # octal
        "http://0x7f.1:9/",
        "http://127.1:9/",
    ],
)
def test_loopback_in_any_spelling_is_refused_by_default(url: str, no_connections: list[Any]) -> None:
    result = _send(url, WebhookPolicy())
    assert not result.ok and "is not an allowed webhook target (loopback" in result.error, result
    assert "allow_private is off" in result.error
    assert no_connections == []


def test_loopback_is_refused_when_private_addresses_are_off(no_connections: list[Any]) -> None:
    policy = WebhookPolicy(allow_private=False)
    result = _send("http://127.0.0.1:9/", policy)
    assert (
        result.error
        == "address 127.0.0.1 is not an allowed webhook target (loopback address, and allow_private is off)"
    )
    # A host name is refused for what it resolves to.
    result = _send("http://localhost:9/", policy)
    assert not result.ok and "is not an allowed webhook target (loopback" in result.error
    result = _send("http://localhost:9/", WebhookPolicy(denied_cidrs=("127.0.0.0/8",)))
    assert result.error == "address 127.0.0.1 is not an allowed webhook target (in denied_cidrs 127.0.0.0/8)"
    assert no_connections == []


def test_allow_lists_restrict_targets(server: Server) -> None:
    by_host = WebhookPolicy(allow_private=True, allowed_hosts=("localhost",))
    assert _send(server.url("/ok", host="localhost"), by_host).ok
    refused = _send(server.url("/ok"), by_host)
    assert refused.error == "host 127.0.0.1 is not an allowed webhook target (not in allowed_hosts)"

    assert _send(server.url("/ok"), WebhookPolicy(allow_private=True, allowed_cidrs=("127.0.0.0/8",))).ok
    refused = _send(server.url("/ok"), WebhookPolicy(allow_private=True, allowed_cidrs=("10.0.0.0/8",)))
    assert refused.error == "address 127.0.0.1 is not an allowed webhook target (not in allowed_hosts or allowed_cidrs)"

    refused = _send(server.url("/ok"), WebhookPolicy(allow_private=True, allowed_schemes=("https",)))
    assert refused.error == "scheme http is not an allowed webhook scheme (allowed: https)"
    assert server.paths() == ["/ok", "/ok"]


def test_secret_values_never_reach_the_output(server: Server) -> None:
    result = _send(
        server.url("/echo"),
        headers={"Authorization": "Bearer {{ ENV.SILTACTION_TOKEN }}"},
        query_params={"token": "{{ ENV.SILTACTION_TOKEN }}"},
    )
    assert result.ok, result
    [got] = server.requests
    assert got.headers["Authorization"] == f"Bearer {SECRET}" and ("token", SECRET) in got.query
    assert SECRET not in result.output
    assert f"token: {MASK}" in result.output and f"Authorization: {MASK}" in result.output
    assert f"you sent Bearer {MASK} token={MASK}" in result.output  # echoed back, scrubbed


# --- https ----------------------------------------------------------------------------


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(CA file, server certificate, server key): a CA, and a certificate it signs for the DNS
    name localhost only (no IP address)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "silt test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, cert_file, key_file


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    ca_file, cert_file, key_file = _certificates(tmp_path_factory.mktemp("tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    for state in _serve(Server(base="https"), context):
        yield state, ca_file


def test_https_connects_to_the_checked_address_and_verifies_the_url_host(https_server: tuple[Server, Path]) -> None:
    server, ca_file = https_server
    trusted = WebhookPolicy(allow_private=True, ca_certs=str(ca_file))
    # The certificate names localhost only: the connection goes to an address, the check to the name.
    result = _send(server.url("/ok", host="localhost"), trusted)
    assert result.ok, result
    assert server.requests[-1].headers["Host"] == f"localhost:{server.port}"

    by_address = _send(server.url("/ok"), trusted)
    assert not by_address.ok and by_address.error.startswith("the TLS certificate of 127.0.0.1 was not accepted")
    untrusted = _send(server.url("/ok", host="localhost"), LOCAL)
    assert not untrusted.ok and untrusted.error.startswith("the TLS certificate of localhost was not accepted")
    assert "certificate verify failed" in untrusted.error or "unable to get local issuer" in untrusted.error
