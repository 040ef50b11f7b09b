"""`silt gc rules set/show` with last-access rules, against a real graveler over gRPC."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result
from pydantic import SecretStr

from cli.common import State
from cli.main import cli
from silt.client import Client, Settings
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.rpc.signing import Credentials
from tests.integration.gc.conftest import GCEnv


def silt(env: GCEnv, *args: str) -> Result:
    # graveler here runs without the auth interceptor: any key signs, none is checked.
    settings = Settings(env.target, "", "", "us-east-1", Credentials("AKIATEST", SecretStr("secret")), "test")
    return CliRunner().invoke(cli, list(args), obj=State(_client=Client(settings)), catch_exceptions=False)


def test_rules_set_and_show_last_access_rules(gc_env: GCEnv) -> None:
    repo = gc_env.new_repo(default_days=None)
    done = silt(
        gc_env,
        "gc", "rules", "set", f"silt://{repo}", "--default-days", "7",
        "--last-access", "main=30:logs/", "--last-access", "main=30:tmp/a=b:c",
        "--last-access", "scratch=5:", "--last-access", "main=30:logs/",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert "2 last-access rules" in done.stdout
    stored = gc_env.stub.GetGCRules(api.GetGCRulesRequest(repository=repo)).rules
    assert list(stored.last_access_rules) == [
        pb.LastAccessRule(branch="main", prefixes=["logs/", "tmp/a=b:c"], days=30),
        pb.LastAccessRule(branch="scratch", prefixes=[""], days=5),
    ]
    shown = silt(gc_env, "gc", "rules", "show", repo, "--json")
    assert json.loads(shown.stdout)["rules"]["last_access_rules"][1] == {
        "branch": "scratch",
        "prefixes": [""],
        "days": 5,
    }
    human = silt(gc_env, "gc", "rules", "show", repo).stdout
    assert "expire by last access" in human and "'logs/' 'tmp/a=b:c'" in human


def test_bad_last_access_rules_are_refused(gc_env: GCEnv) -> None:
    repo = gc_env.new_repo(default_days=3)
    malformed = silt(gc_env, "gc", "rules", "set", repo, "--default-days", "1", "--last-access", "main:logs/")
    assert malformed.exit_code == 2 and "BRANCH=DAYS:PREFIX" in malformed.stderr
    too_long = silt(gc_env, "gc", "rules", "set", repo, "--default-days", "1", "--last-access", "main=3651:x")
    assert too_long.exit_code != 0 and "days must be 1..3650" in too_long.stderr
    assert gc_env.stub.GetGCRules(api.GetGCRulesRequest(repository=repo)).rules.default_retention_days == 3
