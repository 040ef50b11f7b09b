"""Typed errors shared by every Silt layer.

Drivers translate their own exceptions into these, so callers never depend on
sqlite3, cassandra-driver or botocore exception types.
"""

from __future__ import annotations

from typing import Literal


class SiltError(Exception):
    """Base of every error Silt raises on purpose."""


NotFoundKind = Literal[
    "repository", "branch", "tag", "commit", "ref", "object", "upload", "user", "group", "policy", "credential"
]


class NotFound(SiltError):
    """The key, object or entity does not exist; `what` names the kind of thing when it is known."""

    def __init__(self, message: str = "", *, what: NotFoundKind | None = None) -> None:
        super().__init__(message)
        self.what: NotFoundKind | None = what


class SourceChanged(NotFound):
    """An imported object's source (outside the repository's namespace) changed or vanished since
    the import: its bytes are no longer the entry's, and are never served in its place. A NotFound,
    so that every front end answers it as missing data (the REST API with lakeFS's 410 Gone)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, what="object")


class AlreadyExists(SiltError):
    """The entity to create exists already."""


class PredicateFailed(SiltError):
    """A conditional write found a different current value than the caller expected."""


class InvalidArgument(SiltError):
    """The caller passed a value the operation cannot accept (bad key, bad range, ...)."""


class Unavailable(SiltError):
    """The backing store (KV database or object store) cannot answer right now.

    The operation may or may not have taken effect; callers retry idempotent operations
    and re-read before retrying conditional ones.
    """


class NotApplied(Unavailable):
    """The store refused the operation before attempting it (not enough live replicas to try, no
    node or connection to send it to, a closed store, the database locked): it certainly took no
    effect. Any other Unavailable (a write that timed out, a lost connection) may have."""


class OutcomeUnknown(Unavailable):
    """A compare-and-set (``set_if``, conditional ``apply``) was interrupted by a fault and the
    store cannot tell whether it applied: another writer has changed the key since, or the key
    could not be read back.

    An Unavailable, so every caller that does not know better treats it as one (and a gRPC
    call fails UNAVAILABLE). A caller that can tell from the key's current value whether its
    write is in there resolves it: graveler does for branch records
    (engine/core/updater.py) and for the guards of conditional staging writes
    (engine/core/staging.py), docs/design/kv.md. Across gRPC it is an UNAVAILABLE typed
    outcome-unknown (silt/rpc/errors.py).
    """


class ResendRefused(OutcomeUnknown):
    """An OutcomeUnknown of a compare-and-set sent again after a fault: the resend ran and did not
    apply (a condition failed), and the key it changes reads as it did before the write.

    What failed the resend's condition is a change committed by a Paxos round of its own. Either
    that round's ballot is higher than an earlier send's, so every later round sees a newer commit
    and never proposes that send again; or it was accepted before the earlier send prepared, and
    that send's own read saw it, failed its condition and proposed nothing. So the write did not
    apply, as long as the rows it is conditioned on are written by compare-and-set only and never
    come back to a value they had (a deleted key absent again is one): a caller that can rule that
    out knows (engine/core/staging.py). Across gRPC it is a plain OutcomeUnknown."""


class ConfigError(SiltError):
    """The configuration file or an environment override is invalid."""


class FailedPrecondition(SiltError):
    """The system is not in a state the operation requires (e.g. nothing to commit)."""


class Aborted(SiltError):
    """A lock-free operation lost its race too many times; retrying later may succeed."""


class DeadlineExceeded(Unavailable):
    """The caller's deadline passed, or the caller went away, before the operation finished.

    Like Unavailable, the operation may or may not have taken effect.
    """


class Unauthenticated(SiltError):
    """Credentials are missing, unknown, or do not sign the call."""


class PermissionDenied(SiltError):
    """The caller is authenticated but no policy allows the action on the resource."""


class KeptBySetup(FailedPrecondition):
    """Auth refuses to delete or undo what its setup writes again at every start (a system group
    or policy, a preset binding, silt/iam_system.py): the change would be undone, so it is a
    conflict with Silt's own state, not a malformed request."""


class ConditionFailed(FailedPrecondition):
    """One condition of a conditional write of several keys at once did not hold, so nothing
    was written; key names the first such key (in the order the caller gave them)."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class KeysRefused(PermissionDenied):
    """An operation would change a key the user it is made for may not change (object-scoped
    policies, silt/changed_keys.py): that user's refusal, even when a service made the call for
    them, never a refusal of the service's own credentials."""


# Auth refuses to edit one of Silt's own policies (services/auth/setup.py SILT_POLICIES: setup
# rewrites them at every start, so an edit would silently come undone) as FailedPrecondition
# with this text; the REST API answers it 409 Conflict rather than 400.
SILT_OWN_POLICY = "is one of Silt's own policies"

# Graveler refuses a write to a protected branch (engine/features/protection.py) as
# PermissionDenied with one of these texts, lakeFS's own: the gateway and the REST API tell it
# from a refusal of the caller by them (S3 AccessDenied, HTTP 403). A commit has its own.
PROTECTED_BRANCH = "cannot write to protected branch"
PROTECTED_BRANCH_COMMIT = "cannot commit to protected branch"


class ProtectedBranch(PermissionDenied):
    """A change of a branch its protection rules forbid (lakeFS: 403 "cannot write to protected
    branch"): a refusal by the branch's rules, not of the caller. `branch` is the branch and
    `rules` the patterns of the rules that matched it, so that a client can name them and link to
    them without reading the text (they travel over gRPC in the rich status: silt/rpc/errors.py)."""

    def __init__(self, message: str = "", *, branch: str = "", rules: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.branch = branch
        self.rules = rules


def direct_write_refusal(sentence: str, detail: str) -> str:
    """Graveler's text for a change a protection rule forbids: lakeFS's sentence, a colon, why."""
    return f"{sentence}: {detail}"


def lakefs_refusal(details: str) -> str | None:
    """lakeFS's exact sentence when details is a direct_write_refusal, which the REST API answers
    alone: lakectl and scripts compare the whole message. Other protection refusals (a merge
    that needs a pull request's approvals) have no lakeFS equivalent and keep their detail."""
    for sentence in (PROTECTED_BRANCH, PROTECTED_BRANCH_COMMIT):
        if details.startswith(sentence + ":"):
            return sentence
    return None


def is_protection_refusal(details: str) -> bool:
    """A PermissionDenied from graveler with this text is a branch protection rule's, not a
    refusal of the caller."""
    return PROTECTED_BRANCH in details or PROTECTED_BRANCH_COMMIT in details


# How a pre-event hook's refusal starts after its event type (lakeFS's text); the REST API answers
# it 412 Precondition Failed, as lakeFS does, where other failed preconditions are 400.
HOOK_ABORTED = "hook aborted, run id"


class HookAborted(FailedPrecondition):
    """A pre-event hook refused the operation: nothing changed (engine/actions/)."""


def is_hook_refusal(details: str) -> bool:
    return HOOK_ABORTED in details


class ResourceExhausted(SiltError):
    """The service is over a limit (requests in flight, quota); the caller slows down and retries."""
