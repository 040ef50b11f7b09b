"""The manual's lakeFS-client examples (docs/clients/lakefs.md, one per client: lakefs-sdk, lakefs,
lakefs-spec with pandas; and lakefs-sdk's refs dump and restore), each run as written against the
API stack, with only the endpoint, the credentials and the repository name swapped in."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

from tests.e2e.api.conftest import Api

PAGE = Path(__file__).resolve().parents[3] / "docs" / "clients" / "lakefs.md"
DOC_ENDPOINT = "http://127.0.0.1:8000"

# Which example: a line only its code has -> the repository it creates, and what it prints.
EXAMPLES = {
    "lakefs_sdk.BranchesApi(client).create_branch": ("sdk-demo", ["Repository created"]),
    "repos.dump_submit": ("dump-demo", ["restored: ok same v1: True"]),
    "from lakefs.client import Client": ("hl-demo", ["Hello from dev", "Merge"]),
    "from lakefs_spec import LakeFSFileSystem": ("spec-demo", ["Oslo", "19.0"]),
}


def examples(text: str) -> list[str]:
    """The python blocks of the lakeFS clients page, in order."""
    return re.findall(r"```python\n(.*?)```", text, re.S)


def example(text: str, marker: str) -> str:
    found = [code for code in examples(text) if marker in code]
    assert len(found) == 1, f"docs/clients/lakefs.md has {len(found)} examples with {marker!r}"
    return found[0]


@pytest.mark.parametrize("marker", list(EXAMPLES))
def test_the_manual_example_runs_against_the_api(api: Api, capsys: pytest.CaptureFixture[str], marker: str) -> None:
    repo, expected = EXAMPLES[marker]
    name = f"{repo}-{secrets.token_hex(4)}"
    code = example(PAGE.read_text(), marker)
    assert repo in code and DOC_ENDPOINT in code
    code = code.replace(DOC_ENDPOINT, api.stack.endpoint).replace(repo, name)
    admin = api.stack.admin
    exec(code, {"KEY_ID": admin.access_key_id, "SECRET": admin.secret_access_key.get_secret_value()})
    printed = capsys.readouterr().out
    for text in expected:
        assert text in printed, printed
