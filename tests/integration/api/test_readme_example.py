"""The README's lakeFS-client example, run as written against the API stack."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

from tests.integration.api.conftest import Api

README = Path(__file__).resolve().parents[3] / "README.md"


def _example() -> str:
    text = README.read_text()
    section = text[text.index("### lakeFS clients") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's lakeFS clients section has no python example"
    return match.group(1)


def test_the_readme_example_runs_against_the_api(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"sdk-demo-{secrets.token_hex(4)}"
    code = _example().replace("http://127.0.0.1:8000/api/v1", api.base).replace('"sdk-demo"', repr(name))
    code = code.replace("local://sdk-demo", f"local://{name}")
    admin = api.stack.admin
    exec(code, {"KEY_ID": admin.access_key_id, "SECRET": admin.secret_access_key.get_secret_value()})
    printed = capsys.readouterr().out
    assert "Repository created" in printed
