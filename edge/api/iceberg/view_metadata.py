"""A view's metadata (the Iceberg view spec, format/view-spec.md): made from a create-view request,
checked against a replace's requirements and changed by its updates, as a pure function of the
JSON. Ids are the server's, as Iceberg's own builder assigns them: a schema or a version the view
already has keeps its id, a new one takes the next."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

from edge.api.iceberg.errors import bad_request, commit_failed

ViewMetadata = dict[str, Any]

FORMAT_VERSION = 1
# The view property naming how many versions a view keeps (the spec's), and its default.
HISTORY_PROPERTY = "version.history.num-entries"
DEFAULT_HISTORY = 10


def _now_ms() -> int:
    return int(time.time() * 1000)


def new_view_metadata(request: dict[str, Any], location: str) -> ViewMetadata:
    """The metadata of a view as a create-view request describes it: its schema, its first
    version (whose schema-id is the schema's, as the spec says) and its properties."""
    if not isinstance(request.get("schema"), dict) or not isinstance(request.get("view-version"), dict):
        raise bad_request("a view needs a schema and a view-version")
    base: ViewMetadata = {
        "view-uuid": str(uuid.uuid4()),
        "format-version": FORMAT_VERSION,
        "location": location,
        "current-version-id": -1,
        "versions": [],
        "version-log": [],
        "schemas": [],
        "properties": {},
    }
    updates = [
        {"action": "add-schema", "schema": request["schema"]},
        {"action": "set-properties", "updates": request.get("properties") or {}},
        {"action": "add-view-version", "view-version": {**request["view-version"], "schema-id": -1}},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    return apply_view_updates(base, updates)


def check_view_requirements(current: ViewMetadata, requirements: list[dict[str, Any]]) -> None:
    """CommitFailedException (409) unless every requirement holds for the view as it is now."""
    for requirement in requirements:
        kind = requirement.get("type")
        if kind != "assert-view-uuid":
            raise bad_request(f"unknown view requirement type {kind!r}")
        if requirement.get("uuid") != current.get("view-uuid"):
            raise commit_failed(
                f"Requirement failed: view UUID does not match: expected {requirement.get('uuid')}, "
                f"found {current.get('view-uuid')}"
            )


def _same_schema(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keep = ("type", "fields", "identifier-field-ids")
    return {k: a.get(k) for k in keep} == {k: b.get(k) for k in keep}


def _same_version(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two versions that define the same view (what Iceberg reuses an id for)."""
    keep = ("schema-id", "representations", "default-catalog", "default-namespace")
    return {k: a.get(k) for k in keep} == {k: b.get(k) for k in keep}


class _ViewBuilder:
    """Applies updates in order, remembering the last schema and version added (an update's -1
    names it)."""

    def __init__(self, base: ViewMetadata) -> None:
        self.m = copy.deepcopy(base)
        self.last_schema: int | None = None
        self.last_version: int | None = None

    def apply(self, update: dict[str, Any]) -> None:
        action = str(update.get("action"))
        handler = getattr(self, "_" + action.replace("-", "_"), None)
        if handler is None:
            raise bad_request(f"unknown or unsupported view update {action!r}")
        handler(update)

    def _assign_uuid(self, u: dict[str, Any]) -> None:
        if self.m.get("versions") and u["uuid"] != self.m.get("view-uuid"):
            raise bad_request("a view's UUID cannot change")
        self.m["view-uuid"] = str(u["uuid"])

    def _upgrade_format_version(self, u: dict[str, Any]) -> None:
        version = int(u["format-version"])
        if version < int(self.m.get("format-version", FORMAT_VERSION)):
            raise bad_request(f"cannot downgrade format-version to {version}")
        if version != FORMAT_VERSION:
            raise bad_request(f"unsupported view format-version {version}")
        self.m["format-version"] = version

    def _add_schema(self, u: dict[str, Any]) -> None:
        schema = copy.deepcopy(u["schema"])
        if not isinstance(schema.get("fields"), list):
            raise ValueError("a schema needs fields")
        schemas: list[dict[str, Any]] = self.m.setdefault("schemas", [])
        for known in schemas:
            if _same_schema(known, schema):
                self.last_schema = int(known["schema-id"])
                return
        schema["schema-id"] = max((int(s["schema-id"]) + 1 for s in schemas), default=0)
        schema.setdefault("type", "struct")
        schemas.append(schema)
        self.last_schema = schema["schema-id"]

    def _add_view_version(self, u: dict[str, Any]) -> None:
        version = copy.deepcopy(u["view-version"])
        for field in ("timestamp-ms", "representations", "default-namespace"):
            if field not in version:
                raise ValueError(f"a view version needs {field}")
        if int(version.get("schema-id", -1)) == -1:
            if self.last_schema is None:
                raise bad_request("a view version names schema -1 but no schema was added")
            version["schema-id"] = self.last_schema
        if not any(s["schema-id"] == version["schema-id"] for s in self.m.get("schemas", [])):
            raise bad_request(f"a view version names schema {version['schema-id']}, which the view does not have")
        dialects = [r.get("dialect", "").lower() for r in version["representations"] if r.get("type") == "sql"]
        if len(dialects) != len(set(dialects)):
            raise bad_request("a view version has one SQL representation per dialect")
        version.setdefault("summary", {})
        versions: list[dict[str, Any]] = self.m.setdefault("versions", [])
        for known in versions:
            if _same_version(known, version):
                self.last_version = int(known["version-id"])
                return
        version["version-id"] = max((int(v["version-id"]) + 1 for v in versions), default=1)
        versions.append(version)
        self.last_version = version["version-id"]

    def _set_current_view_version(self, u: dict[str, Any]) -> None:
        version_id = int(u["view-version-id"])
        if version_id == -1:
            if self.last_version is None:
                raise bad_request("set-current-view-version names -1 but no version was added")
            version_id = self.last_version
        version = next((v for v in self.m.get("versions", []) if v["version-id"] == version_id), None)
        if version is None:
            raise bad_request(f"the view has no version {version_id}")
        if version_id != self.m.get("current-version-id"):
            self.m["current-version-id"] = version_id
            # The log's time is the version's, as Iceberg's own builder writes it.
            entry = {"version-id": version_id, "timestamp-ms": int(version.get("timestamp-ms") or _now_ms())}
            self.m.setdefault("version-log", []).append(entry)

    def _set_location(self, u: dict[str, Any]) -> None:
        self.m["location"] = str(u["location"])

    def _set_properties(self, u: dict[str, Any]) -> None:
        self.m.setdefault("properties", {}).update({str(k): str(v) for k, v in u["updates"].items()})

    def _remove_properties(self, u: dict[str, Any]) -> None:
        properties = self.m.setdefault("properties", {})
        for key in u["removals"]:
            properties.pop(str(key), None)

    def expire_versions(self) -> None:
        """Keep the newest versions (the view property's count), always the current one."""
        keep = int(self.m.get("properties", {}).get(HISTORY_PROPERTY, DEFAULT_HISTORY))
        if keep < 1:
            raise bad_request(f"{HISTORY_PROPERTY} must be at least 1")
        versions = sorted(self.m.get("versions", []), key=lambda v: int(v["version-id"]))
        if len(versions) <= keep:
            return
        current = self.m.get("current-version-id")
        ids = {v["version-id"] for v in versions[-keep:]}
        if current not in ids:
            ids = {v["version-id"] for v in versions[len(versions) - keep + 1 :]} | {current}
        self.m["versions"] = [v for v in versions if v["version-id"] in ids]
        self.m["version-log"] = [e for e in self.m.get("version-log", []) if e.get("version-id") in ids]


def apply_view_updates(base: ViewMetadata, updates: list[dict[str, Any]]) -> ViewMetadata:
    """A new view metadata: base with updates applied in order (base is left as it was). A view
    always has a current version: a change that leaves it none is a bad request."""
    builder = _ViewBuilder(base)
    try:
        for update in updates:
            builder.apply(update)
        builder.expire_versions()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise bad_request(f"malformed view update: {exc!r}") from None
    if builder.m.get("current-version-id", -1) == -1:
        raise bad_request("a view needs a current version")
    return builder.m
