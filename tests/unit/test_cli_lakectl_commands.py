"""lakectl's commands that need no server: `actions validate` (action files checked as the
server reads them) and `completion` (click's script for a shell)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cli.common import State
from cli.main import cli

VALID = """name: checks
on:
  pre-commit:
    branches: [main]
hooks:
  - id: format
    type: webhook
    properties:
      url: http://ci.example.com/check
"""


def test_actions_validate_accepts_a_valid_file_and_names_what_is_wrong(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(VALID)
    bad = tmp_path / "bad.yaml"
    bad.write_text(VALID.replace("type: webhook", "type: carrier-pigeon"))
    ok = CliRunner().invoke(cli, ["actions", "validate", str(good)], obj=State())
    assert ok.exit_code == 0 and f"{good}: ok" in ok.stdout
    both = CliRunner().invoke(cli, ["actions", "validate", str(good), str(bad), "--json"], obj=State())
    assert both.exit_code == 1
    assert "carrier-pigeon" in both.stdout and '"valid": false' in both.stdout


def test_completion_prints_the_shells_script() -> None:
    for shell, marker in (("bash", "complete -o nosort -F"), ("zsh", "compdef"), ("fish", "complete --no-files")):
        result = CliRunner().invoke(cli, ["completion", shell], obj=State())
        assert result.exit_code == 0 and marker in result.stdout and "_SILT_COMPLETE" in result.stdout


def test_branch_reset_takes_lakectls_prefix_and_object_flags_and_silts_path() -> None:
    from cli.branch import branch_reset

    def parsed(*args: str) -> tuple[object, object]:
        params = branch_reset.make_context("reset", list(args)).params
        return params["prefix"], params["object_path"]

    assert parsed("lakefs://r/b", "--prefix", "data/", "-y") == ("data/", None)  # lakectl's
    assert parsed("lakefs://r/b/data/", "--prefix", "-y") == ("", None)  # Silt's: the URI's path
    assert parsed("lakefs://r/b", "--object", "x.csv") == (None, "x.csv")
    assert parsed("lakefs://r/b/x.csv") == (None, None)
