"""The groups and policies Silt itself defines (services/auth/setup.py: the preset roles, the
Services group of its own service users, and the policies those hold). Setup writes them again
at every start, so deleting or editing one would silently come undone, and deleting the
Services group or a verifier policy would cut Silt's services off from each other: auth refuses
to delete them, and the admin pages show them apart as "system"."""

from __future__ import annotations

SYSTEM_GROUPS = frozenset({"Admins", "Developers", "Analysts", "Services"})
SYSTEM_POLICIES = frozenset(
    {
        "FullAccess",
        "RepoReadWriteAll",
        "RepoReadAll",
        "ServiceAccess",
        "GatewayRepoLifecycle",
        "ApiActsForUsers",
        "ApiRepoSettings",
        "HistoryEventRecorder",
        "GarbageCollection",
        "GravelerCallVerifier",
        "CompactorCallVerifier",
        "S3SignatureVerifier",
        "ApiCredentialVerifier",
    }
)

# Auth refuses to delete one of them as FailedPrecondition with this text; the REST API answers
# it 409 Conflict.
SYSTEM_ENTITY = "is one of Silt's own (system)"


def undeletable(kind: str, entity_id: str) -> str:
    """Why a system group or policy stays."""
    return (
        f"{kind} {entity_id!r} {SYSTEM_ENTITY} {kind}s: setup writes it again at every start and Silt's "
        f"services or preset roles depend on it, so it cannot be deleted; detach it or remove members instead"
    )


def kept_binding(binding: str) -> str:
    """Why a binding setup makes (a preset group's policy, a service user's rights or group)
    stays: setup makes it again at every start, so undoing it would be undone in turn, and a
    group narrowed that way would silently hold its policy again after a restart."""
    return (
        f"{binding} {SYSTEM_ENTITY} bindings: setup makes it again at every start, so undoing it would "
        "silently come undone; to narrow a preset group, move its members to a group of your own or "
        "attach a policy with Deny statements to it"
    )
