"""Per-request context by dependency injection: the backend, the authenticated caller, where
the request came from, and `authorize`, the one way a route asks whether its caller may do
something (from that address: policy conditions, silt/policy_conditions.py)."""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, Request

from edge.api.backend import CALL_TIMEOUT, Backend, Caller
from edge.api.errors import forbidden, unauthorized
from silt.graveler.v1 import events_pb2 as ev
from silt.iam_actions import READ_OBJECT, READ_REPO
from silt.key_scope import KeyScope
from silt.rpc.signing import CLIENT_IP_HEADER
from silt.source_address import asgi_client_address

# lakeFS's name for the login session cookie (swagger: securitySchemes.cookie_auth).
SESSION_COOKIE = "internal_auth_session"
# An Authorization header longer than this is not one of ours (a token, or id:secret).
MAX_AUTHORIZATION_LENGTH = 2048
# Methods that change nothing, so a forged cross-site one gains nothing.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def backend_of(request: Request) -> Backend:
    backend: Backend | None = getattr(request.app.state, "backend", None)
    if backend is None:
        raise RuntimeError("the REST API's lifespan has not started")
    return backend


def basic_credentials(header: str) -> tuple[str, str]:
    """(access key id, secret) of an `Authorization: Basic ...` value."""
    try:
        decoded = base64.b64decode(header[len("Basic ") :].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise unauthorized("malformed Basic credentials") from None
    access_key_id, sep, secret = decoded.partition(":")
    if not sep:
        raise unauthorized("malformed Basic credentials")
    return access_key_id, secret


def refuse_cross_site(request: Request) -> None:
    """A browser sends the session cookie with any request to this host, so a state-changing
    request carrying the cookie must prove it comes from this host's own pages: its Origin (or
    else Referer) must name the request's host. Browsers send Origin on every POST, PUT, PATCH
    and DELETE, from fetch and forms alike, so a request with neither is refused rather than
    trusted: whatever strips both headers cannot be told apart from a forgery. Basic and Bearer
    are never sent by a browser on its own, so callers check only cookie-authenticated requests."""
    if request.method in SAFE_METHODS:
        return
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source:
        raise forbidden(
            "cross-site request refused: a request authenticated by the session cookie must send Origin "
            "(or Referer) naming this host; other clients use Basic or Bearer"
        )
    host = request.headers.get("host", "")
    if source == "null" or urlsplit(source).netloc.lower() != host.lower():
        raise forbidden("cross-site request refused: Origin or Referer does not match the host")


async def authenticate(request: Request) -> Caller:
    """The caller: HTTP Basic (access key and secret), or a login session token as Bearer or cookie."""
    backend = backend_of(request)
    header = request.headers.get("authorization", "")
    if len(header) > MAX_AUTHORIZATION_LENGTH:
        raise unauthorized()
    if header[:6].lower() == "basic ":
        return await backend.verify_secret(*basic_credentials(header))
    if header[:7].lower() == "bearer ":
        return await backend.verify_session(header[7:].strip())
    if header:
        raise unauthorized("unsupported authorization scheme: use Basic or Bearer")
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        refuse_cross_site(request)
        return await backend.verify_session(token)
    raise unauthorized("missing credentials: send an access key and secret (Basic) or a session token")


@dataclass
class Context:
    backend: Backend
    caller: Caller
    # The client's address (silt/source_address.py; "" unknown): every decision is about it.
    source_ip: str = ""
    # Every call a request makes shares one deadline (time.monotonic()).
    deadline: float = field(default_factory=lambda: time.monotonic() + CALL_TIMEOUT)

    @property
    def client_ip_metadata(self) -> tuple[tuple[str, str], ...]:
        """The header that tells a service called for the caller where the caller is (signed
        with the call, silt/rpc/signing.py); none when unknown."""
        return ((CLIENT_IP_HEADER, self.source_ip),) if self.source_ip else ()

    async def call(self, method: Any, request: Any) -> Any:
        """A graveler call within this request's deadline. It carries the caller's address, so
        that graveler judges a user named in it (a commit's, merge's or reset's user, a pull
        request's author) from where the request came, as the edge did."""
        return await self.backend.call(method, request, self.deadline, metadata=self.client_ip_metadata)

    async def authorize(self, action: str, resource: str) -> None:
        if not await self.backend.allowed(self.caller.user_id, action, resource, self.source_ip):
            raise forbidden(f"user {self.caller.user_id} may not {action} on {resource}")

    async def key_scope(self, action: str, repository: str, branch: str = "") -> KeyScope:
        """The keys of repository the caller may do an object action on (silt/key_scope.py),
        staged on branch for a write or delete (its WriteBranch statements count); 403 for none."""
        scope = await self.backend.key_scope(self.caller.user_id, action, repository, branch, self.source_ip)
        if scope.nothing:
            where = f"{repository}@{branch}" if branch else repository
            raise forbidden(f"user {self.caller.user_id} may not {action} on {where}")
        return scope

    async def read_repo_scope(self, repository: str) -> KeyScope:
        """ReadRepo on repository (403 otherwise), and which of its keys the caller may read:
        for routes that show keys and filter them. One call, as authorize(READ_REPO) is: a
        scope's every_key is that decision."""
        scope = await self.backend.key_scope(self.caller.user_id, READ_OBJECT, repository, source_ip=self.source_ip)
        if not scope.every_key:
            raise forbidden(f"user {self.caller.user_id} may not {READ_REPO} on {repository}")
        return scope

    async def authorize_every_key(self, repository: str) -> None:
        """ReadRepo on repository with no key of it refused: for routes that show keys or
        their history unfiltered (diff summaries, history events, logs filtered by path)."""
        scope = await self.read_repo_scope(repository)
        if not scope.whole:
            raise forbidden(
                f"user {self.caller.user_id} may not {READ_OBJECT} on every key of {repository}, "
                "which this request would show"
            )

    async def authorize_key(self, action: str, repository: str, key: str, branch: str = "") -> None:
        """403 unless the caller may do the object action on key (a path, without its ref),
        staged on branch for a write or delete."""
        scope = await self.backend.key_scope(self.caller.user_id, action, repository, branch, self.source_ip)
        if not scope.allows(key):
            where = f"{repository}@{branch}" if branch and scope.nothing else f"{repository}/{key}"
            raise forbidden(f"user {self.caller.user_id} may not {action} on {where}")

    def record(
        self, event_type: ev.HistoryEventType.ValueType, repository: str, ref: str, path: str, size: int = 0
    ) -> None:
        """A history event for what this request did (queued, never waited for)."""
        self.backend.history.emit(event_type, repository, ref, path, self.caller.user_id, size)


async def context(request: Request, caller: Annotated[Caller, Depends(authenticate)]) -> Context:
    request.state.user_id = caller.user_id  # for the access log
    return Context(backend_of(request), caller, asgi_client_address(request.scope))


Ctx = Annotated[Context, Depends(context)]
