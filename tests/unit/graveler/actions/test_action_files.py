"""Action files: lakeFS's format parsed, every mistake named with its file, branch globs matched."""

from __future__ import annotations

import pytest

from engine.actions.files import (
    InvalidActionFile,
    check_unique_names,
    is_action_file,
    parse_action,
)

GOOD = b"""
name: Check schema
description: refuse bad data
on:
  pre-commit:
    branches: ["main", "release-*"]
  pre-merge:
  post-create-tag:
hooks:
  - id: schema
    type: webhook
    description: ask the schema service
    properties:
      url: "http://127.0.0.1:9/check"
      timeout: 10s
  - id: notify_failure
    type: lua
    if: failure()
    properties:
      script: print("failed")
"""


def test_a_lakefs_action_file_parses() -> None:
    action = parse_action(GOOD, "_lakefs_actions/check.yaml")
    assert action.name == "Check schema"
    assert [h.id for h in action.hooks] == ["schema", "notify_failure"]
    assert action.hooks[0].properties["url"] == "http://127.0.0.1:9/check"
    assert action.hooks[1].condition == "failure()"
    assert action.matches("pre-commit", "main")
    assert action.matches("pre-commit", "release-1")
    assert not action.matches("pre-commit", "dev")
    assert not action.matches("pre-commit", "release-1/x")  # `*` stays within a segment, as lakeFS's path.Match
    assert action.matches("pre-merge", "anything")  # no branches: every branch
    assert action.matches("post-create-tag", "")
    assert not action.matches("post-commit", "main")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"name: [unclosed", "not valid YAML"),
        (b"- a list\n", "YAML mapping"),
        (b"on:\n  pre-commit:\nhooks: []\n", "'name' is required"),
        (b"name: x!\non:\n  pre-commit:\n", "'name'"),
        (b"name: ok\n", "'on' is required"),
        (b"name: ok\non:\n  pre-push:\n", "pre-push"),
        (b"name: ok\non:\n  pre-create-tag:\n    branches: [main]\n", "not supported in tag event"),
        (b"name: ok\non:\n  pre-commit:\n    branches: main\n", "list of branch globs"),
        (b"name: ok\non:\n  pre-commit:\n    tags: [x]\n", "unknown options"),
        (b"name: ok\non:\n  pre-commit:\nhooks:\n  - type: lua\n", "needs an id"),
        (b"name: ok\non:\n  pre-commit:\nhooks:\n  - id: a1\n    type: exec\n", "unknown type"),
        (b"name: ok\non:\n  pre-commit:\nhooks:\n  - {id: a1, type: lua}\n  - {id: a1, type: lua}\n", "duplicate id"),
        (b"name: ok\non:\n  pre-commit:\nhooks:\n  - {id: a1, type: lua, if: 'x == 1'}\n", "'if'"),
        (b"name: ok\non:\n  pre-commit:\nhooks:\n  - {id: a1, type: lua, properties: [1]}\n", "'properties'"),
        (b"\xff\xfe", "UTF-8"),
        (
            b"name: ok\non:\n  pre-commit:\nhooks:\n  - id: a1\n    type: lua\n"
            b"    properties:\n      args: &a [1]\n      more: *a\n",
            "aliases",
        ),
        (b"name: ok\non:\n  pre-commit:\n    branches: ['" + b"*a" * 600 + b"']\n", "glob"),
    ],
)
def test_a_broken_file_is_refused_naming_the_file_and_the_problem(text: bytes, expected: str) -> None:
    with pytest.raises(InvalidActionFile) as caught:
        parse_action(text, "_lakefs_actions/broken.yaml")
    assert "_lakefs_actions/broken.yaml" in str(caught.value)
    assert expected in str(caught.value)


def test_yaml_cannot_construct_objects_and_large_files_are_refused() -> None:
    with pytest.raises(InvalidActionFile):
        parse_action(b"name: !!python/object/apply:os.system ['true']\non:\n  pre-commit:\n", "a.yaml")
    with pytest.raises(InvalidActionFile, match="larger than"):
        parse_action(b"#" * (256 * 1024 + 1), "a.yaml")


def test_two_actions_with_one_name_are_refused() -> None:
    first = parse_action(GOOD, "_lakefs_actions/a.yaml")
    second = parse_action(GOOD, "_lakefs_actions/b.yaml")
    with pytest.raises(InvalidActionFile, match="also the name of"):
        check_unique_names([first, second])


def test_only_files_directly_under_the_folder_are_action_files() -> None:
    assert is_action_file("_lakefs_actions/a.yaml")
    assert is_action_file("_lakefs_actions/a.yml")
    assert not is_action_file("_lakefs_actions/sub/a.yaml")
    assert not is_action_file("_lakefs_actions/")
    assert not is_action_file("data/_lakefs_actions/a.yaml")
