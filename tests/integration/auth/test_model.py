"""The IAM model on every KV driver, Cassandra included: keys, pagination, cascades, secrets at rest."""

from __future__ import annotations

import uuid

import pytest
from pydantic import SecretStr

from services.auth.model import IamModel
from services.auth.secrets import SecretBox
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.errors import Aborted, AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from silt.kv import Store
from tests.integration.auth.support import ENCRYPT_KEY, remember

READ_ALL = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=["*"])


@pytest.fixture
def iam(store: Store) -> IamModel:
    # Its own partition: the Cassandra leg shares one keyspace across tests.
    return IamModel(store, SecretBox(ENCRYPT_KEY), partition=b"auth-" + uuid.uuid4().hex.encode())


def all_keys(iam: IamModel) -> list[str]:
    return [e.key.decode() for e in iam.kv.scan(iam.partition)]


def test_users_crud_and_key_schema(iam: IamModel) -> None:
    iam.create_user("alice", "Alice")
    assert iam.get_user("alice").description == "Alice"
    assert all_keys(iam) == ["iam/users/alice"]
    with pytest.raises(AlreadyExists):
        iam.create_user("alice")
    iam.delete_user("alice")
    with pytest.raises(NotFound):
        iam.get_user("alice")
    with pytest.raises(NotFound):
        iam.delete_user("alice")


@pytest.mark.parametrize("bad", ["", "a/b", "-x", "x y", "é", "a" * 129])
def test_invalid_ids(iam: IamModel, bad: str) -> None:
    with pytest.raises(InvalidArgument):
        iam.create_user(bad)
    with pytest.raises(InvalidArgument):
        iam.create_group(bad)


def test_listing_follows_key_order_with_pagination(iam: IamModel) -> None:
    names = ["carol", "alice", "bob", "dave", "erin", "frank", "al"]
    for name in names:
        iam.create_user(name)
    pages, after = [], ""
    while True:
        users, more = iam.list_users(after, 3)
        pages.append([u.id for u in users])
        if not more:
            break
        after = users[-1].id
    assert pages == [["al", "alice", "bob"], ["carol", "dave", "erin"], ["frank"]]
    with pytest.raises(InvalidArgument):
        iam.list_users("", -1)


def test_memberships_both_ways(iam: IamModel) -> None:
    for user in ("u1", "u2", "u3"):
        iam.create_user(user)
    for group in ("g1", "g2"):
        iam.create_group(group)
    iam.add_member("g1", "u1")
    iam.add_member("g1", "u3")
    iam.add_member("g2", "u1")
    iam.add_member("g1", "u1")  # idempotent
    assert [g.id for g in iam.list_user_groups("u1")[0]] == ["g1", "g2"]
    assert iam.list_user_groups("u1", "g1")[0][0].id == "g2"
    first, more = iam.list_members("g1", "", 1)
    assert ([u.id for u in first], more) == (["u1"], True)
    rest, more = iam.list_members("g1", "u1", 1)
    assert ([u.id for u in rest], more) == (["u3"], False)
    assert "iam/user_groups/u1/g1" in all_keys(iam)
    iam.remove_member("g1", "u1")
    assert [u.id for u in iam.list_members("g1")[0]] == ["u3"]
    with pytest.raises(NotFound):
        iam.remove_member("g1", "u1")


def test_relations_need_both_ends(iam: IamModel) -> None:
    iam.create_user("u")
    with pytest.raises(NotFound, match="group"):
        iam.add_member("nope", "u")
    with pytest.raises(NotFound, match="policy"):
        iam.attach_policy("nope", user_id="u")
    with pytest.raises(InvalidArgument):
        iam.attach_policy("p", user_id="u", group_id="g")
    assert all_keys(iam) == ["iam/users/u"]


def test_deletes_remove_relations_first_and_leave_nothing_dangling(iam: IamModel) -> None:
    iam.create_user("u")
    iam.create_user("keep")
    iam.create_group("g")
    iam.create_policy("p", [READ_ALL])
    iam.add_member("g", "u")
    iam.add_member("g", "keep")
    iam.attach_policy("p", user_id="u")
    iam.attach_policy("p", group_id="g")
    iam.create_credentials("u")
    kept = iam.create_credentials("keep")

    iam.delete_user("u")
    assert not [k for k in all_keys(iam) if "/u/" in k or k.endswith("/u")]
    assert [k for k in all_keys(iam) if k.startswith("iam/credentials/")] == [
        f"iam/credentials/{kept.credential.access_key_id}"
    ]
    iam.delete_policy("p")
    assert not [k for k in all_keys(iam) if "policies" in k]
    iam.delete_group("g")
    assert not [k for k in all_keys(iam) if "groups" in k]
    assert iam.list_user_groups("keep") == ([], False)


def test_recreated_entities_inherit_nothing(iam: IamModel) -> None:
    iam.create_user("u")
    iam.create_group("g")
    iam.create_policy("p", [READ_ALL])
    # Leftovers of an interrupted delete: relations whose entity is gone.
    iam.add_member("g", "u")
    iam.attach_policy("p", group_id="g")
    iam.kv.delete(iam.partition, b"iam/users/u")
    iam.kv.delete(iam.partition, b"iam/groups/g")
    iam.create_user("u")
    assert iam.list_user_groups("u") == ([], False)
    iam.create_group("g")
    assert iam.list_group_policies("g") == ([], False)


def test_effective_policies(iam: IamModel) -> None:
    iam.create_user("u")
    for group in ("g1", "g2"):
        iam.create_group(group)
        iam.add_member(group, "u")
    for policy in ("direct", "shared", "via-g2"):
        iam.create_policy(policy, [READ_ALL])
    iam.attach_policy("direct", user_id="u")
    iam.attach_policy("shared", user_id="u")
    iam.attach_policy("shared", group_id="g1")
    iam.attach_policy("via-g2", group_id="g2")
    assert [p.id for p in iam.list_user_policies("u")[0]] == ["direct", "shared"]
    assert [p.id for p in iam.effective_policies("u")] == ["direct", "shared", "via-g2"]
    page, more = iam.list_user_policies("u", effective=True, after="direct", amount=1)
    assert ([p.id for p in page], more) == (["shared"], True)
    iam.detach_policy("via-g2", group_id="g2")
    assert [p.id for p in iam.effective_policies("u")] == ["direct", "shared"]


def test_invalid_policies_are_refused(iam: IamModel) -> None:
    bad_statements = [
        [],
        [pb.Statement(actions=[a.READ_REPO], resources=["*"])],
        [pb.Statement(effect=pb.EFFECT_ALLOW, actions=["ReadRepos"], resources=["*"])],
        [pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=[])],
        [pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=["has space"])],
    ]
    for statements in bad_statements:
        with pytest.raises(InvalidArgument):
            iam.create_policy("p", statements)
    assert all_keys(iam) == []


def test_credentials_are_aws_shaped_and_encrypted_at_rest(iam: IamModel) -> None:
    iam.create_user("u")
    issued = iam.create_credentials("u")
    secret = remember(issued.secret.get_secret_value())
    key_id = issued.credential.access_key_id
    assert len(key_id) == 20 and key_id.startswith("AKIA") and key_id.isupper()
    assert len(secret) == 40
    assert not issued.credential.encrypted_secret, "the sealed secret never leaves the model"
    for entry in iam.kv.scan(iam.partition):
        assert secret.encode() not in entry.value
        assert secret.encode() not in entry.key
    owner = iam.key_owner(key_id)
    assert owner.user_id == "u"
    assert owner.secret.get_secret_value() == secret
    assert secret not in repr(owner)
    listed, _ = iam.list_credentials("u")
    assert [c.access_key_id for c in listed] == [key_id]
    assert not listed[0].encrypted_secret

    other_box = IamModel(iam.kv, SecretBox(SecretStr("AVv2ep7lS3/OcLJY9IN0wzsD2f103ZwWkMcXz3CAHUo=")), iam.partition)
    with pytest.raises(FailedPrecondition, match="encrypt_secret_key"):
        other_box.key_owner(key_id)

    with pytest.raises(NotFound):
        iam.delete_credentials("someone-else", key_id)
    iam.delete_credentials("u", key_id)
    with pytest.raises(NotFound):
        iam.key_owner(key_id)
    assert all_keys(iam) == ["iam/users/u"]


def test_keys_of_a_vanished_user_do_not_authenticate(iam: IamModel) -> None:
    iam.create_user("u")
    key_id = iam.create_credentials("u").credential.access_key_id
    iam.kv.delete(iam.partition, b"iam/users/u")  # as if a delete were interrupted
    with pytest.raises(NotFound):
        iam.key_owner(key_id)


def test_a_policy_is_updated_in_place(iam: IamModel) -> None:
    created = iam.create_policy("p", [READ_ALL])
    iam.create_user("alice")
    iam.attach_policy("p", user_id="alice")
    write = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.WRITE_REPO], resources=["r-*"])
    updated = iam.update_policy("p", [write], "writers")
    assert list(updated.statements) == [write] and updated.creation_date == created.creation_date
    assert [p.id for p in iam.effective_policies("alice")] == ["p"]
    assert list(iam.get_policy("p").statements) == [write]
    with pytest.raises(NotFound):
        iam.update_policy("missing", [write])
    with pytest.raises(InvalidArgument):
        iam.update_policy("p", [pb.Statement(effect=pb.EFFECT_ALLOW, actions=["NoSuch"], resources=["*"])])


def test_a_policy_update_is_conditional_on_the_version_read(iam: IamModel) -> None:
    iam.create_policy("p", [READ_ALL], "readers")
    iam.create_group("g")
    iam.attach_policy("p", group_id="g")
    iam.create_user("u")
    iam.attach_policy("p", user_id="u")
    assert iam.policy_principals("p") == (["u"], ["g"])
    read = iam.read_policy("p")
    deny = pb.Statement(effect=pb.EFFECT_DENY, actions=[a.WRITE_REPO], resources=["*"])
    assert iam.update_policy("p", [READ_ALL, deny]).description == "readers"  # kept when not given
    with pytest.raises(Aborted):
        iam.update_policy("p", [READ_ALL], read=read)
    assert list(iam.get_policy("p").statements) == [READ_ALL, deny]


def test_revoking_sessions_raises_the_users_epoch_only(iam: IamModel) -> None:
    iam.create_user("alice", "Alice")
    iam.create_user("bob")
    assert iam.get_user("alice").session_epoch == 0
    assert iam.revoke_sessions("alice") == 1
    assert iam.revoke_sessions("alice") == 2
    alice = iam.get_user("alice")
    assert (alice.session_epoch, alice.description) == (2, "Alice")
    assert iam.get_user("bob").session_epoch == 0
    with pytest.raises(NotFound):
        iam.revoke_sessions("nobody")
