"""`silt gc expire` against the running stack: a read through the S3 gateway keeps an object
alive, the untouched one is expired by the system user, and the run uses svc-gc's key.

Objects are aged by staging their entries with a modification time weeks back (graveler
keeps the time it is given); the read is a real GET whose history event the gateway records.
"""

from __future__ import annotations

import json
import time

import boto3
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.launcher import SERVICE_KEYS_FILE, Stack
from tests.e2e.conftest import SHORT_JVM_ENV, Silt, graveler_stub
from tests.support.wait import wait_until

REPO = "e2e-last-access"


@pytest.mark.spark  # a Spark job in a JVM of its own
def test_expire_keeps_what_was_read(stack: Stack, silt: Silt) -> None:
    cli = Silt({**silt.env, **SHORT_JVM_ENV, "SILT_CONFIG": str(stack.config_path)}, silt.cwd)
    cli("repo", "create", REPO)
    s3 = boto3.client(
        "s3",
        endpoint_url=stack.endpoints["gateway"],
        aws_access_key_id=cli.env["SILT_ACCESS_KEY_ID"],
        aws_secret_access_key=cli.env["SILT_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    graveler = graveler_stub(stack)
    weeks_ago = Timestamp()
    weeks_ago.FromSeconds(int(time.time()) - 40 * 86_400)
    # Uploaded on another branch (a write through the gateway is a write event on its branch:
    # the object would be fresh), then staged on main as if written weeks ago.
    cli("branch", "create", f"silt://{REPO}/ingest", "--source", "main")
    for key in ("logs/untouched", "logs/read"):
        s3.put_object(Bucket=REPO, Key=f"ingest/{key}", Body=key.encode())
        entry = graveler.StatEntry(api.StatEntryRequest(repository=REPO, ref="ingest", key=key), timeout=10).entry
        entry.last_modified.CopyFrom(weeks_ago)
        graveler.StageEntry(api.StageEntryRequest(repository=REPO, branch="main", key=key, entry=entry), timeout=10)
    cli("commit", f"silt://{REPO}/main", "-m", "old logs")
    assert s3.get_object(Bucket=REPO, Key="main/logs/read")["Body"].read() == b"logs/read"

    def read_recorded() -> bool:
        events = graveler.ListEvents(ev.ListEventsRequest(repository=REPO, branch="main"), timeout=10).events
        return any(e.path == "logs/read" and e.type == ev.READ for e in events)

    wait_until(read_recorded, 15, "the gateway's read event in graveler's history")
    cli("gc", "rules", "set", REPO, "--default-days", "0", "--last-access", "main=30:logs/")
    gc_key = json.loads((stack.data_dir / SERVICE_KEYS_FILE).read_text())["gc"]
    gc_user = cli.as_user(gc_key["access_key_id"], gc_key["secret_access_key"])

    dry = gc_user("gc", "expire", REPO, "main", "--dry-run", "--json").json()
    assert dry["paths"] == ["logs/untouched"] and dry["commits"] == []
    done = gc_user("gc", "expire", REPO, "main", "--json").json()
    assert done["rules"][0]["expired"] == 1 and len(done["commits"]) == 1
    head = cli("log", f"silt://{REPO}/main", "--limit", "1", "--json").json()[0]
    assert head["id"] == done["commits"][0] and head["committer"] == "silt:system"
    assert cli("fs", "stat", f"silt://{REPO}/main/logs/untouched", ok=False).code != 0
    assert s3.get_object(Bucket=REPO, Key="main/logs/read")["Body"].read() == b"logs/read"
