"""The check of the keys a merge, revert, cherry-pick, reset or import changes, for the users it
is made by and for (silt/changed_keys.py decides, engine/core/key_changes.py computes the
changes).

Both the caller and the user it names are checked: the REST API calls as its own service user,
which holds every key, for a user whose policies may name keys. A user holding every key of
the repository (no object Deny about it) costs two cached key-scope lookups and no per-key
work; only when some user is narrowed is a check built at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import grpc

from engine.actions.read_access import HookAuthority
from silt.changed_keys import ChangeCheck, ChangeScope, narrowed
from silt.iam_actions import DELETE_OBJECT, READ_OBJECT, WRITE_OBJECT
from silt.key_scope import KeyScope
from silt.rpc.interceptor import AuthInterceptor

# (user, object action, repository, branch, source address) -> the keys of repository the user
# may do the action on, writes and removals staged on branch (its WriteBranch statements count;
# silt/key_scope.py), for a request from that address (conditions; "" unknown).
KeyScopeFn = Callable[[str, str, str, str, str], KeyScope]
# A user an operation is checked for, and the address their request came from.
Requester = tuple[str, str]


def key_scopes(interceptors: Sequence[grpc.ServerInterceptor]) -> KeyScopeFn | None:
    """Auth's key scopes, cached, as the auth interceptor asks them; None served without auth
    (embedded use, tests), where nothing is checked per key, as nothing is per repository."""
    auth = next((i for i in interceptors if isinstance(i, AuthInterceptor)), None)
    return None if auth is None else auth.authority.key_scope


def hook_authority(interceptors: Sequence[grpc.ServerInterceptor]) -> HookAuthority | None:
    """Auth's cached answers, for what hooks' users may read (engine/actions/read_access.py);
    None served without auth, where hooks read every key of their repository."""
    auth = next((i for i in interceptors if isinstance(i, AuthInterceptor)), None)
    return None if auth is None else auth.authority


class KeyChecks:
    def __init__(self, scopes: KeyScopeFn | None) -> None:
        self._scopes = scopes

    def for_users(self, repository: str, branch: str, users: Iterable[Requester]) -> ChangeCheck | None:
        """The check for users (duplicates counted once), each from their address, of the
        changes to branch of repository; None when every one of them holds every key there."""
        scope_of = self._scopes
        if scope_of is None:
            return None
        addresses = dict(users)  # one address a user: the caller's own, or the one reported for them
        scopes = [
            ChangeScope(
                user,
                scope_of(user, WRITE_OBJECT, repository, branch, source_ip),
                scope_of(user, DELETE_OBJECT, repository, branch, source_ip),
            )
            for user, source_ip in addresses.items()
        ]

        def may_read(user: str, key: str) -> bool:
            return scope_of(user, READ_OBJECT, repository, "", addresses.get(user, "")).allows(key)

        return narrowed(repository, scopes, may_read)
