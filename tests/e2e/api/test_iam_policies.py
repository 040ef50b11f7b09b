"""lakeFS policy documents through the REST API (edge/api/iam/policies.py): Silt's own
vocabulary stored as is; lakeFS's translated only where Silt then allows no more than the
statement did (Allow), or at least as much is denied (Deny); refused (400) otherwise."""

from __future__ import annotations

import json
import secrets
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from edge.api.errors import ApiError
from edge.api.iam import calls as iam_calls
from edge.api.iam import policies as iam_policies
from edge.api.iam.policies import EQUIVALENT, LAKEFS_ACTIONS, from_silt, glob, to_silt
from services.auth import acting
from silt.auth.v1 import model_pb2 as pb
from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api

READS = [
    "fs:Read*",
    "fs:List*",
    "retention:GetGarbageCollectionRules",
    "branches:GetBranchProtectionRules",
    "pr:ReadPullRequest",
    "pr:ListPullRequests",
]
REPO = "arn:lakefs:fs:::repository/"


def _policy(*statements: tuple[str, list[str], str]) -> lakefs_sdk.Policy:
    return lakefs_sdk.Policy(
        id="p",
        statement=[lakefs_sdk.Statement(effect=e, action=actions, resource=r) for e, actions, r in statements],
    )


def _silt(*statements: tuple[str, list[str], str]) -> list[tuple[str, list[str], list[str]]]:
    names = {pb.EFFECT_ALLOW: "allow", pb.EFFECT_DENY: "deny"}
    return [(names[s.effect], list(s.actions), list(s.resources)) for s in to_silt(_policy(*statements))]


def _refusal(*statements: tuple[str, list[str], str]) -> str:
    with pytest.raises(ApiError) as caught:
        to_silt(_policy(*statements))
    assert caught.value.status == 400
    return caught.value.message


def test_silt_vocabulary_is_stored_as_is() -> None:
    assert _silt(("allow", ["ReadRepo", "WriteRepo"], "prod-*"), ("deny", ["iam:*"], "users/*")) == [
        ("allow", ["ReadRepo", "WriteRepo"], ["prod-*"]),
        ("deny", ["iam:*"], ["users/*"]),
    ]
    # Silt's own auth: actions are Silt's, not lakeFS's `auth:` IAM.
    assert _silt(("allow", ["auth:Authorize"], "users/*")) == [("allow", ["auth:Authorize"], ["users/*"])]


def test_whole_repository_reads_translate_to_read_repo() -> None:
    assert _silt(("allow", READS, REPO + "prod*")) == [("allow", ["ReadRepo"], ["prod*"])]
    assert _silt(("allow", READS, "*")) == [("allow", ["ReadRepo"], ["*"])]
    # lakeFS's idiom for one repository: the repository and everything in it, both covered.
    pair = _silt(("allow", READS, REPO + "sales"), ("allow", READS, REPO + "sales/*"))
    assert pair == [("allow", ["ReadRepo"], ["sales"])]
    # fs:* alone is not WriteRepo: that also merges pull requests (lakeFS's pr:WritePullRequest).
    assert "pr:WritePullRequest" in _refusal(("allow", ["fs:*"], "*"))
    every_repo_action = ["ReadRepo", "WriteRepo", "CreateRepo", "DeleteRepo", "SetGCRules", "DeleteGCRules"]
    every_repo_action += ["PrepareGC", "SetBranchProtection"]
    wide = _silt(("allow", ["fs:*", "pr:*", "retention:*", "branches:*"], "*"))
    assert wide == [("allow", every_repo_action, ["*"])]
    # `*` also covers lakeFS's ci:ReadAction: hooks' outputs.
    assert _silt(("allow", ["*"], REPO + "*")) == [("allow", [*every_repo_action, "ReadActionOutput"], ["*"])]
    assert _silt(("allow", ["ci:ReadAction"], REPO + "ci-*")) == [("allow", ["ReadActionOutput"], ["ci-*"])]
    [(effect, actions, resources)] = _silt(("allow", ["auth:*"], "*"))
    assert (effect, resources) == ("allow", ["*"])
    assert set(actions) == {x for x in EQUIVALENT if x.startswith("iam:")}


def test_partial_grants_are_refused_naming_the_action() -> None:
    # fs:Read* and fs:List* alone do not cover ReadRepo: it also reads GC and protection rules
    # and pull requests.
    message = _refusal(("allow", ["fs:Read*", "fs:List*"], "*"))
    assert "cannot be allowed alone" in message and "ReadRepo" in message and "pr:ReadPullRequest" in message
    # A repository without its contents is narrower than Silt grants.
    assert "not a whole repository" in _refusal(("allow", READS, REPO + "foo"))
    # IAM only on every resource: Silt's iam: resources are not lakeFS's.
    assert "auth:ReadUser" in _refusal(("allow", ["auth:ReadUser"], "arn:lakefs:auth:::user/bob"))
    assert "unknown lakeFS action" in _refusal(("allow", ["fs:Frobnicate"], "*"))
    assert "Silt's vocabulary" in _refusal(("allow", ["fs:ReadObject", "ReadRepo"], "*"))
    assert "catalog resources only" in _refusal(("allow", ["catalog:*"], "arn:lakefs:fs:::repository/foo*"))
    # A pattern that may match catalog resources keeps its catalog actions exactly, a Deny too.
    assert _silt(("deny", ["catalog:ReadTable", "fs:WriteObject"], "arn:lakefs:*")) == [
        ("deny", ["WriteRepo"], ["*"]),
        ("deny", ["catalog:ReadTable"], ["arn:lakefs:*"]),
    ]
    assert "'?'" in _refusal(("allow", ["fs:Read?bject"], "*"))


def test_object_statements_translate_to_object_actions() -> None:
    """lakeFS checks only its object actions on an object's resource: those translate exactly,
    the statement's other actions allow or deny nothing there."""
    brief = _silt(("allow", ["fs:ReadObject", "fs:ListObjects"], REPO + "weather/object/raw/*"))
    assert brief == [("allow", ["ReadObject"], ["weather/raw/*"])]
    assert _silt(("allow", READS, REPO + "foo/object/reports/*")) == [("allow", ["ReadObject"], ["foo/reports/*"])]
    writes = _silt(("allow", ["fs:WriteObject", "fs:DeleteObject"], REPO + "w/object/raw/day=??/*"))
    assert writes == [("allow", ["WriteObject", "DeleteObject"], ["w/raw/day=??/*"])]
    assert _silt(("allow", ["*"], REPO + "w/object/*")) == [
        ("allow", ["ReadObject", "WriteObject", "DeleteObject"], ["w/*"])
    ]
    assert _silt(("deny", ["fs:*"], REPO + "w/object/gold/*")) == [
        ("deny", ["ReadObject", "WriteObject", "DeleteObject"], ["w/gold/*"])
    ]
    # A wildcard in the repository could match across `/object/`: no Allow, a wider Deny.
    assert "repository name without wildcards" in _refusal(("allow", ["fs:ReadObject"], REPO + "w*/object/raw/*"))
    assert _silt(("deny", ["fs:ReadObject"], REPO + "w?x/object/raw/*")) == [("deny", ["ReadRepo"], ["w*"])]
    # Only fs:ListObjects (checked on the repository in lakeFS) allows nothing on an object.
    assert "fs:ListObjects is checked on the repository" in _refusal(
        ("allow", ["fs:ListObjects"], REPO + "w/object/raw/*")
    )
    # `?` is a key pattern's (or a branch pattern's) only.
    assert "or a branch pattern only" in _refusal(("allow", READS, REPO + "w?"))


REFS = ["fs:ReadRepository", "fs:ReadBranch", "fs:ListBranches", "fs:ReadCommit", "fs:ListCommits"]
REFS += ["fs:ReadTag", "fs:ListTags"]


def test_the_repository_without_its_objects_translates_to_read_refs() -> None:
    """What lakeFS gives a reader of some keys beside its object statements: the repository,
    its branches, commits and tags. fs:ListObjects comes with it (a listing here shows the keys
    fs:ReadObject allows)."""
    pair = _silt(
        ("allow", [*REFS, "fs:ListObjects"], REPO + "weather"),
        ("allow", [*REFS, "fs:ListObjects"], REPO + "weather/*"),
        ("allow", ["fs:ReadObject"], REPO + "weather/object/raw/*"),
    )
    assert pair == [("allow", ["ReadRefs"], ["weather"]), ("allow", ["ReadObject"], ["weather/raw/*"])]
    assert _silt(("allow", [*REFS, "fs:ListObjects"], REPO + "w*")) == [("allow", ["ReadRefs"], ["w*"])]
    # fs:Read* names fs:ReadObject too: on a repository, that is every key (ReadRepo's).
    assert "'fs:ReadObject' cannot be allowed alone" in _refusal(("allow", ["fs:Read*", "fs:List*"], REPO + "w*"))
    # Whole reads stay ReadRepo, which holds ReadRefs; a Deny of a ref read denies ReadRepo.
    assert _silt(("allow", READS, REPO + "w*")) == [("allow", ["ReadRepo"], ["w*"])]
    assert _silt(("deny", ["fs:ReadBranch"], REPO + "w")) == [("deny", ["ReadRepo"], ["w"])]
    # The repository alone does not reach its branches in lakeFS (`.../w/branch/...`).
    assert "not a whole repository" in _refusal(("allow", REFS, REPO + "w"))
    assert "fs:ListObjects" in _refusal(("allow", ["fs:ListObjects"], REPO + "w*"))


def test_denials_widen_to_whole_repositories() -> None:
    assert _silt(("deny", ["fs:WriteObject"], REPO + "prod/object/secret/*")) == [
        ("deny", ["WriteObject"], ["prod/secret/*"])
    ]
    assert _silt(("deny", ["fs:ReadObject"], REPO + "pr*/object/x")) == [("deny", ["ReadRepo"], ["pr*"])]
    assert _silt(("deny", ["fs:ReadObject"], REPO + "prod/*")) == [("deny", ["ReadRepo"], ["prod"])]
    assert _silt(("deny", ["*"], REPO + "prod")) == [("deny", ["*"], ["prod"])]
    iam = _silt(("deny", ["auth:DeleteUser"], "arn:lakefs:auth:::user/bob"))
    assert iam == [("deny", ["iam:DeleteUser"], ["*"])]
    # GC rules: setting and deleting are both lakeFS's SetGarbageCollectionRules.
    gc = _silt(("deny", ["retention:SetGarbageCollectionRules"], "*"))
    assert gc == [("deny", ["SetGCRules", "DeleteGCRules"], ["*"])]


def test_every_translation_allows_no_more_than_its_lakefs_statement() -> None:
    """For single-action Allow statements over every lakeFS action: whatever is accepted maps to
    Silt actions whose lakeFS equivalents the statement names in full."""
    for action in sorted(LAKEFS_ACTIONS):
        try:
            statements = to_silt(_policy(("allow", [action], "*")))
        except ApiError:
            continue
        for statement in statements:
            for silt in statement.actions:
                if action.startswith("catalog:"):
                    # lakeFS's catalog actions are Silt's own, on the same resources.
                    assert (silt, list(statement.resources)) == (action, ["*"]), (action, silt)
                else:
                    assert EQUIVALENT[silt] <= {action}, (action, silt)


BRANCH_ACTIONS = ["CommitBranch", "RevertBranch", "CreateBranch", "DeleteBranch", "ReadBranch"]


def test_branch_statements_translate_to_branch_actions() -> None:
    """lakeFS checks fs:CreateCommit, fs:RevertBranch, fs:CreateBranch, fs:DeleteBranch and
    fs:ReadBranch (and an import's halves) on a branch's resource: those translate exactly into
    Silt's branch actions on `<repository>@<branch pattern>`; the statement's other actions
    allow or deny nothing there."""
    assert _silt(("allow", ["fs:CreateCommit"], REPO + "w/branch/dev-*")) == [("allow", ["CommitBranch"], ["w@dev-*"])]
    assert _silt(("allow", ["fs:*"], REPO + "w/branch/dev-*")) == [("allow", BRANCH_ACTIONS, ["w@dev-*"])]
    assert _silt(("allow", ["*"], REPO + "w/branch/release-?")) == [("allow", BRANCH_ACTIONS, ["w@release-?"])]
    assert _silt(("allow", READS, REPO + "w/branch/main")) == [("allow", ["ReadBranch"], ["w@main"])]
    reverts = _silt(("allow", ["fs:RevertBranch", "fs:ReadObject", "fs:ListObjects"], REPO + "w/branch/*"))
    assert reverts == [("allow", ["RevertBranch"], ["w@*"])]
    # Denials: exact for the branch actions; a Deny of writing objects there denies WriteBranch,
    # every change to the branch, staged writes included (wider than lakeFS: safe).
    assert _silt(("deny", ["fs:CreateCommit"], REPO + "w/branch/main")) == [("deny", ["CommitBranch"], ["w@main"])]
    assert _silt(("deny", ["fs:*"], REPO + "w/branch/main")) == [("deny", ["WriteBranch", *BRANCH_ACTIONS], ["w@main"])]
    assert _silt(("deny", ["fs:DeleteObject"], REPO + "w/branch/m*")) == [("deny", ["WriteBranch"], ["w@m*"])]
    # Silt's own branch vocabulary is stored as is.
    assert _silt(("allow", ["WriteBranch"], "w@dev-*")) == [("allow", ["WriteBranch"], ["w@dev-*"])]


def test_branch_statements_refused_where_not_exact() -> None:
    # An import's halves alone: lakeFS also asks for the storage and the destination keys; here
    # imports need WriteRepo. Staged writes are never a branch statement's in lakeFS.
    assert "on a branch" in _refusal(("allow", ["fs:WriteObject", "fs:ImportCancel"], REPO + "w/branch/dev"))
    assert "on a branch" in _refusal(("deny", ["fs:ReadObject"], REPO + "w/branch/dev"))
    # A wildcard in the repository could match across `/branch/`: no Allow, a wider Deny.
    assert "repository name without wildcards" in _refusal(("allow", ["fs:CreateCommit"], REPO + "w*/branch/dev"))
    assert _silt(("deny", ["fs:CreateCommit"], REPO + "w*/branch/dev")) == [("deny", ["WriteRepo"], ["w*"])]
    # A branch name has no '/': such a pattern names no branch.
    assert "names no branch" in _refusal(("allow", ["fs:CreateCommit"], REPO + "w/branch/a/b"))
    assert "names no branch" in _refusal(("allow", ["fs:CreateCommit"], REPO + "w/branch/"))
    assert "unknown lakeFS action" in _refusal(("allow", ["fs:Frobnicate"], REPO + "w/branch/dev"))


def test_no_branch_translation_allows_more_than_its_lakefs_statement() -> None:
    """Every single-action Allow on a branch: accepted only as the Silt branch actions whose
    lakeFS action is the one named, never WriteBranch (staged writes) nor a repository action."""
    for action in sorted(LAKEFS_ACTIONS):
        try:
            statements = to_silt(_policy(("allow", [action], REPO + "w/branch/dev-*")))
        except ApiError:
            continue
        for statement in statements:
            assert list(statement.resources) == ["w@dev-*"]
            for silt in statement.actions:
                assert iam_policies.BRANCH_EQUIVALENT[silt] == action, (action, silt)


def test_glob_is_lakefs_star_matching() -> None:
    assert glob("fs:*", "fs:ReadObject") and glob("*Object", "fs:ReadObject") and glob("*", "")
    assert glob("a*b*c", "aXbYc") and not glob("a*b*c", "acb") and not glob("ab*ba", "aba")
    assert not glob("fs:Read*", "fs:ListObjects")


EVERY_PREFIX = ["fs:*", "auth:*", "pr:*", "retention:*", "branches:*", "ci:*", "catalog:*"]


def _variants() -> list[str]:
    """Distinct patterns, each matching some lakeFS action: one letter of it starred."""
    return sorted({x[:i] + "*" + x[i + 1 :] for x in LAKEFS_ACTIONS for i in range(x.index(":") + 1, len(x))})


def _counting_globs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the pattern matching translation does, from a cold cache."""
    calls = [0]

    def counted(pattern: str, value: str) -> bool:
        calls[0] += 1
        return glob(pattern, value)

    iam_policies._named_one.cache_clear()
    monkeypatch.setattr(iam_policies, "glob", counted)
    return calls


def test_the_largest_allowed_policy_matches_each_pattern_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each distinct pattern is matched against lakeFS's actions once, whatever the number of
    statements repeating it (it used to be once per Silt action and statement: ~13 s for such a
    policy, on the event loop)."""
    per_statement = iam_policies.MAX_ACTIONS - len(EVERY_PREFIX)
    count = iam_policies.MAX_POLICY_ACTIONS // iam_policies.MAX_ACTIONS
    variants = _variants()[: per_statement * count]
    statements = [
        ("allow", EVERY_PREFIX + variants[i * per_statement : (i + 1) * per_statement], "*") for i in range(count)
    ]
    policy = _policy(*statements)
    assert sum(len(s.action) for s in policy.statement) == iam_policies.MAX_POLICY_ACTIONS
    calls = _counting_globs(monkeypatch)
    translated = to_silt(policy)
    # ReadRefs is held through ReadRepo, granted too.
    assert {a for s in translated for a in s.actions} == set(EQUIVALENT) - {"ReadRefs"} | {"catalog:*"}
    distinct = {a for s in policy.statement for a in s.action}
    assert 0 < calls[0] <= len(distinct) * len(LAKEFS_ACTIONS)
    # Translating it again matches nothing anew.
    before = calls[0]
    to_silt(policy)
    assert calls[0] == before


@pytest.mark.parametrize(
    ("statements", "says"),
    [
        ([("allow", ["fs:ReadObject"], "*")] * 101, "at most 100 statements"),
        ([("allow", [f"fs:*{i}" for i in range(51)], "*")], "at most 50 actions"),
        ([("allow", ["fs:*"] * 50, "*")] * 21, "at most 1000 actions over all its statements"),
        ([("allow", ["fs:" + "R" * 62], "*")], "1 to 64 characters"),
        ([("allow", ["fs:*R*e*a*d*"], "*")], "at most 4 '*'"),
        ([("allow", ["fs:ReadObject"], "*" * 1025)], "resource must be 1 to 1024 characters"),
    ],
    ids=["statements", "actions", "total-actions", "action-length", "stars", "resource-length"],
)
def test_a_policy_over_the_bounds_is_refused_before_translation(
    monkeypatch: pytest.MonkeyPatch, statements: list[tuple[str, list[str], str]], says: str
) -> None:
    calls = _counting_globs(monkeypatch)
    assert says in _refusal(*statements)
    assert calls[0] == 0


def test_an_over_bounds_policy_is_400_through_the_api(api: Api) -> None:
    policy_id = f"big-{secrets.token_hex(4)}"
    body = {"id": policy_id, "statement": [{"effect": "allow", "action": ["fs:*"] * 51, "resource": "*"}]}
    response = api.request("POST", "/auth/policies", body=json.dumps(body), headers=_admin_json(api))
    assert response.status == 400, response.data
    assert json.loads(response.data) == {"message": "statement 1: at most 50 actions"}
    assert api.request("GET", f"/auth/policies/{policy_id}").status == 404


def _admin_json(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
    headers["Content-Type"] = "application/json"
    return headers


def test_read_back_in_the_sdk_model() -> None:
    stored = pb.Policy(
        id="two",
        statements=[pb.Statement(effect=pb.EFFECT_ALLOW, actions=["ReadRepo"], resources=["a", "b"])],
    )
    stored.creation_date.FromSeconds(1_700_000_000)
    shown = from_silt(stored)
    assert lakefs_sdk.Policy.from_dict(shown.to_dict()) == shown
    assert [(s.action, s.resource) for s in shown.statement] == [(["ReadRepo"], "a"), (["ReadRepo"], "b")]


def test_the_api_and_auth_agree_on_the_acting_header() -> None:
    assert iam_calls.ACTING_USER_HEADER == acting.ACTING_USER_HEADER
    assert iam_calls.REFUSED_ACTING == acting.REFUSED_ACTING


def test_a_lakefs_policy_grants_through_the_api(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    auth = lakefs_sdk.AuthApi(client)
    user_id, policy_id = f"lk-{secrets.token_hex(4)}", f"lk-read-{secrets.token_hex(4)}"
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    body: dict[str, Any] = {
        "id": policy_id,
        "statement": [
            {"effect": "allow", "action": READS, "resource": REPO + repo},
            {"effect": "allow", "action": READS, "resource": REPO + repo + "/*"},
            {"effect": "deny", "action": ["fs:WriteObject"], "resource": REPO + repo + "/object/*"},
        ],
    }
    created = auth.create_policy(lakefs_sdk.Policy.from_dict(body))
    shown = [(s.effect, s.action, s.resource) for s in created.statement]
    assert shown == [("allow", ["ReadRepo"], repo), ("deny", ["WriteObject"], repo + "/*")]
    assert auth.get_policy(policy_id) == created
    auth.attach_policy_to_user(user_id, policy_id)
    issued = auth.create_credentials(user_id)
    user = api.sdk(Credentials(issued.access_key_id, SecretStr(issued.secret_access_key)))
    assert lakefs_sdk.RepositoriesApi(user).get_repository(repo).id == repo
    with pytest.raises(ApiException) as caught:
        lakefs_sdk.BranchesApi(user).create_branch(repo, lakefs_sdk.BranchCreation(name="b", source="main"))
    assert caught.value.status == 403
    assert "CreateBranch" in json.loads(caught.value.body)["message"]
