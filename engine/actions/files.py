"""Action files: lakeFS's YAML format, read from `_lakefs_actions/` at an operation's source ref.

An action names the events it runs on (each optionally narrowed to branches by globs) and the
hooks it runs, in order. A file that does not parse or validate fails the operation that would
have run it, with a message naming the file and what is wrong, as lakeFS does: a repository's
checks are never skipped because someone broke their file.

Every file and every list is bounded (a writer of the repository decides what graveler parses),
branch globs are RE2 (engine/core/committed/globs.py: linear time), and YAML is read with
the safe loader (no object construction).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.core.committed.globs import Glob, glob_regex
from engine.core.hooks import EVENT_TYPES, is_tag_event
from silt.errors import FailedPrecondition

ACTIONS_PREFIX = "_lakefs_actions/"
MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 100
MAX_HOOKS = 32
MAX_BRANCH_GLOBS = 32
HOOK_TYPES = ("webhook", "lua")
# lakeFS's rules for names and hook ids.
_NAME = re.compile(r"^\w[\w\-. ]+$")
_HOOK_ID = re.compile(r"^[_a-zA-Z][\-_a-zA-Z0-9]{1,255}$")
# lakeFS evaluates `if` with an expression language; these are the forms its docs use.
IF_CONDITIONS = ("", "success()", "failure()", "always()", "true", "false")


class _Yaml12Loader(yaml.SafeLoader):
    """YAML as lakeFS reads it (YAML 1.2): `on`, `yes` and `no` are strings, only `true` and
    `false` are booleans. PyYAML follows YAML 1.1, where the `on:` key every action file has
    would be the boolean true. Aliases are refused: a few lines of them expand to a structure
    exponentially large for whatever walks it (a hook's arguments, converted for Lua)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases (*name) are not allowed in action files")
        return super().compose_node(parent, index)


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class InvalidActionFile(FailedPrecondition):
    """An action file that does not parse or validate: the operation that would run it fails."""


@dataclass(frozen=True)
class Hook:
    id: str
    type: str
    description: str
    condition: str  # one of IF_CONDITIONS
    properties: Mapping[str, Any]


@dataclass(frozen=True)
class Action:
    name: str
    file: str
    description: str
    # event type -> branch globs (None: every branch)
    on: Mapping[str, tuple[Glob, ...] | None]
    hooks: tuple[Hook, ...]
    patterns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def matches(self, event_type: str, branch: str) -> bool:
        if event_type not in self.on:
            return False
        globs = self.on[event_type]
        if globs is None or not branch:
            return globs is None or is_tag_event(event_type)
        name = branch.encode()
        return any(glob.fullmatch(name) for glob in globs)


def _fail(file: str, message: str) -> InvalidActionFile:
    return InvalidActionFile(f"action file {file!r}: {message}")


def _string(value: Any, file: str, what: str, required: bool = False) -> str:
    if value is None:
        if required:
            raise _fail(file, f"{what} is required")
        return ""
    if not isinstance(value, str):
        raise _fail(file, f"{what} must be a string")
    if required and not value:
        raise _fail(file, f"{what} is required")
    return value


def _events(raw: Any, file: str) -> tuple[dict[str, tuple[Glob, ...] | None], dict[str, tuple[str, ...]]]:
    if not isinstance(raw, Mapping) or not raw:
        raise _fail(file, "'on' is required and must map event types to their options")
    on: dict[str, tuple[Glob, ...] | None] = {}
    patterns: dict[str, tuple[str, ...]] = {}
    for event, options in raw.items():
        if event not in EVENT_TYPES:
            raise _fail(file, f"event {str(event)[:64]!r} is not supported (supported: {', '.join(EVENT_TYPES)})")
        if options is None:
            on[event] = None
            continue
        if not isinstance(options, Mapping):
            raise _fail(file, f"the options of event {event!r} must be a mapping")
        unknown = set(options) - {"branches"}
        if unknown:
            raise _fail(file, f"event {event!r} has unknown options {sorted(map(str, unknown))}")
        branches = options.get("branches")
        if branches is None or branches == []:
            on[event] = None
            continue
        if is_tag_event(event):
            raise _fail(file, f"'branches' is not supported in tag event {event!r}")
        if not isinstance(branches, list) or not all(isinstance(b, str) and b for b in branches):
            raise _fail(file, f"'branches' of event {event!r} must be a list of branch globs")
        if len(branches) > MAX_BRANCH_GLOBS:
            raise _fail(file, f"event {event!r} names more than {MAX_BRANCH_GLOBS} branch globs")
        try:
            on[event] = tuple(glob_regex(b, "branch glob") for b in branches)
        except FailedPrecondition:
            raise
        except Exception as exc:
            raise _fail(file, str(exc)) from None
        patterns[event] = tuple(branches)
    return on, patterns


def _hooks(raw: Any, file: str) -> tuple[Hook, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _fail(file, "'hooks' must be a list")
    if len(raw) > MAX_HOOKS:
        raise _fail(file, f"an action has at most {MAX_HOOKS} hooks")
    hooks: list[Hook] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise _fail(file, f"hook[{index}] must be a mapping")
        hook_id = item.get("id")
        if not isinstance(hook_id, str) or not _HOOK_ID.match(hook_id):
            raise _fail(file, f"hook[{index}] needs an id of letters, digits, '-' and '_' (2 to 256 characters)")
        if hook_id in seen:
            raise _fail(file, f"hook[{index}] duplicate id {hook_id!r}")
        seen.add(hook_id)
        kind = item.get("type")
        if kind not in HOOK_TYPES:
            raise _fail(file, f"hook {hook_id!r} has unknown type {str(kind)[:64]!r} (known: {', '.join(HOOK_TYPES)})")
        condition = _string(item.get("if"), file, f"'if' of hook {hook_id!r}").strip()
        if condition not in IF_CONDITIONS:
            raise _fail(file, f"'if' of hook {hook_id!r} must be one of {', '.join(c for c in IF_CONDITIONS if c)}")
        properties = item.get("properties") or {}
        if not isinstance(properties, Mapping):
            raise _fail(file, f"'properties' of hook {hook_id!r} must be a mapping")
        hooks.append(
            Hook(
                id=hook_id,
                type=str(kind),
                description=_string(item.get("description"), file, f"'description' of hook {hook_id!r}"),
                condition=condition,
                properties=dict(properties),
            )
        )
    return tuple(hooks)


def parse_action(data: bytes, file: str) -> Action:
    """The action in one file; InvalidActionFile naming the file and the problem otherwise."""
    return action_from(load_yaml(data, file), file)


def load_yaml(data: bytes, file: str) -> Any:
    """The YAML document of one file, as the safe loader builds it (YAML 1.2, no aliases): the
    costly half of parse_action, run in a hook process (hook_process.py)."""
    if len(data) > MAX_FILE_BYTES:
        raise _fail(file, f"larger than {MAX_FILE_BYTES} bytes")
    try:
        return yaml.load(data.decode("utf-8"), Loader=_Yaml12Loader)
    except UnicodeDecodeError:
        raise _fail(file, "not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise _fail(file, f"not valid YAML: {str(exc)[:300]}") from None
    except RecursionError:
        raise _fail(file, "nested too deeply") from None


def action_from(raw: Any, file: str) -> Action:
    """The action a loaded document describes; InvalidActionFile if it is not a valid one."""
    if not isinstance(raw, Mapping):
        raise _fail(file, "must be a YAML mapping with 'name', 'on' and 'hooks'")
    name = _string(raw.get("name"), file, "'name'", required=True)
    if not _NAME.match(name) or len(name) > 256:
        raise _fail(file, f"'name' {name[:64]!r} is invalid (letters, digits, '_', '-', '.', spaces)")
    on, patterns = _events(raw.get("on"), file)
    return Action(
        name=name,
        file=file,
        description=_string(raw.get("description"), file, "'description'"),
        on=on,
        hooks=_hooks(raw.get("hooks"), file),
        patterns=patterns,
    )


def check_unique_names(actions: list[Action]) -> None:
    seen: dict[str, str] = {}
    for action in actions:
        if action.name in seen:
            raise _fail(action.file, f"action name {action.name!r} is also the name of {seen[action.name]!r}")
        seen[action.name] = action.file


def is_action_file(path: str) -> bool:
    """lakeFS reads every object directly under the folder (not in sub-folders)."""
    return path.startswith(ACTIONS_PREFIX) and "/" not in path[len(ACTIONS_PREFIX) :] and path != ACTIONS_PREFIX
