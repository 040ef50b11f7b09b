"""Every action a policy can name, and the resources they apply to.

Repository actions are four (docs/design/auth.md), on resources named by the repository, and
seven administrative ones on the same resources (REPO_ADMIN_ACTIONS: GC rules and runs, refs
dump and restore, branch protection rules, hooks' outputs) that writers do not hold. The IAM actions
(`iam:*`) manage users, groups, policies, credentials and external principals, on resources
`users/<id>`, `groups/<id>`, `policies/<id>` and `external_principals/<id>`; listing a whole
collection is an action on its prefix (`users/`), so `users/*` grants it and `users/alice` does
not. The `catalog:*` actions are the Iceberg catalog's, on lakeFS's catalog resources. The
`auth:*` actions are for services that verify other principals' requests. Attaching or
detaching a policy needs the action on both ends: the user or group, and the policy. Repository
names never contain `/`, so a repository pattern such as `prod-*` cannot match an IAM resource.
Objects and branches below a repository have resources of their own (`<repository>/<key>`,
`<repository>@<branch>`) for the actions that name part of a repository.
"""

from __future__ import annotations

from silt.errors import InvalidArgument

CREATE_REPO = "CreateRepo"
DELETE_REPO = "DeleteRepo"
READ_REPO = "ReadRepo"
WRITE_REPO = "WriteRepo"
REPO_ACTIONS = (CREATE_REPO, DELETE_REPO, READ_REPO, WRITE_REPO)

# The repository without its objects: its record, branches, tags and commits (lakeFS's
# fs:ReadRepository, fs:ReadBranch, fs:ListCommits, ...), what a user allowed only some keys
# needs to open the repository at all (the web UI, lakeFS's clients). ReadRepo holds it, and a
# Deny of ReadRepo takes it (services/auth/policies.py). Listing objects is not part of it:
# a listing shows the keys ReadObject allows.
READ_REFS = "ReadRefs"

# Objects below a repository, on resources `<repository>/<key>` (object_resource): what a policy
# names to grant part of a repository's objects (`weather/raw/*`) rather than all of them.
# Holding the repository's action (ReadRepo for reads, WriteRepo for writes and deletes) holds
# every key's; a Deny of either, on the repository or on the key, wins (silt/key_scope.py).
# Reading a key also shows it in listings and diffs; nothing else of the repository (its
# record, branches, commits) comes with these.
READ_OBJECT = "ReadObject"
WRITE_OBJECT = "WriteObject"
DELETE_OBJECT = "DeleteObject"
OBJECT_ACTIONS = (READ_OBJECT, WRITE_OBJECT, DELETE_OBJECT)
# The repository action that holds an object action on every key.
OBJECT_ACTION_REPO_ACTION = {READ_OBJECT: READ_REPO, WRITE_OBJECT: WRITE_REPO, DELETE_OBJECT: WRITE_REPO}

# Branches, on resources `<repository>@<branch>` (branch_resource; neither a repository nor a
# branch name ever contains '@' or '/'): what a policy names to let a writer change some branches
# only (`weather@dev-*`), or to keep writers off one (a Deny on `weather@main`). Holding the
# repository's action (WriteRepo; ReadRefs or ReadRepo for ReadBranch) holds them on every branch
# of it; WriteBranch holds the other write actions on the branches it names; a Deny of any action
# holding one, on the repository or on the branch, wins (services/auth/policies.py).
# WriteBranch: every change to the branch: the four below, and staged writes and deletes of any
# key on it (a Deny of it refuses those on every path, the S3 gateway's included; an Allow of it is
# the object actions on every key of the branch: silt/key_scope.py).
WRITE_BRANCH = "WriteBranch"
# Commit, merge into, cherry-pick onto, merge a pull request into, import into the branch.
COMMIT_BRANCH = "CommitBranch"
# Revert a commit on the branch, reset it (its staged changes, or hard to another commit).
REVERT_BRANCH = "RevertBranch"
# Create a branch of that name; delete it.
CREATE_BRANCH = "CreateBranch"
DELETE_BRANCH = "DeleteBranch"
# The branch's record (its head commit), and the log of a ref of that name.
READ_BRANCH = "ReadBranch"
BRANCH_WRITE_ACTIONS = (WRITE_BRANCH, COMMIT_BRANCH, REVERT_BRANCH, CREATE_BRANCH, DELETE_BRANCH)
BRANCH_ACTIONS = (*BRANCH_WRITE_ACTIONS, READ_BRANCH)

# Administration of one repository that a writer must not have, also on the repository name:
# retention rules decide what garbage collection deletes (0 days: every commit but the
# heads), PrepareGC starts a run, a dump copies every ref out, a restore rewrites them all.
# Only policies naming them (or `*`, the Admins preset) hold them; WriteRepo does not.
SET_GC_RULES = "SetGCRules"
DELETE_GC_RULES = "DeleteGCRules"
PREPARE_GC = "PrepareGC"
DUMP_REFS = "DumpRefs"
RESTORE_REFS = "RestoreRefs"
# Branch protection rules decide who may change a branch at all (engine/features/protection.py):
# a writer who could set them could lift the protection meant to bind them.
SET_BRANCH_PROTECTION = "SetBranchProtection"
# A hook's output: what a webhook's receiver answered (a writer chooses where it goes, so an
# answer may be a page of a service only the server can reach) and what a Lua hook printed.
# Readers of the repository see runs and their statuses with ReadRepo; the outputs need this.
READ_ACTION_OUTPUT = "ReadActionOutput"
REPO_ADMIN_ACTIONS = (
    SET_GC_RULES,
    DELETE_GC_RULES,
    PREPARE_GC,
    DUMP_REFS,
    RESTORE_REFS,
    SET_BRANCH_PROTECTION,
    READ_ACTION_OUTPUT,
)

CREATE_USER = "iam:CreateUser"
READ_USER = "iam:ReadUser"
DELETE_USER = "iam:DeleteUser"
CREATE_GROUP = "iam:CreateGroup"
READ_GROUP = "iam:ReadGroup"
DELETE_GROUP = "iam:DeleteGroup"
ADD_GROUP_MEMBER = "iam:AddGroupMember"
REMOVE_GROUP_MEMBER = "iam:RemoveGroupMember"
CREATE_POLICY = "iam:CreatePolicy"
READ_POLICY = "iam:ReadPolicy"
DELETE_POLICY = "iam:DeletePolicy"
ATTACH_POLICY = "iam:AttachPolicy"
DETACH_POLICY = "iam:DetachPolicy"
CREATE_CREDENTIALS = "iam:CreateCredentials"
READ_CREDENTIALS = "iam:ReadCredentials"
DELETE_CREDENTIALS = "iam:DeleteCredentials"
# External principals (another provider's identities linked to a user): linking one lets whoever
# holds that identity act as the user, so it is on the user, as issuing a key is; reading one is
# on `external_principals/<principal id>`, as the principal's user is not known before the read.
CREATE_USER_EXTERNAL_PRINCIPAL = "iam:CreateUserExternalPrincipal"
DELETE_USER_EXTERNAL_PRINCIPAL = "iam:DeleteUserExternalPrincipal"
READ_EXTERNAL_PRINCIPAL = "iam:ReadExternalPrincipal"
IAM_ACTIONS = (
    CREATE_USER,
    READ_USER,
    DELETE_USER,
    CREATE_GROUP,
    READ_GROUP,
    DELETE_GROUP,
    ADD_GROUP_MEMBER,
    REMOVE_GROUP_MEMBER,
    CREATE_POLICY,
    READ_POLICY,
    DELETE_POLICY,
    ATTACH_POLICY,
    DETACH_POLICY,
    CREATE_CREDENTIALS,
    READ_CREDENTIALS,
    DELETE_CREDENTIALS,
    CREATE_USER_EXTERNAL_PRINCIPAL,
    DELETE_USER_EXTERNAL_PRINCIPAL,
    READ_EXTERNAL_PRINCIPAL,
)

# The Iceberg REST catalog (edge/api/iceberg), with lakeFS's names and resources: namespaces,
# tables and views of a repository, `arn:lakefs:catalog:::namespace/<repository>/<namespace>`,
# `.../table/<repository>/<namespace>/<table>` and `.../view/...`, a namespace written dotted
# (`sales.daily`) and never naming a ref, so that a grant holds on every branch. The catalog asks
# for them beside the object actions on the files it reads and writes: a user needs both, as a
# lakeFS user needs catalog: and fs: statements. Listing a ref's top-level namespaces is on the
# repository's root namespace, `.../namespace/<repository>/` (empty after the slash).
CATALOG_LIST_NAMESPACES = "catalog:ListNamespaces"
CATALOG_GET_NAMESPACE = "catalog:GetNamespace"
CATALOG_CREATE_NAMESPACE = "catalog:CreateNamespace"
CATALOG_UPDATE_NAMESPACE = "catalog:UpdateNamespace"
CATALOG_DELETE_NAMESPACE = "catalog:DeleteNamespace"
CATALOG_LIST_TABLES = "catalog:ListTables"
CATALOG_READ_TABLE = "catalog:ReadTable"
CATALOG_CREATE_TABLE = "catalog:CreateTable"
CATALOG_UPDATE_TABLE = "catalog:UpdateTable"
CATALOG_DELETE_TABLE = "catalog:DeleteTable"
CATALOG_LIST_VIEWS = "catalog:ListViews"
CATALOG_READ_VIEW = "catalog:ReadView"
CATALOG_CREATE_VIEW = "catalog:CreateView"
CATALOG_UPDATE_VIEW = "catalog:UpdateView"
CATALOG_DELETE_VIEW = "catalog:DeleteView"
CATALOG_READ_ACTIONS = (
    CATALOG_LIST_NAMESPACES,
    CATALOG_GET_NAMESPACE,
    CATALOG_LIST_TABLES,
    CATALOG_READ_TABLE,
    CATALOG_LIST_VIEWS,
    CATALOG_READ_VIEW,
)
CATALOG_ACTIONS = (
    *CATALOG_READ_ACTIONS,
    CATALOG_CREATE_NAMESPACE,
    CATALOG_UPDATE_NAMESPACE,
    CATALOG_DELETE_NAMESPACE,
    CATALOG_CREATE_TABLE,
    CATALOG_UPDATE_TABLE,
    CATALOG_DELETE_TABLE,
    CATALOG_CREATE_VIEW,
    CATALOG_UPDATE_VIEW,
    CATALOG_DELETE_VIEW,
)
CATALOG_ARN = "arn:lakefs:catalog:::"


def catalog_namespace_resource(repository: str, namespace: str) -> str:
    """A namespace's resource; namespace "" is the repository's root (its top-level listing)."""
    return f"{CATALOG_ARN}namespace/{repository}/{namespace}"


def catalog_table_resource(repository: str, namespace: str, table: str) -> str:
    return f"{CATALOG_ARN}table/{repository}/{namespace}/{table}"


def catalog_view_resource(repository: str, namespace: str, view: str) -> str:
    return f"{CATALOG_ARN}view/{repository}/{namespace}/{view}"


# Ask for decisions about other users. Verify signatures addressed to an audience, on
# `audiences/<audience>`: S3 requests (audience `s3`, the gateway) or gRPC calls to graveler
# or the compactor (`graveler`, `compactor`; auth verifies calls to itself and never hands out
# their keys). Whoever verifies for an audience learns keys that act as any signer toward
# that audience, so each service user holds it for its own audience only.
# No action reads a secret: none is ever returned after CreateCredentials.
AUTHORIZE = "auth:Authorize"
VERIFY_SIGNATURE = "auth:VerifySignature"
# Naming another user as the author of a pull request, review or comment, or as a merge's
# committer (graveler), on `users/<id>`: only the REST API, which authenticated that user itself.
ACT_FOR_USER = "auth:ActForUser"
# Recording history events (reads, writes, deletes) in a repository, as the user named in each
# event: only the services that saw those requests (the gateway and the REST API), so that no
# one can write another user's accesses into the audit trail (docs/design/journal.md).
RECORD_EVENTS = "auth:RecordEvents"
SERVICE_ACTIONS = (AUTHORIZE, VERIFY_SIGNATURE, ACT_FOR_USER, RECORD_EVENTS)
# Actions only a statement naming them literally allows: a wildcard (`*`, `auth:*`,
# `auth:Verify*`) never does, though it still denies. Verifying signatures is impersonation,
# meant for Silt's own service users (setup writes their statements), never a side effect of
# "Allow *" (services/auth/policies.py decides, services/auth/grants.py delegates alike).
LITERAL_ONLY_ACTIONS = frozenset((VERIFY_SIGNATURE, ACT_FOR_USER, RECORD_EVENTS))

ALL_ACTIONS = (
    *REPO_ACTIONS,
    READ_REFS,
    *OBJECT_ACTIONS,
    *BRANCH_ACTIONS,
    *REPO_ADMIN_ACTIONS,
    *IAM_ACTIONS,
    *CATALOG_ACTIONS,
    *SERVICE_ACTIONS,
)
_KNOWN = frozenset(ALL_ACTIONS)

# The longest resource a policy may name or a decision may be asked about (characters).
MAX_RESOURCE_LENGTH = 1024


def object_resource(repository: str, key: str) -> str:
    """The resource of one object: `<repository>/<key>` (repository names never contain `/`)."""
    return f"{repository}/{key}"


BRANCH_MARK = "@"


def branch_resource(repository: str, branch: str) -> str:
    """The resource of one branch: `<repository>@<branch>`."""
    return f"{repository}{BRANCH_MARK}{branch}"


def user_resource(user_id: str) -> str:
    return f"users/{user_id}"


def group_resource(group_id: str) -> str:
    return f"groups/{group_id}"


def policy_resource(policy_id: str) -> str:
    return f"policies/{policy_id}"


def external_principal_resource(principal_id: str) -> str:
    return f"external_principals/{principal_id}"


# The audience of S3 requests: what the gateway verifies.
S3_AUDIENCE = "s3"
# The audience of REST API requests (Basic credentials and session tokens): what the API verifies.
API_AUDIENCE = "api"


def audience_resource(audience: str) -> str:
    return f"audiences/{audience}"


USERS = "users/"
GROUPS = "groups/"
POLICIES = "policies/"


def check_action(action: str) -> str:
    """A concrete action, as a request names it."""
    if action not in _KNOWN:
        raise InvalidArgument(f"unknown action {action!r}")
    return action
