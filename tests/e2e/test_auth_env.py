"""`silt auth env --spark`, as a real process: Spark's S3A settings for the caller's key and the
gateway of the running stack (tests/e2e/conftest.py's session stack; it prints them and calls no
service, so it needs no stack of its own, nor Spark)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from silt.launcher import Stack
from silt.spark import s3a_jars


def test_auth_env_spark_prints_the_settings_for_the_callers_key(stack: Stack, tmp_path: Path) -> None:
    assert stack.admin is not None
    endpoint = stack.endpoints["gateway"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    env.update(
        HOME=str(tmp_path),  # no saved credentials: the key comes from the environment
        SILT_ACCESS_KEY_ID=stack.admin.access_key_id,
        SILT_SECRET_ACCESS_KEY=stack.admin.secret_access_key.get_secret_value(),
    )
    silt = str(Path(sys.executable).parent / "silt")
    for fmt, expected in (("conf", "spark.hadoop.fs.s3a.endpoint "), ("builder", "SparkSession.builder")):
        done = subprocess.run(
            [silt, "--s3-endpoint", endpoint, "auth", "env", "--spark", fmt],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout
        assert stack.admin.access_key_id in done.stdout
        assert endpoint in done.stdout
        for jar in s3a_jars():
            assert jar in done.stdout
