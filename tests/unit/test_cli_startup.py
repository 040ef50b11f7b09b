"""`silt` starts fast: scripts and shell completion run it thousands of times.

No timing here (bench/cli.py measures, `make bench-cli`): each test runs a fresh interpreter and
checks which modules it imported. Importing cli.main, `silt --version`, `silt --help` and
completing a command name import no command's module, nor gRPC, protobuf, pydantic, boto3,
pyarrow and the like; `silt repo list` imports what a REST call needs (cli/rest.py) and nothing
of gRPC, the journal, object stores or data frames, and builds the validator of the configuration
sections it reads alone (silt.config.load_client_config), or, its configuration cached, no pydantic at all
(cli/config_cache.py). Re-adding an eager import to cli/main.py or
cli/common.py fails these.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli.common import SiltGroup
from cli.main import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]

# Never on the way to a command's first output, whatever the command.
NEVER = ("pyarrow", "numpy", "pandas", "pyspark", "boto3", "botocore", "silt.journal", "silt.block", "silt.kv", "rich")
# Nor, for what needs no server (--version, --help, completion), these.
NO_SERVER = (
    *NEVER,
    "grpc",
    "google.protobuf",
    "pydantic",
    "yaml",
    "silt.client",
    "silt.config",
    "silt.launcher",
    *(path.partition(":")[0] for path, _ in COMMANDS.values()),
)

_PROBE = """
import json, sys
from cli.main import main
sys.argv = ["silt", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _modules_after(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh `silt ARGS` process has imported when it is done."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_", "_SILT_COMPLETE"))}
    with tempfile.TemporaryDirectory() as cache:  # never the user's cache (a test may pass its own)
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, json.dumps(args)],
            env={**base, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": cache, **(env or {})},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def _imported(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_import_alone_loads_no_command() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys, cli.main; print(json.dumps(sorted(sys.modules)))"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert _imported(set(json.loads(done.stdout)), NO_SERVER) == []


@pytest.mark.parametrize("args", [["--version"], ["--help"]], ids=" ".join)
def test_version_and_help_load_nothing_heavy(args: list[str]) -> None:
    modules = _modules_after(args)
    assert "cli.main" in modules
    assert _imported(modules, NO_SERVER) == []


def test_a_commands_help_loads_its_module_alone() -> None:
    modules = _modules_after(["repo", "--help"])
    assert "cli.repo" in modules
    assert _imported(modules, NEVER) == []
    others = tuple(path.partition(":")[0] for name, (path, _) in COMMANDS.items() if name != "repo")
    assert _imported(modules, others) == []


def test_completing_a_command_name_loads_no_command() -> None:
    env = {"_SILT_COMPLETE": "bash_complete", "COMP_WORDS": "silt re", "COMP_CWORD": "1"}
    assert _imported(_modules_after([], env), NO_SERVER) == []


def test_repo_list_loads_only_what_a_rest_call_needs() -> None:
    # No server listens on port 1: the call fails, after everything it needs was imported.
    env = {"SILT_ACCESS_KEY_ID": "a", "SILT_SECRET_ACCESS_KEY": "b"}
    modules = _modules_after(["--endpoint", "http://127.0.0.1:1", "repo", "list"], env)
    assert "cli.repo" in modules and "cli.rest" in modules
    assert _imported(modules, (*NEVER, "grpc", "google.protobuf", "silt.client", "lakefs_sdk")) == []
    others = tuple(path.partition(":")[0] for name, (path, _) in COMMANDS.items() if name != "repo")
    assert _imported(modules, others) == []


def test_a_transfer_off_a_terminal_loads_neither_grpc_nor_lakefs_sdk_nor_rich() -> None:
    # `fs cat` asks the REST API whether it presigns (the REST client) and would move bytes with
    # urllib3; gRPC (the gateway's boto3 client) and rich's bars (a terminal) only when needed.
    env = {"SILT_ACCESS_KEY_ID": "a", "SILT_SECRET_ACCESS_KEY": "b"}
    modules = _modules_after(["--endpoint", "http://127.0.0.1:1", "fs", "cat", "lakefs://r/main/x"], env)
    assert "cli.transfer" in modules
    assert _imported(modules, (*NEVER, "grpc", "silt.client", "lakefs_sdk")) == []


def test_repo_list_with_its_configuration_cached_imports_no_pydantic(tmp_path: Path) -> None:
    # The first run validates the configuration (pydantic) and caches what the client reads
    # (cli/config_cache.py); the next ones read the cache alone: no pydantic, no YAML.
    config = tmp_path / "config.yaml"
    config.write_text("graveler:\n  endpoint: 127.0.0.1:1\n")
    env = {
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "SILT_CONFIG": str(config),
        "SILT_ACCESS_KEY_ID": "a",
        "SILT_SECRET_ACCESS_KEY": "b",
        "SILT_GATEWAYS_S3_LISTEN_ADDRESS": "127.0.0.1:1",
    }
    first = _modules_after(["repo", "list"], env)
    assert "pydantic" in first
    again = _modules_after(["repo", "list"], env)
    assert "cli.repo" in again and "cli.rest" in again and "grpc" not in again
    assert _imported(again, ("pydantic", "pydantic_core", "yaml", "silt.config")) == []


_BUILT_PROBE = """
import sys
from cli.main import main
sys.argv = ["silt", "--endpoint", "http://127.0.0.1:1", "repo", "list"]
try:
    main()
except SystemExit:
    pass
import silt.config as c
models = [m for m in vars(c).values() if isinstance(m, type) and issubclass(m, c._Section) and m is not c._Section]
print(" ".join(sorted(m.__name__ for m in models if m.__pydantic_complete__)), file=sys.stderr)
"""


def test_repo_list_builds_only_the_client_configuration(tmp_path: Path) -> None:
    # Each configuration model's validator is built on first use (defer_build): `repo list`
    # validates the sections it dials the services with, in one validator, and builds no other
    # (its configuration cache empty, as here: on a hit it builds none, test below).
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_", "_SILT_COMPLETE"))}
    base["XDG_CACHE_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _BUILT_PROBE],
        env={**base, "PYTHONPATH": str(ROOT), "SILT_ACCESS_KEY_ID": "a", "SILT_SECRET_ACCESS_KEY": "b"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stderr.strip().splitlines()[-1].split() == ["ClientConfig"]


def test_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"silt, version {version('silt')}\n"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_listed_help_is_the_commands_own(name: str) -> None:
    """The name and line `silt --help` shows without importing a command are the command's."""
    assert isinstance(cli, SiltGroup)
    command = cli.load_lazy(name)
    assert command.name == name
    assert COMMANDS[name][1] == command.get_short_help_str(limit=1_000)
    ctx = click.Context(cli)
    assert cli.get_command(ctx, name) is command


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.split("Commands:\n")[1].splitlines() if line.strip()]
    assert listed == sorted([*COMMANDS, "config", "check"])


def test_unknown_command_suggests_a_lazy_one() -> None:
    result = CliRunner().invoke(cli, ["repos"])
    assert result.exit_code == 2
    assert "Did you mean 'repo'?" in result.output
