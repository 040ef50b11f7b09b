"""The REST API's contract: every route the app registers has an entry here naming lakeFS's
operation, the status it answers and the lakefs-sdk model of its body (as lakeFS's
api/swagger.yml names them; where lakeFS's server differs from its swagger, the server's status),
and a valid request to every route answers exactly that: status, content type, and a body the
pydantic model accepts with no field it does not name (Silt's documented additions aside).

A route added without an entry here fails `test_every_route_has_a_contract`; one with an entry
but no request below fails `test_every_contract_is_exercised`."""

from __future__ import annotations

import hashlib
import io
import json
import re
import secrets
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lakefs_sdk.models
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import urllib3
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic.v1 import BaseModel, Extra, Field, StrictBool, StrictInt, StrictStr, ValidationError
from pydantic.v1.fields import SHAPE_SINGLETON

from edge.api.app import create_app
from edge.core.asgi import API_PREFIX
from engine.features.lifecycle import commit_id_of
from silt.config import Config
from silt.graveler.v1 import model_pb2 as pb
from tests.e2e.api.conftest import Api

# Bodies that are not a lakefs-sdk model.
NO_BODY = "no body"
TEXT = "text"  # create branch: the commit id as text/html, as lakeFS answers
BYTES = "bytes"  # object contents, in the object's content type
STRING_MAP = "Dict[str, str]"  # repository metadata
EVENT_STREAM = "text/event-stream"  # a branch's history events (Silt's own, docs/design/api.md)
EVENT_FIELDS = {"id", "timestamp_us", "type", "path", "user", "source", "commit_id", "message", "size"}


class SiltReview(BaseModel, extra=Extra.forbid):
    author: StrictStr
    verdict: StrictStr
    body: StrictStr
    creation_date: StrictStr
    commit_id: StrictStr
    current: StrictBool


class SiltReviewList(BaseModel, extra=Extra.forbid):
    results: list[SiltReview]
    approvals: StrictInt
    required_approvals: StrictInt


class SiltMergeConflict(BaseModel, extra=Extra.forbid):
    path: StrictStr
    source: StrictStr
    destination: StrictStr


class SiltTableConflict(BaseModel, extra=Extra.forbid):
    table: StrictStr
    reason: StrictStr


class SiltMergeCheck(BaseModel, extra=Extra.forbid):
    source_commit_id: StrictStr
    destination_commit_id: StrictStr
    base_commit_id: StrictStr
    mergeable: StrictBool
    conflicts: list[SiltMergeConflict]
    conflicts_truncated: StrictBool
    tables_combined: list[StrictStr]
    tables: list[SiltTableConflict]


class SiltUserPermissions(BaseModel, extra=Extra.forbid):
    create_repository: StrictBool
    administer: StrictBool


class SiltComment(BaseModel, extra=Extra.forbid):
    id: StrictStr
    author: StrictStr
    body: StrictStr
    creation_date: StrictStr


class SiltCommentList(BaseModel, extra=Extra.forbid):
    pagination: lakefs_sdk.models.Pagination
    results: list[SiltComment]


class SiltPreviewField(BaseModel, extra=Extra.forbid):
    name: StrictStr
    type: StrictStr


class SiltObjectPreview(BaseModel, extra=Extra.forbid):
    path: StrictStr
    schema_: list[SiltPreviewField] = Field(alias="schema")
    rows: list[list[Any]]
    total_rows: StrictInt
    row_groups: StrictInt
    columns: StrictInt
    columns_shown: StrictInt
    bytes_read: StrictInt
    rows_cut: StrictInt  # rows left out to keep the answer within its size cap


class SiltChangeStat(BaseModel, extra=Extra.forbid):
    count: StrictInt
    size_bytes: StrictInt


class SiltChangeStats(BaseModel, extra=Extra.forbid):
    added: SiltChangeStat
    removed: SiltChangeStat
    changed: SiltChangeStat


class SiltDiffTotals(BaseModel, extra=Extra.forbid):
    count: StrictInt
    stats: SiltChangeStats


class SiltDiffSummaryRow(BaseModel, extra=Extra.forbid):
    path: StrictStr
    path_type: StrictStr
    count: StrictInt | None = None
    stats: SiltChangeStats | None = None
    type: StrictStr | None = None
    size_bytes: StrictInt | None = None


class SiltDiffSummary(BaseModel, extra=Extra.forbid):
    left_commit: StrictStr | None = None
    right_commit: StrictStr | None = None
    branch: StrictStr | None = None
    prefix: StrictStr
    totals: SiltDiffTotals
    prefix_totals: SiltDiffTotals
    truncated: StrictBool
    pagination: lakefs_sdk.models.Pagination
    results: list[SiltDiffSummaryRow]


class SiltDiffSide(BaseModel, extra=Extra.forbid):
    ref: StrictStr
    exists: StrictBool
    size_bytes: StrictInt | None
    checksum: StrictStr | None
    content_type: StrictStr | None
    mtime: StrictInt | None
    metadata: dict[str, StrictStr] | None


class SiltObjectDiff(BaseModel, extra=Extra.forbid):
    path: StrictStr
    kind: StrictStr
    identical: StrictBool
    left: SiltDiffSide
    right: SiltDiffSide
    # By kind (docs/design/api.md): tables and texts only, none when identical.
    format: StrictStr | None
    key: StrictStr | None
    match: StrictStr | None = None
    key_detected: StrictBool | None = None
    schema_: dict[str, Any] | None = Field(alias="schema")
    counts: dict[str, StrictInt] | None
    rows: list[dict[str, Any]] | None
    hunks: list[dict[str, Any]] | None
    truncated: StrictBool | None
    sample: dict[str, Any] | None


class SiltObjectQuery(BaseModel, extra=Extra.forbid):
    path: StrictStr
    ref: StrictStr
    table: StrictStr
    columns: list[SiltPreviewField]
    rows: list[list[Any]]
    offset: StrictInt
    page_size: StrictInt
    has_more: StrictBool
    next_offset: StrictInt | None
    rows_cut: StrictInt
    cells_cut: StrictInt
    total: StrictInt | None
    sample: dict[str, Any]


class SiltTableDiff(BaseModel, extra=Extra.forbid):
    table: StrictStr
    path: StrictStr
    type: StrictStr
    left: dict[str, Any] | None
    right: dict[str, Any] | None
    snapshots_added: list[dict[str, Any]]
    snapshots_added_count: StrictInt
    snapshots_removed: list[dict[str, Any]]
    snapshots_removed_count: StrictInt
    rows_added: StrictInt
    rows_deleted: StrictInt
    schema_changes: list[dict[str, Any]]
    errors: list[StrictStr] | None = None


class SiltTableDiffList(BaseModel, extra=Extra.forbid):
    left_commit: StrictStr
    right_commit: StrictStr
    pagination: lakefs_sdk.models.Pagination
    results: list[SiltTableDiff]


class AuthCapabilities(BaseModel, extra=Extra.forbid):
    """lakeFS's AuthCapabilities, which lakefs-sdk 1.88 has no model of."""

    invite_user: StrictBool | None = None
    forgot_password: StrictBool | None = None


# Silt's own models, for the routes lakeFS does not have (pull request reviews and comments,
# the web UI's Parquet preview, object diff and query, diff summaries).
SILT_MODELS: dict[str, type[BaseModel]] = {
    "SiltReviewList": SiltReviewList,
    "SiltComment": SiltComment,
    "SiltMergeCheck": SiltMergeCheck,
    "SiltUserPermissions": SiltUserPermissions,
    "SiltCommentList": SiltCommentList,
    "SiltObjectPreview": SiltObjectPreview,
    "SiltDiffSummary": SiltDiffSummary,
    "SiltTableDiffList": SiltTableDiffList,
    "SiltObjectDiff": SiltObjectDiff,
    "SiltObjectQuery": SiltObjectQuery,
    "AuthCapabilities": AuthCapabilities,
}


class LakeFSACL(BaseModel, extra=Extra.forbid):
    permission: StrictStr


# lakeFS's models that its swagger names but lakefs-sdk does not carry (the group ACL calls).
SWAGGER_ONLY_MODELS: dict[str, type[BaseModel]] = {"ACL": LakeFSACL}
# Fields Silt adds to a lakeFS model (documented in docs/design/api.md); the SDK ignores them.
EXTENSIONS: dict[str, frozenset[str]] = {
    "PullRequest": frozenset({"approvals", "required_approvals", "merge_blocked_reason", "checks", "required_checks"}),
    "BranchProtectionRule": frozenset({"block_direct_writes", "required_approvals", "required_checks"}),
    # Silt's own groups and policies (silt/iam_system.py), which cannot be deleted.
    "Group": frozenset({"system"}),
    "Policy": frozenset({"system"}),
    # Not Silt's: the swagger's LoginConfig fields, which the lakefs-sdk's trimmed model leaves out.
    "LoginConfig": frozenset({"RBAC", "login_url", "login_url_method", "login_cookie_names", "logout_url"}),
}


@dataclass(frozen=True)
class Contract:
    operation: str  # lakeFS's operationId ("silt:..." for Silt's own routes)
    status: int
    body: str  # a lakefs-sdk model's name, "List[<model>]", or one of the constants above


# (method, path under /api/v1) -> contract. Path parameters are matched by position, not name.
CONTRACTS: dict[tuple[str, str], Contract] = {
    ("GET", "/healthcheck"): Contract("healthCheck", 204, NO_BODY),
    ("GET", "/config"): Contract("getConfig", 200, "Config"),
    ("GET", "/config/version"): Contract("getLakeFSVersion", 200, "VersionConfig"),
    ("GET", "/config/storage"): Contract("getStorageConfig", 200, "StorageConfig"),
    ("GET", "/config/garbage-collection"): Contract("getGarbageCollectionConfig", 200, "GarbageCollectionConfig"),
    ("GET", "/setup_lakefs"): Contract("getSetupState", 200, "SetupState"),
    # This stack was set up before it started: 409. A first setup (200): test_setup_lakefs.py.
    ("POST", "/setup_lakefs"): Contract("setup", 409, "Error"),
    # Silt collects no communication preferences: 409 once set up, as lakeFS without email subscription.
    ("POST", "/setup_comm_prefs"): Contract("setupCommPrefs", 409, "Error"),
    ("GET", "/auth/capabilities"): Contract("getAuthCapabilities", 200, "AuthCapabilities"),
    ("POST", "/statistics"): Contract("postStatsEvents", 204, NO_BODY),
    # Silt keeps no usage report: lakeFS's answer without an installation id.
    ("GET", "/usage-report/summary"): Contract("getUsageReportSummary", 404, "Error"),
    ("GET", "/user"): Contract("getCurrentUser", 200, "CurrentUser"),
    ("GET", "/user/permissions"): Contract("silt:getCurrentUserPermissions", 200, "SiltUserPermissions"),
    ("POST", "/auth/login"): Contract("login", 200, "AuthenticationToken"),
    ("POST", "/auth/logout"): Contract("silt:logout", 204, NO_BODY),  # lakeFS's UI logs out elsewhere
    ("GET", "/repositories"): Contract("listRepositories", 200, "RepositoryList"),
    ("POST", "/repositories"): Contract("createRepository", 201, "Repository"),
    ("GET", "/repositories/{}"): Contract("getRepository", 200, "Repository"),
    ("DELETE", "/repositories/{}"): Contract("deleteRepository", 204, NO_BODY),
    ("GET", "/repositories/{}/metadata"): Contract("getRepositoryMetadata", 200, STRING_MAP),
    ("POST", "/repositories/{}/metadata"): Contract("setRepositoryMetadata", 204, NO_BODY),
    ("DELETE", "/repositories/{}/metadata"): Contract("deleteRepositoryMetadata", 204, NO_BODY),
    ("GET", "/repositories/{}/settings/gc_rules"): Contract("getGCRules", 200, "GarbageCollectionRules"),
    ("PUT", "/repositories/{}/settings/gc_rules"): Contract("setGCRules", 204, NO_BODY),
    ("DELETE", "/repositories/{}/settings/gc_rules"): Contract("deleteGCRules", 204, NO_BODY),
    ("GET", "/repositories/{}/gc/rules"): Contract("internalGetGarbageCollectionRules", 200, "GarbageCollectionRules"),
    ("POST", "/repositories/{}/gc/rules"): Contract("internalSetGarbageCollectionRules", 204, NO_BODY),
    ("DELETE", "/repositories/{}/gc/rules"): Contract("internalDeleteGarbageCollectionRules", 204, NO_BODY),
    ("GET", "/repositories/{}/gc/rules/set_allowed"): Contract("setGarbageCollectionRulesPreflight", 204, NO_BODY),
    ("POST", "/repositories/{}/gc/prepare_commits"): Contract(
        "prepareGarbageCollectionCommits", 201, "GarbageCollectionPrepareResponse"
    ),
    ("POST", "/repositories/{}/gc/prepare_commits/async"): Contract(
        "prepareGarbageCollectionCommitsAsync", 202, "TaskInfo"
    ),
    ("GET", "/repositories/{}/gc/prepare_commits/status"): Contract(
        "prepareGarbageCollectionCommitsStatus", 200, "PrepareGarbageCollectionCommitsStatus"
    ),
    ("POST", "/repositories/{}/gc/prepare_uncommited"): Contract(
        "prepareGarbageCollectionUncommitted", 201, "PrepareGCUncommittedResponse"
    ),
    ("GET", "/repositories/{}/metadata/meta_range/{}"): Contract("getMetaRange", 200, "StorageURI"),
    ("GET", "/repositories/{}/metadata/range/{}"): Contract("getRange", 200, "StorageURI"),
    ("GET", "/repositories/{}/metadata/object/{}/{}"): Contract("getMetadataObject", 200, BYTES),
    ("GET", "/repositories/{}/settings/branch_protection"): Contract(
        "getBranchProtectionRules", 200, "List[BranchProtectionRule]"
    ),
    ("PUT", "/repositories/{}/settings/branch_protection"): Contract("setBranchProtectionRules", 204, NO_BODY),
    ("GET", "/repositories/{}/branch_protection"): Contract(
        "internalGetBranchProtectionRules", 200, "List[BranchProtectionRule]"
    ),
    ("POST", "/repositories/{}/branch_protection"): Contract("internalCreateBranchProtectionRule", 204, NO_BODY),
    ("DELETE", "/repositories/{}/branch_protection"): Contract("internalDeleteBranchProtectionRule", 204, NO_BODY),
    ("GET", "/repositories/{}/branch_protection/set_allowed"): Contract(
        "createBranchProtectionRulePreflight", 204, NO_BODY
    ),
    ("GET", "/repositories/{}/branches"): Contract("listBranches", 200, "RefList"),
    ("POST", "/repositories/{}/branches"): Contract("createBranch", 201, TEXT),
    ("GET", "/repositories/{}/branches/{}"): Contract("getBranch", 200, "Ref"),
    ("DELETE", "/repositories/{}/branches/{}"): Contract("deleteBranch", 204, NO_BODY),
    ("PUT", "/repositories/{}/branches/{}"): Contract("resetBranch", 204, NO_BODY),
    ("POST", "/repositories/{}/branches/{}/commits"): Contract("commit", 201, "Commit"),
    ("GET", "/repositories/{}/branches/{}/diff"): Contract("diffBranch", 200, "DiffList"),
    ("GET", "/repositories/{}/branches/{}/diff/summary"): Contract("silt:summarizeUncommitted", 200, "SiltDiffSummary"),
    ("POST", "/repositories/{}/branches/{}/revert"): Contract("revertBranch", 204, NO_BODY),
    ("PUT", "/repositories/{}/branches/{}/hard_reset"): Contract("hardResetBranch", 204, NO_BODY),
    ("PUT", "/repositories/{}/refs/dump"): Contract("dumpRefs", 201, "RefsDump"),
    ("PUT", "/repositories/{}/refs/restore"): Contract("restoreRefs", 200, NO_BODY),  # lakeFS answers no body
    ("POST", "/repositories/{}/dump"): Contract("dumpSubmit", 202, "TaskInfo"),
    ("GET", "/repositories/{}/dump"): Contract("dumpStatus", 200, "RepositoryDumpStatus"),
    ("POST", "/repositories/{}/restore"): Contract("restoreSubmit", 202, "TaskInfo"),
    ("GET", "/repositories/{}/restore"): Contract("restoreStatus", 200, "RepositoryRestoreStatus"),
    ("POST", "/repositories/{}/branches/{}/cherry-pick"): Contract("cherryPick", 201, "Commit"),
    ("GET", "/repositories/{}/commits/{}"): Contract("getCommit", 200, "Commit"),
    ("POST", "/repositories/{}/commits"): Contract("CreateCommitRecord", 204, NO_BODY),
    ("GET", "/repositories/{}/refs/{}/commits"): Contract("logCommits", 200, "CommitList"),
    ("GET", "/repositories/{}/refs/{}/diff/{}"): Contract("diffRefs", 200, "DiffList"),
    ("GET", "/repositories/{}/refs/{}/diff/{}/summary"): Contract("silt:summarizeDiff", 200, "SiltDiffSummary"),
    ("GET", "/repositories/{}/refs/{}/diff/{}/tables"): Contract("silt:diffTables", 200, "SiltTableDiffList"),
    ("POST", "/repositories/{}/refs/{}/merge/{}"): Contract("mergeIntoBranch", 200, "MergeResult"),
    ("GET", "/repositories/{}/refs/{}/merge/{}"): Contract("findMergeBase", 200, "FindMergeBaseResult"),
    ("GET", "/repositories/{}/refs/{}/merge/{}/conflicts"): Contract("silt:findMergeConflicts", 200, "SiltMergeCheck"),
    ("GET", "/repositories/{}/tags"): Contract("listTags", 200, "RefList"),
    ("POST", "/repositories/{}/tags"): Contract("createTag", 201, "Ref"),
    ("GET", "/repositories/{}/tags/{}"): Contract("getTag", 200, "Ref"),
    ("DELETE", "/repositories/{}/tags/{}"): Contract("deleteTag", 204, NO_BODY),
    ("GET", "/repositories/{}/refs/{}/objects"): Contract("getObject", 200, BYTES),
    ("HEAD", "/repositories/{}/refs/{}/objects"): Contract("headObject", 200, NO_BODY),
    ("GET", "/repositories/{}/refs/{}/objects/stat"): Contract("statObject", 200, "ObjectStats"),
    ("GET", "/repositories/{}/refs/{}/objects/ls"): Contract("listObjects", 200, "ObjectStatsList"),
    ("GET", "/repositories/{}/refs/{}/objects/preview"): Contract("silt:previewObject", 200, "SiltObjectPreview"),
    ("POST", "/repositories/{}/refs/{}/objects/query"): Contract("silt:queryObject", 200, "SiltObjectQuery"),
    ("GET", "/repositories/{}/refs/{}/diff/{}/object"): Contract("silt:diffObject", 200, "SiltObjectDiff"),
    ("POST", "/repositories/{}/branches/{}/objects"): Contract("uploadObject", 201, "ObjectStats"),
    ("DELETE", "/repositories/{}/branches/{}/objects"): Contract("deleteObject", 204, NO_BODY),
    ("POST", "/repositories/{}/branches/{}/objects/delete"): Contract("deleteObjects", 200, "ObjectErrorList"),
    ("POST", "/repositories/{}/branches/{}/objects/copy"): Contract("copyObject", 201, "ObjectStats"),
    ("POST", "/repositories/{}/branches/{}/import"): Contract("importStart", 202, "ImportCreationResponse"),
    ("GET", "/repositories/{}/branches/{}/import"): Contract("importStatus", 200, "ImportStatus"),
    # The contract's import has completed: 409. A running one's cancel (204): graveler/test_imports.py.
    ("DELETE", "/repositories/{}/branches/{}/import"): Contract("importCancel", 409, "Error"),
    ("GET", "/repositories/{}/branches/{}/staging/backing"): Contract("getPhysicalAddress", 200, "StagingLocation"),
    ("GET", "/repositories/{}/branches/{}/objects/stage_allowed"): Contract("uploadObjectPreflight", 204, NO_BODY),
    # This stack allows no import prefix, so the address is refused: 400. Staged (201): test_stage_object.py.
    ("PUT", "/repositories/{}/branches/{}/objects"): Contract("stageObject", 400, "Error"),
    ("GET", "/repositories/{}/refs/{}/objects/underlyingProperties"): Contract(
        "getUnderlyingProperties", 200, "UnderlyingObjectProperties"
    ),
    ("POST", "/repositories/{}/refs/{}/symlink"): Contract("createSymlinkFile", 201, "StorageURI"),
    ("PUT", "/repositories/{}/branches/{}/staging/backing"): Contract("linkPhysicalAddress", 200, "ObjectStats"),
    ("POST", "/repositories/{}/branches/{}/staging/pmpu"): Contract(
        "createPresignMultipartUpload", 201, "PresignMultipartUpload"
    ),
    ("PUT", "/repositories/{}/branches/{}/staging/pmpu/{}/parts/{}"): Contract("uploadPart", 200, "UploadTo"),
    ("PUT", "/repositories/{}/branches/{}/staging/pmpu/{}/parts/{}/copy"): Contract("uploadPartCopy", 204, NO_BODY),
    ("PUT", "/repositories/{}/branches/{}/staging/pmpu/{}"): Contract(
        "completePresignMultipartUpload", 200, "ObjectStats"
    ),
    ("DELETE", "/repositories/{}/branches/{}/staging/pmpu/{}"): Contract("abortPresignMultipartUpload", 204, NO_BODY),
    # swagger says 201; lakeFS's server answers 204.
    ("PUT", "/repositories/{}/branches/{}/objects/stat/user_metadata"): Contract(
        "updateObjectUserMetadata", 204, NO_BODY
    ),
    ("GET", "/repositories/{}/branches/{}/events"): Contract("silt:watchBranchEvents", 200, EVENT_STREAM),
    ("GET", "/repositories/{}/pulls"): Contract("listPullRequests", 200, "PullRequestsList"),
    ("POST", "/repositories/{}/pulls"): Contract("createPullRequest", 201, "PullRequestCreationResponse"),
    ("GET", "/repositories/{}/pulls/{}"): Contract("getPullRequest", 200, "PullRequest"),
    # swagger says 200; lakeFS's server answers 204.
    ("PATCH", "/repositories/{}/pulls/{}"): Contract("updatePullRequest", 204, NO_BODY),
    ("PUT", "/repositories/{}/pulls/{}/merge"): Contract("mergePullRequest", 200, "MergeResult"),
    ("GET", "/repositories/{}/pulls/{}/reviews"): Contract("silt:listPullRequestReviews", 200, "SiltReviewList"),
    ("POST", "/repositories/{}/pulls/{}/reviews"): Contract("silt:submitPullRequestReview", 201, "PullRequest"),
    ("GET", "/repositories/{}/pulls/{}/comments"): Contract("silt:listPullRequestComments", 200, "SiltCommentList"),
    ("POST", "/repositories/{}/pulls/{}/checks/rerun"): Contract("silt:rerunPullRequestCheck", 202, "PullRequest"),
    ("GET", "/repositories/{}/actions/runs"): Contract("listRepositoryRuns", 200, "ActionRunList"),
    ("GET", "/repositories/{}/actions/runs/{}"): Contract("getRun", 200, "ActionRun"),
    ("GET", "/repositories/{}/actions/runs/{}/hooks"): Contract("listRunHooks", 200, "HookRunList"),
    ("GET", "/repositories/{}/actions/runs/{}/hooks/{}/output"): Contract("getRunHookOutput", 200, BYTES),
    ("POST", "/repositories/{}/pulls/{}/comments"): Contract("silt:addPullRequestComment", 201, "SiltComment"),
    ("GET", "/auth/users"): Contract("listUsers", 200, "UserList"),
    ("POST", "/auth/users"): Contract("createUser", 201, "User"),
    ("GET", "/auth/users/{}"): Contract("getUser", 200, "User"),
    ("DELETE", "/auth/users/{}"): Contract("deleteUser", 204, NO_BODY),
    ("GET", "/auth/users/{}/groups"): Contract("listUserGroups", 200, "GroupList"),
    ("GET", "/auth/users/{}/policies"): Contract("listUserPolicies", 200, "PolicyList"),
    ("PUT", "/auth/users/{}/policies/{}"): Contract("attachPolicyToUser", 201, NO_BODY),
    ("DELETE", "/auth/users/{}/policies/{}"): Contract("detachPolicyFromUser", 204, NO_BODY),
    ("GET", "/auth/users/{}/credentials"): Contract("listUserCredentials", 200, "CredentialsList"),
    ("POST", "/auth/users/{}/credentials"): Contract("createCredentials", 201, "CredentialsWithSecret"),
    ("GET", "/auth/users/{}/credentials/{}"): Contract("getCredentials", 200, "Credentials"),
    ("DELETE", "/auth/users/{}/credentials/{}"): Contract("deleteCredentials", 204, NO_BODY),
    ("GET", "/auth/groups"): Contract("listGroups", 200, "GroupList"),
    ("POST", "/auth/groups"): Contract("createGroup", 201, "Group"),
    ("GET", "/auth/groups/{}"): Contract("getGroup", 200, "Group"),
    ("DELETE", "/auth/groups/{}"): Contract("deleteGroup", 204, NO_BODY),
    ("GET", "/auth/groups/{}/members"): Contract("listGroupMembers", 200, "UserList"),
    ("PUT", "/auth/groups/{}/members/{}"): Contract("addGroupMembership", 201, NO_BODY),
    ("DELETE", "/auth/groups/{}/members/{}"): Contract("deleteGroupMembership", 204, NO_BODY),
    ("GET", "/auth/groups/{}/policies"): Contract("listGroupPolicies", 200, "PolicyList"),
    ("PUT", "/auth/groups/{}/policies/{}"): Contract("attachPolicyToGroup", 201, NO_BODY),
    ("DELETE", "/auth/groups/{}/policies/{}"): Contract("detachPolicyFromGroup", 204, NO_BODY),
    ("GET", "/auth/policies"): Contract("listPolicies", 200, "PolicyList"),
    ("POST", "/auth/policies"): Contract("createPolicy", 201, "Policy"),
    ("GET", "/auth/policies/{}"): Contract("getPolicy", 200, "Policy"),
    ("PUT", "/auth/policies/{}"): Contract("updatePolicy", 200, "Policy"),
    ("DELETE", "/auth/policies/{}"): Contract("deletePolicy", 204, NO_BODY),
    ("DELETE", "/auth/users/{}/sessions"): Contract("silt:revokeSessions", 204, NO_BODY),  # sign out everywhere
    ("POST", "/auth/groups/{}/acl"): Contract("setGroupACL", 201, NO_BODY),
    ("GET", "/auth/groups/{}/acl"): Contract("getGroupACL", 200, "ACL"),
    ("POST", "/auth/users/{}/external/principals"): Contract("createUserExternalPrincipal", 201, NO_BODY),
    ("DELETE", "/auth/users/{}/external/principals"): Contract("deleteUserExternalPrincipal", 204, NO_BODY),
    ("GET", "/auth/users/{}/external/principals/ls"): Contract(
        "listUserExternalPrincipals", 200, "ExternalPrincipalList"
    ),
    ("GET", "/auth/external/principals"): Contract("getExternalPrincipal", 200, "ExternalPrincipal"),
    # Not served (edge/api/not_served.py): 501 with lakeFS's Error, the reason as its message.
    ("POST", "/auth/external/principal/login"): Contract("externalPrincipalLogin", 501, "Error"),
    ("POST", "/sts/login"): Contract("stsLogin", 501, "Error"),
    ("GET", "/oidc/callback"): Contract("oauthCallback", 501, "Error"),
}

_PARAM = re.compile(r"\{[^}]*\}")


def _key(method: str, path: str) -> tuple[str, str]:
    return method.upper(), _PARAM.sub("{}", path)


def _template(method: str, path: str) -> tuple[str, str] | None:
    """The contract whose path template a concrete path (or one with {placeholders}) fits; the
    most literal one when several do."""
    fits = [
        key
        for key in CONTRACTS
        if key[0] == method.upper() and re.fullmatch(re.escape(key[1]).replace(r"\{\}", "[^/]+"), path)
    ]
    return max(fits, key=lambda key: len(key[1].replace("{}", "")), default=None)


def registered_routes() -> set[tuple[str, str]]:
    """Every (method, path under /api/v1) the app serves, as its router knows them."""
    app = create_app(Config(), fast_paths=False).app  # type: ignore[attr-defined]  # Observed wraps the FastAPI app
    routes: set[tuple[str, str]] = set()
    for path, operations in app.openapi()["paths"].items():
        assert path.startswith(API_PREFIX + "/"), path
        for method in operations:
            routes.add(_key(method, path.removeprefix(API_PREFIX)))
    return routes


# --- Requests -------------------------------------------------------------------------------


@dataclass
class Step:
    """One request, with what it needs from earlier ones ({name} in the path is filled from the
    run's values) and what it keeps for later ones."""

    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    keep: dict[str, str] = field(default_factory=dict)  # value name -> field of the JSON answer
    anonymous: bool = False
    as_user: bool = False  # signed with the credentials issued to {user}, not the admin's
    upload: tuple[str, bytes] | None = None  # first PUT these bytes to this (presigned) URL
    build: Callable[[dict[str, str]], Any] | None = None  # a JSON body computed from the run's values
    keep_parquet: dict[str, str] = field(default_factory=dict)  # value name -> column of a Parquet answer's first row


def _parquet_bytes() -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"]}), out)
    return out.getvalue()


_PARQUET = _parquet_bytes()
_MD5_OF_S = hashlib.md5(b"s").hexdigest()  # the bytes the contract's staging upload sends
REPO = "/repositories/{repo}"
MAIN = REPO + "/branches/main"
OCTETS = {"Content-Type": "application/octet-stream"}
# A hook on commits to main and a check on pull requests into it; both only print.
_ACTION = b"""name: contract
on:
  pre-commit:
    branches: ["main"]
  pull-request:
hooks:
  - id: ok
    type: lua
    properties:
      script: print("checked " .. action.event_type)
"""


def _commit_record(values: dict[str, str]) -> dict[str, Any]:
    """A commit record over main's head, its id computed as Silt computes it (a content hash)."""
    fields: dict[str, Any] = {
        "version": 1,
        "committer": "contract",
        "message": "a record",
        "metarange_id": values["head_metarange"],
        "creation_date": 1_700_000_000,
        "parents": [values["head"]],
        "metadata": {},
        "generation": int(values["head_generation"]) + 1,
    }
    commit = pb.Commit(**{**fields, "creation_date": Timestamp(seconds=fields["creation_date"])})
    return {"commit_id": commit_id_of(commit), **fields}


def _refs(location: str) -> dict[str, str]:
    """A RefsRestore naming one Silt dump (its manifest's key in all three fields)."""
    return {"commits_meta_range_id": location, "tags_meta_range_id": location, "branches_meta_range_id": location}


def _steps() -> list[Step]:
    """A valid request to every route, in an order where each finds what it needs."""
    return [
        Step("GET", "/healthcheck", anonymous=True),
        Step("GET", "/config"),
        Step("GET", "/config/version"),
        Step("GET", "/config/storage"),
        Step("GET", "/config/garbage-collection"),
        Step("GET", "/setup_lakefs", anonymous=True),
        Step("POST", "/setup_lakefs", json={"username": "second-admin"}, anonymous=True),
        Step("POST", "/setup_comm_prefs", json={"featureUpdates": False, "securityUpdates": False}, anonymous=True),
        Step("GET", "/auth/capabilities", anonymous=True),
        Step("POST", "/statistics", json={"events": [{"class": "ui-event", "name": "contract", "count": 1}]}),
        Step("GET", "/usage-report/summary"),
        Step("GET", "/user"),
        Step("GET", "/user/permissions"),
        Step("POST", "/auth/login", json={"access_key_id": "{key}", "secret_access_key": "{secret}"}),
        Step("POST", "/auth/logout"),
        Step("POST", "/repositories", json={"name": "{repo}", "storage_namespace": "local://{repo}"}),
        Step("GET", "/repositories", query={"prefix": "{repo}"}),
        Step("GET", REPO),
        Step("POST", REPO + "/metadata", json={"metadata": {"team": "data", "tier": "gold"}}),
        Step("GET", REPO + "/metadata"),
        Step("DELETE", REPO + "/metadata", json={"keys": ["tier"]}),
        # objects
        Step("POST", MAIN + "/objects", query={"path": "data/a.csv"}, content=b"a,1\n", headers=OCTETS),
        Step("GET", REPO + "/refs/main/objects", query={"path": "data/a.csv"}),
        Step("HEAD", REPO + "/refs/main/objects", query={"path": "data/a.csv"}),
        Step("GET", REPO + "/refs/main/objects/stat", query={"path": "data/a.csv"}),
        Step("GET", REPO + "/refs/main/objects/ls", query={"prefix": "data/"}),
        Step("POST", MAIN + "/objects", query={"path": "data/t.parquet"}, content=_PARQUET, headers=OCTETS),
        Step("GET", REPO + "/refs/main/objects/preview", query={"path": "data/t.parquet"}),
        Step(
            "POST",
            REPO + "/refs/main/objects/query",
            query={"path": "data/t.parquet"},
            json={"sql": "SELECT * FROM data", "page": 0},
        ),
        Step("POST", MAIN + "/objects/copy", query={"dest_path": "data/b.csv"}, json={"src_path": "data/a.csv"}),
        Step("PUT", MAIN + "/objects/stat/user_metadata", query={"path": "data/a.csv"}, json={"set": {"k": "v"}}),
        Step("DELETE", MAIN + "/objects", query={"path": "data/b.csv"}),
        Step(
            "GET",
            MAIN + "/staging/backing",
            query={"path": "data/s.csv", "presign": "true"},
            keep={"staged": "physical_address", "upload_url": "presigned_url"},
        ),
        Step(
            "PUT",
            MAIN + "/staging/backing",
            query={"path": "data/s.csv"},
            json={"staging": {"physical_address": "{staged}"}, "checksum": _MD5_OF_S, "size_bytes": 1},
            upload=("{upload_url}", b"s"),
        ),
        # a presigned multipart upload of one part (its URL asked for again), and one aborted
        Step(
            "POST",
            MAIN + "/staging/pmpu",
            query={"path": "data/m.csv", "parts": "1"},
            keep={"mpu": "upload_id", "mpu_address": "physical_address"},
        ),
        Step(
            "PUT",
            MAIN + "/staging/pmpu/{mpu}/parts/1",
            query={"path": "data/m.csv"},
            json={"physical_address": "{mpu_address}"},
            keep={"part_url": "presigned_url"},
        ),
        Step(
            "PUT",
            MAIN + "/staging/pmpu/{mpu}",
            query={"path": "data/m.csv"},
            json={"physical_address": "{mpu_address}", "parts": [{"part_number": 1, "etag": _MD5_OF_S}]},
            upload=("{part_url}", b"s"),
        ),
        Step(
            "POST",
            MAIN + "/staging/pmpu",
            query={"path": "data/n.csv"},
            keep={"mpu2": "upload_id", "mpu2_address": "physical_address"},
        ),
        Step(
            "PUT",
            MAIN + "/staging/pmpu/{mpu2}/parts/1/copy",
            query={"path": "data/n.csv"},
            json={
                "physical_address": "{mpu2_address}",
                "copy_source": {"repository": "{repo}", "ref": "main", "path": "data/a.csv"},
            },
        ),
        Step(
            "DELETE",
            MAIN + "/staging/pmpu/{mpu2}",
            query={"path": "data/n.csv"},
            json={"physical_address": "{mpu2_address}"},
        ),
        Step("GET", MAIN + "/objects/stage_allowed", query={"path": "data/staged.csv"}),
        Step(
            "PUT",
            MAIN + "/objects",
            query={"path": "data/staged.csv"},
            json={"physical_address": "s3://elsewhere/a.csv", "checksum": _MD5_OF_S, "size_bytes": 1},
        ),
        Step("GET", REPO + "/refs/main/objects/underlyingProperties", query={"path": "data/a.csv"}),
        Step("POST", REPO + "/refs/main/symlink", query={"location": "data/"}),
        Step("POST", MAIN + "/objects", query={"path": "data/c.csv"}, content=b"c", headers=OCTETS),
        Step("POST", MAIN + "/objects/delete", json={"paths": ["data/c.csv"]}),
        Step("GET", MAIN + "/events", query={"follow": "false"}),
        # branches, commits, refs (the commit runs the action's pre-commit hook: a run for later)
        Step(
            "POST",
            MAIN + "/objects",
            query={"path": "_lakefs_actions/contract.yaml"},
            content=_ACTION,
            headers=OCTETS,
        ),
        Step("GET", MAIN + "/diff"),
        Step("GET", MAIN + "/diff/summary"),
        Step("POST", MAIN + "/commits", json={"message": "a.csv"}, keep={"first": "id"}),
        Step("GET", REPO + "/actions/runs", query={"branch": "main"}, keep={"run": "results.0.run_id"}),
        Step("GET", REPO + "/actions/runs/{run}"),
        Step("GET", REPO + "/actions/runs/{run}/hooks", keep={"hook_run": "results.0.hook_run_id"}),
        Step("GET", REPO + "/actions/runs/{run}/hooks/{hook_run}/output"),
        Step("GET", REPO + "/branches"),
        Step("POST", REPO + "/branches", json={"name": "dev", "source": "main"}),
        Step("GET", REPO + "/branches/dev"),
        Step("POST", REPO + "/branches/dev/objects", query={"path": "data/d.csv"}, content=b"d", headers=OCTETS),
        Step("POST", REPO + "/branches/dev/commits", json={"message": "d.csv"}),
        Step("GET", REPO + "/refs/main/diff/dev"),
        Step("GET", REPO + "/refs/main/diff/dev/summary", query={"prefix": "data/"}),
        Step("GET", REPO + "/refs/main/diff/dev/tables"),
        Step("GET", REPO + "/refs/main/diff/dev/object", query={"path": "data/t.parquet"}),
        Step("GET", REPO + "/refs/dev/merge/main"),
        Step("GET", REPO + "/refs/dev/merge/main/conflicts"),
        Step("POST", REPO + "/refs/dev/merge/main", json={"message": "dev into main"}),
        Step(
            "GET",
            REPO + "/commits/main",
            keep={"head": "id", "head_metarange": "meta_range_id", "head_generation": "generation"},
        ),
        Step("POST", REPO + "/commits", build=_commit_record),
        Step("GET", REPO + "/refs/main/commits", query={"amount": "2"}),
        Step("POST", MAIN + "/revert", json={"ref": "main", "parent_number": 1}),
        Step("POST", REPO + "/branches/dev/cherry-pick", json={"ref": "main"}),
        Step("POST", MAIN + "/objects", query={"path": "scratch"}, content=b"s", headers=OCTETS),
        Step("PUT", MAIN, json={"type": "reset"}),
        # import: of nothing (this stack imports from nowhere), an empty commit made at once
        Step("POST", MAIN + "/import", json={"paths": [], "commit": {"message": "none"}}, keep={"import": "id"}),
        Step("GET", MAIN + "/import", query={"id": "{import}"}),
        Step("DELETE", MAIN + "/import", query={"id": "{import}"}),
        # tags
        Step("POST", REPO + "/tags", json={"id": "v1", "ref": "{first}"}),
        Step("GET", REPO + "/tags"),
        Step("GET", REPO + "/tags/v1"),
        Step("DELETE", REPO + "/tags/v1"),
        # repository settings
        Step("PUT", REPO + "/settings/gc_rules", json={"default_retention_days": 7, "branches": []}),
        Step("GET", REPO + "/settings/gc_rules"),
        Step("DELETE", REPO + "/settings/gc_rules"),
        Step("GET", REPO + "/gc/rules/set_allowed"),
        Step("POST", REPO + "/gc/rules", json={"default_retention_days": 3, "branches": []}),
        Step("GET", REPO + "/gc/rules"),
        # garbage collection's preparation, as lakeFS's GC client asks for it (the rules are set)
        Step("POST", REPO + "/gc/prepare_commits"),
        Step("POST", REPO + "/gc/prepare_commits/async", keep={"gc_task": "id"}),
        Step("GET", REPO + "/gc/prepare_commits/status", query={"id": "{gc_task}"}),
        Step("POST", REPO + "/gc/prepare_uncommited", json={}),
        Step("DELETE", REPO + "/gc/rules"),
        # refs dump and restore, into bare repositories on the repository's namespace (where its
        # dumps are; after garbage collection's steps, which refuse a namespace shared); then a hard reset
        Step("PUT", REPO + "/refs/dump", keep={"dump": "commits_meta_range_id"}),
        Step(
            "POST",
            "/repositories",
            query={"bare": "true"},
            json={"name": "{repo}-restored", "storage_namespace": "local://{repo}"},
        ),
        Step("PUT", "/repositories/{repo}-restored/refs/restore", json=_refs("{dump}")),
        Step("POST", REPO + "/dump", keep={"dump_task": "id"}),
        Step("GET", REPO + "/dump", query={"task_id": "{dump_task}"}),
        Step(
            "POST",
            "/repositories",
            query={"bare": "true"},
            json={"name": "{repo}-restored2", "storage_namespace": "local://{repo}"},
        ),
        Step("POST", "/repositories/{repo}-restored2/restore", json=_refs("{dump}"), keep={"restore_task": "id"}),
        Step("GET", "/repositories/{repo}-restored2/restore", query={"task_id": "{restore_task}"}),
        Step("PUT", MAIN + "/hard_reset", query={"ref": "main~1"}),
        # committed metadata: a metarange (of the first commit), then one of its ranges
        Step("GET", REPO + "/commits/{first}", keep={"meta_range": "meta_range_id"}),
        Step("GET", REPO + "/metadata/meta_range/{meta_range}"),
        Step("GET", REPO + "/metadata/object/meta_range/{meta_range}", keep_parquet={"range": "range_id"}),
        Step("GET", REPO + "/metadata/range/{range}"),
        Step("PUT", REPO + "/settings/branch_protection", json=[{"pattern": "prod-*"}]),
        Step("GET", REPO + "/settings/branch_protection"),
        Step("GET", REPO + "/branch_protection/set_allowed"),
        Step("POST", REPO + "/branch_protection", json={"pattern": "stable-*"}),
        Step("GET", REPO + "/branch_protection"),
        Step("DELETE", REPO + "/branch_protection", json={"pattern": "stable-*"}),
        # IAM (the user reviews the pull request below)
        Step("POST", "/auth/users", json={"id": "{user}"}),
        Step("GET", "/auth/users"),
        Step("GET", "/auth/users/{user}"),
        Step("POST", "/auth/groups", json={"id": "{group}"}),
        Step("GET", "/auth/groups"),
        Step("GET", "/auth/groups/{group}"),
        Step(
            "POST",
            "/auth/policies",
            json={"id": "{policy}", "statement": [{"effect": "allow", "resource": "{repo}", "action": ["ReadRepo"]}]},
        ),
        Step("GET", "/auth/policies"),
        Step("GET", "/auth/policies/{policy}"),
        Step(
            "PUT",
            "/auth/policies/{policy}",
            json={"id": "{policy}", "statement": [{"effect": "allow", "resource": "{repo}", "action": ["ReadRepo"]}]},
        ),
        Step("PUT", "/auth/users/{user}/policies/{policy}"),
        Step("PUT", "/auth/users/{user}/policies/RepoReadWriteAll"),
        Step("GET", "/auth/users/{user}/policies"),
        Step("PUT", "/auth/groups/{group}/policies/{policy}"),
        Step("GET", "/auth/groups/{group}/policies"),
        Step("PUT", "/auth/groups/{group}/members/{user}"),
        Step("GET", "/auth/groups/{group}/members"),
        Step("GET", "/auth/users/{user}/groups"),
        Step(
            "POST",
            "/auth/users/{user}/credentials",
            keep={"issued": "access_key_id", "issued_secret": "secret_access_key"},
        ),
        Step("GET", "/auth/users/{user}/credentials"),
        Step("GET", "/auth/users/{user}/credentials/{issued}"),
        # pull requests
        Step("POST", REPO + "/branches/dev/objects", query={"path": "data/e.csv"}, content=b"e", headers=OCTETS),
        Step("POST", REPO + "/branches/dev/commits", json={"message": "e.csv"}),
        Step(
            "POST",
            REPO + "/pulls",
            json={"title": "e", "description": "adds e", "source_branch": "dev", "destination_branch": "main"},
            keep={"pull": "id"},
        ),
        Step("GET", REPO + "/pulls", query={"status": "open"}),
        Step("GET", REPO + "/pulls/{pull}"),
        Step("PATCH", REPO + "/pulls/{pull}", json={"description": "adds e.csv"}),
        Step("POST", REPO + "/pulls/{pull}/comments", json={"body": "looks fine"}),
        Step("GET", REPO + "/pulls/{pull}/comments"),
        Step("POST", REPO + "/pulls/{pull}/reviews", json={"verdict": "approve", "body": "ok"}, as_user=True),
        Step("GET", REPO + "/pulls/{pull}/reviews"),
        Step("POST", REPO + "/pulls/{pull}/checks/rerun", json={"name": "contract/ok"}),
        Step("PUT", REPO + "/pulls/{pull}/merge"),
        Step(
            "POST",
            "/auth/users/{user}/external/principals",
            query={"principalId": "arn:aws:iam::1:role/{user}"},
            json={"settings": [{"region": "eu-west-1"}]},
        ),
        Step("GET", "/auth/users/{user}/external/principals/ls"),
        Step("GET", "/auth/external/principals", query={"principalId": "arn:aws:iam::1:role/{user}"}),
        Step("DELETE", "/auth/users/{user}/external/principals", query={"principalId": "arn:aws:iam::1:role/{user}"}),
        Step("POST", "/auth/external/principal/login", json={"identityRequest": {}}, anonymous=True),
        Step("POST", "/sts/login", json={"code": "c", "state": "s", "redirect_uri": "http://x/"}, anonymous=True),
        Step("GET", "/oidc/callback", anonymous=True),
        Step("DELETE", "/auth/users/{user}/sessions"),
        Step("DELETE", "/auth/users/{user}/credentials/{issued}"),
        Step("DELETE", "/auth/groups/{group}/members/{user}"),
        Step("DELETE", "/auth/groups/{group}/policies/{policy}"),
        # Setting an ACL detaches the group's other policies (lakeFS's ACL model): after the rest.
        Step("POST", "/auth/groups/{group}/acl", json={"permission": "Read"}),
        Step("GET", "/auth/groups/{group}/acl"),
        Step("DELETE", "/auth/users/{user}/policies/{policy}"),
        Step("DELETE", "/auth/users/{user}"),
        Step("DELETE", "/auth/groups/{group}"),
        Step("DELETE", "/auth/policies/{policy}"),
        # the end of the repository
        Step("DELETE", REPO + "/branches/dev"),
        Step("DELETE", "/repositories/{repo}-restored"),
        Step("DELETE", "/repositories/{repo}-restored2"),
        Step("DELETE", REPO),
    ]


# --- Validation -------------------------------------------------------------------------------


def _model(name: str) -> type[BaseModel]:
    if name in SILT_MODELS:
        return SILT_MODELS[name]
    if name in SWAGGER_ONLY_MODELS:
        return SWAGGER_ONLY_MODELS[name]
    model = getattr(lakefs_sdk.models, name, None)
    assert isinstance(model, type) and issubclass(model, BaseModel), f"lakefs-sdk has no model {name}"
    return model


def _unknown_fields(model: type[BaseModel], data: Any, where: str) -> list[str]:
    """Keys the model does not name, at any depth (pydantic ignores them; a strict client may not)."""
    if not isinstance(data, dict):
        return []
    fields = {f.alias: f for f in model.__fields__.values()}
    allowed = set(fields) | EXTENSIONS.get(model.__name__, frozenset())
    found = [f"{where}.{key}" for key in data if key not in allowed]
    for key, value in data.items():
        spec = fields.get(key)
        inner = spec.type_ if spec is not None else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            continue
        if isinstance(value, list):
            items = value
        elif isinstance(value, dict) and spec is not None and spec.shape != SHAPE_SINGLETON:
            items = list(value.values())
        else:
            items = [value]
        for index, item in enumerate(items):
            found += _unknown_fields(inner, item, f"{where}.{key}[{index}]")
    return found


def _event_stream_problems(content_type: str, data: bytes) -> list[str]:
    """Server-Sent Events: comments, or `id`, `event: history` and one JSON `data` line per event."""
    if not content_type.startswith("text/event-stream"):
        return [f"content type {content_type!r}, expected text/event-stream"]
    problems = []
    for block in data.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        if set(fields) != {"id", "event", "data"} or fields["event"] != "history":
            problems.append(f"not a history event: {block!r}")
        elif set(json.loads(fields["data"])) != EVENT_FIELDS:
            problems.append(f"event fields {sorted(json.loads(fields['data']))}, expected {sorted(EVENT_FIELDS)}")
    return problems


def check_body(contract: Contract, response: urllib3.BaseHTTPResponse) -> list[str]:
    """What is wrong with a response for its contract (nothing: an empty list)."""
    problems: list[str] = []
    content_type = response.headers.get("Content-Type", "")
    data = response.data
    if response.status != contract.status:
        return [f"status {response.status}, expected {contract.status}: {data[:300]!r}"]
    if contract.body == NO_BODY:
        return [f"a body where none is expected: {data[:100]!r}"] if data else []
    if contract.body == BYTES:
        return [] if data else ["no object contents"]
    if contract.body == EVENT_STREAM:
        return problems + _event_stream_problems(content_type, data)
    if contract.body == TEXT:
        ok = content_type.startswith("text/") and data.decode().strip() != ""
        return [] if ok else [f"expected text, got {content_type!r} {data[:100]!r}"]
    if content_type.split(";")[0].strip() != "application/json":
        problems.append(f"content type {content_type!r}, expected application/json")
    try:
        body = json.loads(data)
    except ValueError:
        return [*problems, f"not JSON: {data[:100]!r}"]
    if contract.body == STRING_MAP:
        if not (isinstance(body, dict) and all(isinstance(v, str) for v in body.values())):
            problems.append(f"expected a string map, got {body!r}")
        return problems
    many = contract.body.startswith("List[")
    model = _model(contract.body.removeprefix("List[").removesuffix("]"))
    if many and not isinstance(body, list):
        return [*problems, f"expected a list, got {body!r}"]
    items = body if many else [body]
    for item in items:
        try:
            model.parse_obj(item)
        except ValidationError as invalid:
            problems.append(f"{model.__name__} rejects the body: {invalid}")
        problems += _unknown_fields(model, item, model.__name__)
    return problems


# --- Tests -----------------------------------------------------------------------------------


def test_every_route_has_a_contract() -> None:
    missing = sorted(registered_routes() - set(CONTRACTS))
    assert not missing, f"routes without a contract entry (add them to CONTRACTS): {missing}"


def test_every_contract_is_exercised() -> None:
    fitted = {(step.method, step.path): _template(step.method, step.path) for step in _steps()}
    assert not [step for step, key in fitted.items() if key is None], "requests in _steps() with no contract"
    assert not sorted(set(CONTRACTS) - set(fitted.values())), "contracts with no request in _steps()"


def _field(answer: Any, dotted: str) -> Any:
    """A field of a JSON answer by a dotted path (`results.0.run_id`)."""
    for part in dotted.split("."):
        answer = answer[int(part)] if isinstance(answer, list) else answer[part]
    return answer


def _fill(template: Any, values: dict[str, str]) -> Any:
    if isinstance(template, str):
        return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)
    if isinstance(template, list):
        return [_fill(item, values) for item in template]
    if isinstance(template, dict):
        return {key: _fill(value, values) for key, value in template.items()}
    return template


def test_every_route_answers_its_contract(api: Api) -> None:
    registered = registered_routes()
    suffix = secrets.token_hex(4)
    admin = api.stack.admin
    values = {
        "repo": f"contract-{suffix}",
        "user": f"contract-user-{suffix}",
        "group": f"contract-group-{suffix}",
        "policy": f"contract-policy-{suffix}",
        "key": admin.access_key_id,
        "secret": admin.secret_access_key.get_secret_value(),
    }
    admin_auth = urllib3.make_headers(basic_auth=f"{values['key']}:{values['secret']}")
    failures: list[str] = []
    unserved: list[str] = []
    for step in _steps():
        key = _template(step.method, step.path)
        assert key is not None, f"no contract for {step.method} {step.path}"
        if key not in registered:
            unserved.append(f"{step.method} {step.path}")
            continue
        contract = CONTRACTS[key]
        path = _fill(step.path, values)
        headers = dict(step.headers)
        if step.as_user:
            headers.update(urllib3.make_headers(basic_auth=f"{values['issued']}:{values['issued_secret']}"))
        elif not step.anonymous:
            headers.update(admin_auth)
        body = step.content
        if step.json is not None or step.build is not None:
            data = _fill(step.json, values) if step.build is None else step.build(values)
            body = json.dumps(data).encode()
            headers["Content-Type"] = "application/json"
        query = _fill(step.query, values)
        if query:
            path += "?" + urllib.parse.urlencode(query)
        if step.upload is not None:
            url, data = step.upload
            uploaded = api.http.request("PUT", _fill(url, values), body=data, retries=False)
            assert uploaded.status == 200, f"PUT to the presigned URL before {step.method} {path}: {uploaded.data!r}"
        response = api.request(step.method, path, headers=headers, body=body)
        problems = check_body(contract, response)
        if problems:
            failures.append(f"{contract.operation} ({step.method} {path}): " + "; ".join(problems))
        elif step.keep:
            answer = json.loads(response.data)
            values.update({name: str(_field(answer, key)) for name, key in step.keep.items()})
        elif step.keep_parquet:
            first = pq.read_table(io.BytesIO(response.data)).to_pylist()[0]
            values.update({name: str(first[column]) for name, column in step.keep_parquet.items()})
    assert not failures, "contract violations:\n" + "\n".join(failures)
    assert not unserved, f"contracts for routes the app does not serve: {unserved}"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"id": "x", "commit_id": "c", "extra": 1}, "Ref.extra"),
        ({"id": "x"}, "Ref rejects the body"),
    ],
)
def test_the_checker_catches_missing_and_unknown_fields(body: dict[str, Any], problem: str) -> None:
    response = urllib3.HTTPResponse(
        body=json.dumps(body).encode(), status=200, headers={"Content-Type": "application/json"}
    )
    found = check_body(Contract("getTag", 200, "Ref"), response)
    assert any(problem in p for p in found), found


# Routes that answer without credentials, as lakeFS's do.
ANONYMOUS = {
    ("GET", "/healthcheck"),
    ("POST", "/auth/login"),
    ("POST", "/auth/logout"),
    # Logins through an identity provider: not served, 501 to anyone (edge/api/not_served.py).
    ("POST", "/auth/external/principal/login"),
    ("POST", "/sts/login"),
    ("GET", "/oidc/callback"),
    ("GET", "/setup_lakefs"),
    ("POST", "/setup_lakefs"),
    ("POST", "/setup_comm_prefs"),
    ("GET", "/auth/capabilities"),
}


def test_every_other_route_refuses_a_caller_without_credentials(api: Api) -> None:
    """401 with lakeFS's Error body, before anything is looked up (`x` names nothing)."""
    wrong: list[str] = []
    for method, template in sorted(registered_routes() - ANONYMOUS):
        path = template.replace("{}", "x")
        for headers in ({}, urllib3.make_headers(basic_auth="AKIANOSUCHKEY:wrong-secret")):
            response = api.request(method, path, headers=headers)
            problems = check_body(Contract("error", 401, "Error"), response)
            if method == "HEAD":  # no body to a HEAD
                problems = [] if response.status == 401 else [f"status {response.status}"]
            if problems:
                wrong.append(f"{method} {path} ({'wrong key' if headers else 'anonymous'}): {'; '.join(problems)}")
    assert not wrong, "\n".join(wrong)
