"""Answers to the interceptor's two questions (whose signing key is this, may they do this) from KV.

The auth service's own interceptor uses this through a CachedAuthority; its Authorize and
GetCallSigningKey calls use it uncached, so that another service's cache is the only one
between a change and its effect (one TTL, not two).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from services.auth.acting import ActingInterceptor
from services.auth.model import IamModel
from services.auth.permissions import RULES
from services.auth.policies import compile_statements, is_allowed, key_scope
from silt.key_scope import KeyScope
from silt.rpc.authority import CachedAuthority, CallKey, Clock, count_decisions
from silt.rpc.interceptor import DEFAULT_MAX_SKEW_SECONDS
from silt.rpc.signing import AUTH_AUDIENCE, derive_call_key


class LocalAuthority:
    def __init__(self, model: IamModel) -> None:
        self.model = model

    def call_key(self, access_key_id: str, day: str, audience: str) -> CallKey:
        owner = self.model.key_owner(access_key_id)
        return CallKey(owner.user_id, derive_call_key(owner.secret, day, audience))

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        """source_ip: where the request being decided came from ("" unknown), for conditions."""
        statements = compile_statements(self.model.effective_policies(user_id), source_ip)
        decisions = [is_allowed(statements, action, resource) for resource in resources]
        count_decisions(decisions)
        return decisions

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        statements = compile_statements(self.model.effective_policies(user_id), source_ip)
        return key_scope(statements, action, repository, branch)


def local_interceptor(
    model: IamModel,
    cache_ttl_seconds: float,
    max_skew_seconds: float = DEFAULT_MAX_SKEW_SECONDS,
    cache_clock: Clock = time.monotonic,
) -> ActingInterceptor:
    """Auth's interceptor: calls may be made for an end user (services/auth/acting.py)."""
    authority = CachedAuthority(LocalAuthority(model), ttl=cache_ttl_seconds, clock=cache_clock)
    return ActingInterceptor(authority, RULES, max_skew_seconds=max_skew_seconds, audience=AUTH_AUDIENCE)
