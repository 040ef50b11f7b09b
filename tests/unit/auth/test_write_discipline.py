"""The auth model never writes a key both by compare-and-set and by plain writes (the rule and
the recording store: tests/unit/graveler/test_write_discipline.py)."""

from __future__ import annotations

from pydantic import SecretStr

from services.auth.model import IamModel
from services.auth.secrets import SecretBox
from silt.auth.v1 import model_pb2 as iam
from silt.kv.mem import MemStore
from tests.unit.graveler.test_write_discipline import RecordingStore

KEY = SecretStr("uk6YKhHOADCnfgXyj3u/u6rNVni5ZyffU0ubSHfHXJ0=")  # `openssl rand -base64 32`


def test_auth_model_never_mixes_plain_writes_and_lwts_on_a_key() -> None:
    recorded = RecordingStore(MemStore())
    model = IamModel(recorded, SecretBox(KEY))
    statement = iam.Statement(effect=iam.EFFECT_ALLOW, actions=["*"], resources=["*"])
    for _ in range(2):  # again after deletion: ids are reused
        model.create_user("alice")
        model.create_group("readers")
        model.create_policy("read", [statement])
        model.put_preset_policy("read", [statement], "changed")
        model.add_member("readers", "alice")
        model.attach_policy("read", user_id="alice")
        model.attach_policy("read", group_id="readers")
        issued = model.create_credentials("alice")
        model.create_credentials("alice")
        model.delete_credentials("alice", issued.credential.access_key_id)
        model.detach_policy("read", group_id="readers")
        model.remove_member("readers", "alice")
        model.delete_policy("read")
        model.delete_group("readers")
        model.delete_user("alice")
    model.mark_setup_done("alice")
    mixed = recorded.mixed()
    assert not mixed, "\n".join(mixed)
