"""First-run setup: what it creates, that a second run changes nothing, and its command line."""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.auth import keys
from services.auth import model as model_module
from services.auth import setup as auth_setup
from services.auth.model import IamModel
from services.auth.policies import compile_statements, is_allowed
from services.auth.secrets import SecretBox
from services.auth.setup import ADMINS, ANALYSTS, DEVELOPERS, SERVICES, SetupResult
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.errors import AlreadyExists, NotFound
from silt.kv import Store
from tests.integration.auth.support import ENCRYPT_KEY, remember

# Not named `setup`: pytest would take a module-level `setup` for an xunit fixture.
run_setup = auth_setup.setup


@pytest.fixture
def iam(store: Store) -> IamModel:
    return IamModel(store, SecretBox(ENCRYPT_KEY), partition=b"auth-" + uuid.uuid4().hex.encode())


def snapshot(iam: IamModel) -> list[tuple[bytes, bytes]]:
    return [(e.key, e.value) for e in iam.kv.scan(iam.partition)]


def test_setup_creates_presets_admin_and_services(iam: IamModel) -> None:
    result = run_setup(iam, services=["graveler"])
    assert result is not None
    remember(result.admin.secret_access_key)
    remember(result.services["graveler"].secret_access_key)
    assert [g.id for g in iam.list_groups()[0]] == sorted([ADMINS, ANALYSTS, DEVELOPERS, SERVICES])
    assert [g.id for g in iam.list_user_groups("admin")[0]] == [ADMINS]
    assert [g.id for g in iam.list_user_groups("svc-graveler")[0]] == [SERVICES]
    owner = iam.key_owner(result.admin.access_key_id)
    assert owner.user_id == "admin"
    assert owner.secret.get_secret_value() == result.admin.secret_access_key
    assert result.admin.secret_access_key not in repr(result)

    def may(user: str, action: str, resource: str = "any-repo") -> bool:
        return is_allowed(compile_statements(iam.effective_policies(user)), action, resource)

    assert all(
        may("admin", action) for action in a.ALL_ACTIONS if action not in (*a.LITERAL_ONLY_ACTIONS, *a.BRANCH_ACTIONS)
    )
    assert all(may("admin", action, a.branch_resource("any-repo", "main")) for action in a.BRANCH_ACTIONS)
    # FullAccess's `*` does not allow verifying signatures: only the verifier service users may.
    assert not may("admin", a.VERIFY_SIGNATURE, a.audience_resource("graveler"))
    assert may("svc-graveler", a.AUTHORIZE) and not may("svc-graveler", a.CREATE_USER)
    assert may("svc-graveler", a.VERIFY_SIGNATURE, a.audience_resource("graveler"))


def test_only_the_rest_api_may_act_for_users(iam: IamModel) -> None:
    """Naming the author of a review is the REST API's alone: not admins' (`*`), not other services'."""
    result = run_setup(iam, services=["graveler", "gateway", "api"])
    assert result is not None
    for key in (result.admin, *result.services.values()):
        remember(key.secret_access_key)
    holders = {
        user
        for user in ("admin", "svc-graveler", "svc-gateway", "svc-api")
        if _may(iam, user, a.ACT_FOR_USER, a.user_resource("anyone"))
    }
    assert holders == {"svc-api"}


def test_each_service_verifies_signatures_for_itself_only(iam: IamModel) -> None:
    """What a service learns by verifying (signing keys) acts toward its own audience only."""
    result = run_setup(iam, services=["graveler", "compactor", "gateway", "gc"])
    assert result is not None
    for key in (result.admin, *result.services.values()):
        remember(key.secret_access_key)
    audiences = ("auth", "graveler", "compactor", a.S3_AUDIENCE)
    verifies = {
        service: {x for x in audiences if _may(iam, f"svc-{service}", a.VERIFY_SIGNATURE, a.audience_resource(x))}
        for service in ("graveler", "compactor", "gateway", "gc")
    }
    assert verifies == {"graveler": {"graveler"}, "compactor": {"compactor"}, "gateway": {a.S3_AUDIENCE}, "gc": set()}


def test_an_upgrade_replaces_the_secret_reading_service_policy(iam: IamModel) -> None:
    """Installations set up before signatures were verified in auth: their Services policy names
    auth:ReadSecret and no service user verifies anything. A later setup run fixes both, and the
    stored old action never broke a decision meanwhile."""
    first = run_setup(iam, services=["graveler", "gateway"])
    assert first is not None
    for key in (first.admin, *first.services.values()):
        remember(key.secret_access_key)
    old = pb.Statement(
        effect=pb.EFFECT_ALLOW, actions=[a.AUTHORIZE, "auth:ReadSecret", a.READ_REPO, a.WRITE_REPO], resources=["*"]
    )
    # Written as the older version stored it: today's validation refuses the retired action.
    stored = pb.Policy(id="ServiceAccess", description="an older version's", statements=[old])
    iam.kv.set(iam.partition, keys.key("policies", "ServiceAccess"), stored.SerializeToString())
    assert "auth:ReadSecret" in iam.get_policy("ServiceAccess").statements[0].actions
    for service in ("graveler", "gateway"):
        policy_id = auth_setup.VERIFIER_POLICIES[service][0]
        iam.detach_policy(policy_id, user_id=f"svc-{service}")
        iam.delete_policy(policy_id)
    assert _may(iam, "svc-graveler", a.WRITE_REPO)
    assert not _may(iam, "svc-graveler", a.VERIFY_SIGNATURE, a.audience_resource("graveler"))

    assert run_setup(iam, services=["graveler", "gateway"]) is None
    assert [list(s.actions) for s in iam.get_policy("ServiceAccess").statements] == [
        [a.AUTHORIZE, a.READ_REPO, a.WRITE_REPO]
    ]
    assert _may(iam, "svc-graveler", a.VERIFY_SIGNATURE, a.audience_resource("graveler"))
    assert _may(iam, "svc-gateway", a.VERIFY_SIGNATURE, a.audience_resource(a.S3_AUDIENCE))
    assert not _may(iam, "svc-gateway", a.VERIFY_SIGNATURE, a.audience_resource("graveler"))


def test_second_run_changes_nothing(iam: IamModel) -> None:
    first = run_setup(iam, services=["graveler"])
    assert first is not None
    remember(first.admin.secret_access_key)
    remember(first.services["graveler"].secret_access_key)
    before = snapshot(iam)
    shown: list[SetupResult] = []
    assert run_setup(iam, services=["graveler"], announce=shown.append) is None
    assert shown == []
    assert snapshot(iam) == before


def _may(iam: IamModel, user: str, action: str, resource: str = "any-repo") -> bool:
    return is_allowed(compile_statements(iam.effective_policies(user)), action, resource)


def test_gc_runs_as_a_user_that_may_only_run_gc(iam: IamModel) -> None:
    result = run_setup(iam, services=["gc"])
    assert result is not None
    remember(result.admin.secret_access_key)
    key = result.services["gc"]
    remember(key.secret_access_key)
    assert key.user_id == "svc-gc" and iam.key_owner(key.access_key_id).user_id == "svc-gc"
    assert iam.list_user_groups("svc-gc")[0] == []
    held = {action for action in a.ALL_ACTIONS if _may(iam, "svc-gc", action)}
    assert held == {a.READ_REPO, a.READ_REFS, a.READ_OBJECT, a.PREPARE_GC}  # ReadRepo reads every key
    assert _may(iam, "admin", a.PREPARE_GC)


def test_a_later_run_brings_an_older_setup_up_to_date(iam: IamModel) -> None:
    """An installation set up by an older version: presets as they were then, no svc-gc."""
    first = run_setup(iam, services=["graveler"])
    assert first is not None
    remember(first.admin.secret_access_key)
    remember(first.services["graveler"].secret_access_key)
    assert "svc-gc" not in {u.id for u in iam.list_users()[0]}
    iam.delete_policy(auth_setup.GC_POLICY)
    old = [pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO, a.WRITE_REPO, a.CREATE_REPO], resources=["*"])]
    iam.put_preset_policy("RepoReadWriteAll", old, "an older version's")
    assert _may(iam, "admin", a.PREPARE_GC)

    shown: list[SetupResult] = []
    assert run_setup(iam, services=["graveler", "gc"], announce=shown.append) is None
    assert shown == []  # no key is issued after the first run
    assert [c.access_key_id for c in iam.list_credentials("admin")[0]] == [first.admin.access_key_id]
    assert auth_setup.keyless_service_users(iam, ["graveler", "gc"]) == ["svc-gc"]
    held = {action for action in a.ALL_ACTIONS if _may(iam, "svc-gc", action)}
    assert held == {a.READ_REPO, a.READ_REFS, a.READ_OBJECT, a.PREPARE_GC}
    statements = iam.get_policy("RepoReadWriteAll").statements
    assert [list(s.actions) for s in statements] == [[a.READ_REPO, a.WRITE_REPO]]
    developer = "dev-" + uuid.uuid4().hex[:6]
    iam.create_user(developer)
    iam.add_member(DEVELOPERS, developer)
    assert not any(_may(iam, developer, action) for action in a.REPO_ADMIN_ACTIONS)
    assert not _may(iam, developer, a.CREATE_REPO)
    # And a run with nothing to change writes nothing.
    before = snapshot(iam)
    assert run_setup(iam, services=["graveler", "gc"]) is None
    assert snapshot(iam) == before


def test_interrupted_setup_is_completed_by_running_again(iam: IamModel) -> None:
    def crash(result: SetupResult) -> None:
        remember(result.admin.secret_access_key)
        raise RuntimeError("power cut before the keys were shown")

    with pytest.raises(RuntimeError):
        run_setup(iam, services=[], announce=crash)
    assert iam.setup_record() is None
    unseen = iam.list_credentials("admin")[0][0].access_key_id
    result = run_setup(iam, services=[])
    assert result is not None
    remember(result.admin.secret_access_key)
    # The keys nobody saw are gone; the shown ones work.
    assert [c.access_key_id for c in iam.list_credentials("admin")[0]] == [result.admin.access_key_id]
    assert result.admin.access_key_id != unseen
    assert iam.setup_record() is not None


def test_command_line_prints_secrets_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SILT_DATABASE_TYPE", "local")
    monkeypatch.setenv("SILT_DATABASE_LOCAL_PATH", str(tmp_path / "kv.db"))
    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", ENCRYPT_KEY.get_secret_value())
    monkeypatch.delenv("SILT_CONFIG", raising=False)

    assert auth_setup.main(["--json", "--service", "graveler"]) == 0
    printed = json.loads(capsys.readouterr().out)
    secret = remember(printed["admin"]["secret_access_key"])
    remember(printed["services"]["graveler"]["secret_access_key"])
    assert printed["admin"]["user_id"] == "admin"
    assert len(printed["admin"]["access_key_id"]) == 20 and len(secret) == 40

    assert auth_setup.main([]) == 0
    again = capsys.readouterr()
    assert again.out == ""
    assert "set up already" in again.err
    assert secret not in again.err


def test_command_line_needs_an_encryption_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SILT_DATABASE_TYPE", "local")
    monkeypatch.setenv("SILT_DATABASE_LOCAL_PATH", str(tmp_path / "kv.db"))
    monkeypatch.delenv("SILT_AUTH_ENCRYPT_SECRET_KEY", raising=False)
    monkeypatch.delenv("SILT_CONFIG", raising=False)
    assert auth_setup.main([]) == 2
    assert "auth.encrypt_secret_key must be set" in capsys.readouterr().err


# --- the admin left to the REST API (setup --defer-admin, POST /api/v1/setup_lakefs) ---------


def test_setup_without_admin_issues_service_keys_only_and_once(iam: IamModel) -> None:
    result = auth_setup.setup_without_admin(iam, services=["graveler"])
    assert result is not None
    remember(result.services["graveler"].secret_access_key)
    assert iam.key_owner(result.services["graveler"].access_key_id).user_id == "svc-graveler"
    assert iam.setup_record() is None and iam.list_members(ADMINS)[0] == []
    before = snapshot(iam)
    assert auth_setup.setup_without_admin(iam, services=["graveler"]) is None
    assert snapshot(iam) == before  # no key issued again: the running services keep theirs


def test_setup_after_setup_without_admin_creates_only_the_admin(iam: IamModel) -> None:
    services = auth_setup.setup_without_admin(iam, services=["graveler"])
    assert services is not None
    remember(services.services["graveler"].secret_access_key)
    result = run_setup(iam, "boss", services=["graveler"])
    assert result is not None and result.services == {}
    remember(result.admin.secret_access_key)
    assert iam.key_owner(result.admin.access_key_id).user_id == "boss"
    assert [u.id for u in iam.list_members(ADMINS)[0]] == ["boss"]
    assert iam.key_owner(services.services["graveler"].access_key_id).user_id == "svc-graveler"
    record = iam.setup_record()
    assert record is not None and record.admin_user_id == "boss"
    assert run_setup(iam, "other", services=["graveler"]) is None
    with pytest.raises(AlreadyExists):
        iam.create_first_admin("late", ADMINS)
    assert [u.id for u in iam.list_members(ADMINS)[0]] == ["boss"]
    with pytest.raises(NotFound):
        iam.get_user("late")


def test_racing_first_admins_make_exactly_one(iam: IamModel) -> None:
    assert auth_setup.setup_without_admin(iam, services=[]) is not None
    names = [f"racer-{i}" for i in range(8)]
    barrier = threading.Barrier(len(names))

    def attempt(name: str) -> str | None:
        barrier.wait()
        try:
            _, issued = iam.create_first_admin(name, ADMINS)
        except AlreadyExists:
            return None
        remember(issued.secret.get_secret_value())
        return name

    with ThreadPoolExecutor(len(names)) as pool:
        winners = [w for w in pool.map(attempt, names) if w is not None]
    assert len(winners) == 1
    assert [u.id for u in iam.list_members(ADMINS)[0]] == winners
    assert [u.id for u in iam.list_users()[0] if u.id.startswith("racer-")] == winners
    record = iam.setup_record()
    assert record is not None and record.admin_user_id == winners[0]


def test_command_line_defers_the_admin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SILT_DATABASE_TYPE", "local")
    monkeypatch.setenv("SILT_DATABASE_LOCAL_PATH", str(tmp_path / "kv.db"))
    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", ENCRYPT_KEY.get_secret_value())
    monkeypatch.delenv("SILT_CONFIG", raising=False)

    assert auth_setup.main(["--json", "--defer-admin", "--service", "api"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["admin"] is None and set(printed["services"]) == {"api"}
    remember(printed["services"]["api"]["secret_access_key"])
    assert auth_setup.main(["--defer-admin", "--service", "api"]) == 0
    again = capsys.readouterr()
    assert again.out == "" and "without an admin" in again.err
    assert auth_setup.main(["--json", "--service", "api"]) == 0
    admin = json.loads(capsys.readouterr().out)
    assert admin["admin"]["user_id"] == "admin" and admin["services"] == {}
    remember(admin["admin"]["secret_access_key"])
    assert auth_setup.main(["--service", "api"]) == 0
    assert "set up already (admin user 'admin')" in capsys.readouterr().err


# --- a first-run setup that died half way is retryable --------------------------------------


def _dies_at_the_key(iam: IamModel, monkeypatch: pytest.MonkeyPatch, after_issuing: bool) -> None:
    """The next create_credentials dies (auth stopped): before issuing the key, or after it was
    issued and before anyone saw it."""
    issue = iam.create_credentials

    def dying(user_id: str) -> object:
        monkeypatch.setattr(iam, "create_credentials", issue)
        if after_issuing:
            remember(issue(user_id).secret.get_secret_value())
        raise RuntimeError("auth stopped")

    monkeypatch.setattr(iam, "create_credentials", dying)


@pytest.mark.parametrize("after_issuing", [False, True])
def test_a_setup_that_died_before_showing_the_key_is_finished_by_the_next(
    iam: IamModel, monkeypatch: pytest.MonkeyPatch, after_issuing: bool
) -> None:
    assert auth_setup.setup_without_admin(iam, services=[]) is not None
    _dies_at_the_key(iam, monkeypatch, after_issuing)
    with pytest.raises(RuntimeError):
        iam.create_first_admin("boss", ADMINS)
    assert iam.setup_record() is None  # not "set up": the admin has no key anyone saw
    # Still young: it may be a setup under way, which no one else may finish, naming boss or not.
    with pytest.raises(AlreadyExists, match="under way"):
        iam.create_first_admin("boss", ADMINS)
    monkeypatch.setattr(model_module, "CLAIM_SECONDS", 0.0)
    user, issued = iam.create_first_admin("boss", ADMINS)
    remember(issued.secret.get_secret_value())
    assert user.id == "boss" and iam.key_owner(issued.credential.access_key_id).user_id == "boss"
    sealed = iam._credential(issued.credential.access_key_id).encrypted_secret
    opened = iam.box.open(issued.credential.access_key_id, sealed)
    assert opened.get_secret_value() == issued.secret.get_secret_value()  # the secret shown is the key's
    # Only the key shown stands; the admin is the one admin; setup is done, once.
    assert [c.access_key_id for c in iam.list_credentials("boss")[0]] == [issued.credential.access_key_id]
    assert [u.id for u in iam.list_members(ADMINS)[0]] == ["boss"]
    record = iam.setup_record()
    assert record is not None and record.admin_user_id == "boss"
    with pytest.raises(AlreadyExists):
        iam.create_first_admin("boss", ADMINS)


def test_a_died_setup_of_another_user_is_taken_over_only_once_abandoned(
    iam: IamModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert auth_setup.setup_without_admin(iam, services=[]) is not None
    _dies_at_the_key(iam, monkeypatch, after_issuing=True)
    with pytest.raises(RuntimeError):
        iam.create_first_admin("boss", ADMINS)
    # Still young: it may be a setup under way, not one that died.
    with pytest.raises(AlreadyExists, match="under way"):
        iam.create_first_admin("chief", ADMINS)
    monkeypatch.setattr(model_module, "CLAIM_SECONDS", 0.0)
    user, issued = iam.create_first_admin("chief", ADMINS)
    remember(issued.secret.get_secret_value())
    assert user.id == "chief" and iam.key_owner(issued.credential.access_key_id).user_id == "chief"
    assert [u.id for u in iam.list_members(ADMINS)[0]] == ["chief"]
    with pytest.raises(NotFound):
        iam.get_user("boss")  # the abandoned claim's user, whose key no one saw
    record = iam.setup_record()
    assert record is not None and record.admin_user_id == "chief"


def test_a_racer_naming_the_claimed_user_neither_finishes_nor_spoils_a_setup_under_way(
    iam: IamModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second setup naming the same user, sent while the first is between its claim and its
    key, is refused: it takes no key, and the first caller's key stands."""
    assert auth_setup.setup_without_admin(iam, services=[]) is not None
    issue = iam.create_credentials
    raced: list[BaseException | tuple[pb.User, object]] = []

    def racing(user_id: str) -> object:
        monkeypatch.setattr(iam, "create_credentials", issue)
        try:
            raced.append(iam.create_first_admin("boss", ADMINS))
        except AlreadyExists as exc:
            raced.append(exc)
        return issue(user_id)

    monkeypatch.setattr(iam, "create_credentials", racing)
    user, issued = iam.create_first_admin("boss", ADMINS)
    remember(issued.secret.get_secret_value())
    assert user.id == "boss"
    assert len(raced) == 1 and isinstance(raced[0], AlreadyExists) and "under way" in str(raced[0])
    assert [c.access_key_id for c in iam.list_credentials("boss")[0]] == [issued.credential.access_key_id]
    assert iam.key_owner(issued.credential.access_key_id).user_id == "boss"
    record = iam.setup_record()
    assert record is not None and record.admin_user_id == "boss"
