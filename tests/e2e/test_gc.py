"""`silt gc run` against the running stack: rules, a dry run, a run, and the bytes left behind.

Object bytes go through the S3 gateway; `silt gc run` submits the GC job as its own process
(python -m jobs.gc.job, on a local Spark of its own), as the CronJob runs it. The admin sets
the rules; the runs use the key of svc-gc, the non-admin user auth setup creates for scheduled
GC runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import boto3
import pytest

from silt.launcher import SERVICE_KEYS_FILE, Stack
from tests.e2e.conftest import SHORT_JVM_ENV, Silt

REPO = "e2e-gc"


@pytest.mark.spark  # a Spark job in a JVM of its own
def test_gc_rules_and_run(stack: Stack, silt: Silt) -> None:
    cli = Silt({**silt.env, **SHORT_JVM_ENV, "SILT_CONFIG": str(stack.config_path)}, silt.cwd)
    cli("repo", "create", REPO)
    s3 = boto3.client(
        "s3",
        endpoint_url=stack.endpoints["gateway"],
        aws_access_key_id=cli.env["SILT_ACCESS_KEY_ID"],
        aws_secret_access_key=cli.env["SILT_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    s3.put_object(Bucket=REPO, Key="main/t/a", Body=b"version 1")
    cli("commit", f"silt://{REPO}/main", "-m", "one")
    s3.put_object(Bucket=REPO, Key="main/t/a", Body=b"version 2")
    cli("commit", f"silt://{REPO}/main", "-m", "two")
    s3.put_object(Bucket=REPO, Key="main/t/b", Body=b"staged")
    old = cli("fs", "stat", f"silt://{REPO}/main~1/t/a", "--json").json()["physical_address"]
    current = cli("fs", "stat", f"silt://{REPO}/main/t/a", "--json").json()["physical_address"]

    refused = cli("gc", "run", REPO, "--grace", "0", "--unsafe-short-grace", ok=False)
    assert refused.code != 0 and "no GC rules" in refused.err
    cli("gc", "rules", "set", REPO, "--default-days", "0", "--branch", "main=0")
    shown = cli("gc", "rules", "show", REPO, "--json").json()
    assert shown["is_set"] and shown["rules"]["branch_retention_days"] == {"main": 0}

    gc_key = json.loads((stack.data_dir / SERVICE_KEYS_FILE).read_text())["gc"]
    assert gc_key["user_id"] == "svc-gc"
    gc_user = cli.as_user(gc_key["access_key_id"], gc_key["secret_access_key"])
    # It runs GC, and administers nothing else: rules stay the admin's.
    refused = gc_user("gc", "rules", "set", REPO, "--default-days", "7", ok=False)
    assert refused.code == 6 and "SetGCRules" in refused.err, refused

    root = Path(os.path.expanduser(stack.config.blockstore.local.path)) / REPO  # type: ignore[union-attr]
    dry = gc_user("gc", "run", REPO, "--grace", "0", "--unsafe-short-grace", "--dry-run", "--json").json()
    assert dry["objects"] == {"expired-commit": 1, "unreferenced": 0} and dry["deleted"] == 0
    assert (root / old).is_file()

    done = gc_user("gc", "run", REPO, "--grace", "0", "--unsafe-short-grace")
    assert "expired-commit" in done.out and "deleted: 1" in done.out
    assert not (root / old).is_file() and (root / current).is_file()
    assert s3.get_object(Bucket=REPO, Key="main/t/a")["Body"].read() == b"version 2"
    assert s3.get_object(Bucket=REPO, Key="main/t/b")["Body"].read() == b"staged"

    cli("gc", "rules", "delete", REPO)
    after = cli("gc", "rules", "show", REPO, "--json").json()
    assert isinstance(after, dict) and not after.get("is_set")
