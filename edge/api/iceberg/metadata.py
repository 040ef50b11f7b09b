"""Table metadata as the Iceberg spec writes it (a JSON object), created from a create-table
request, checked against a commit's requirements and changed by its updates. Pure functions over
dicts: the catalog's storage (store.py) reads and writes the JSON, this module decides."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable
from typing import Any

from edge.api.iceberg.errors import bad_request, commit_failed

Metadata = dict[str, Any]
# Iceberg's partition field ids start after 999; an unpartitioned table's last id is 999.
PARTITION_FIELD_BASE = 999
MAIN = "main"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _max_field_id(fields: list[dict[str, Any]]) -> int:
    """The largest field id of a schema's fields, nested types included."""
    best = 0
    for field in fields:
        best = max(best, int(field.get("id", 0)))
        best = max(best, _max_type_id(field.get("type")))
    return best


def _max_type_id(kind: Any) -> int:
    if not isinstance(kind, dict):
        return 0
    best = 0
    if kind.get("type") == "struct":
        best = _max_field_id(kind.get("fields", []))
    elif kind.get("type") == "list":
        best = max(int(kind.get("element-id", 0)), _max_type_id(kind.get("element")))
    elif kind.get("type") == "map":
        best = max(
            int(kind.get("key-id", 0)),
            int(kind.get("value-id", 0)),
            _max_type_id(kind.get("key")),
            _max_type_id(kind.get("value")),
        )
    return best


def empty_metadata(location: str, format_version: int = 2) -> Metadata:
    """A table before its first update: what a create-table request's updates apply to."""
    return {
        "format-version": format_version,
        "table-uuid": str(uuid.uuid4()),
        "location": location,
        "last-sequence-number": 0,
        "last-updated-ms": _now_ms(),
        "last-column-id": 0,
        "current-schema-id": -1,
        "schemas": [],
        "default-spec-id": -1,
        "partition-specs": [],
        "last-partition-id": PARTITION_FIELD_BASE,
        "default-sort-order-id": -1,
        "sort-orders": [],
        "properties": {},
        "current-snapshot-id": -1,
        "snapshots": [],
        "snapshot-log": [],
        "metadata-log": [],
        "refs": {},
        "statistics": [],
        "partition-statistics": [],
    }


def new_metadata(request: dict[str, Any], location: str) -> Metadata:
    """The metadata of a table as a create-table request describes it (its schema, partition
    spec, sort order and properties; ids as the client assigned them)."""
    properties = dict(request.get("properties") or {})
    version = int(properties.pop("format-version", 2))
    updates: list[dict[str, Any]] = [
        {"action": "add-schema", "schema": request["schema"]},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": request.get("partition-spec") or {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": request.get("write-order") or {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-properties", "updates": properties},
    ]
    if version not in (1, 2, 3):
        raise bad_request(f"unsupported format-version {version}")
    return apply_updates(empty_metadata(location, version), updates)


# --- requirements --------------------------------------------------------------------------


def check_requirements(current: Metadata | None, requirements: list[dict[str, Any]]) -> None:
    """CommitFailedException (409) unless every requirement holds for the table as it is now
    (None: it does not exist)."""
    for requirement in requirements:
        kind = requirement.get("type")
        if kind == "assert-create":
            if current is not None:
                raise commit_failed("Requirement failed: table already exists")
            continue
        if current is None:
            raise commit_failed(f"Requirement failed: {kind}: the table does not exist")
        check = _REQUIREMENTS.get(str(kind))
        if check is None:
            raise bad_request(f"unknown requirement type {kind!r}")
        check(current, requirement)


def _equal(field: str, requirement_field: str, name: str) -> Callable[[Metadata, dict[str, Any]], None]:
    def check(current: Metadata, requirement: dict[str, Any]) -> None:
        if current.get(field) != requirement.get(requirement_field):
            raise commit_failed(
                f"Requirement failed: {name} has changed: expected {requirement.get(requirement_field)}, "
                f"found {current.get(field)}"
            )

    return check


def _ref_snapshot(current: Metadata, requirement: dict[str, Any]) -> None:
    name = requirement.get("ref", MAIN)
    expected = requirement.get("snapshot-id")
    ref = current.get("refs", {}).get(name)
    if ref is None and name == MAIN and current.get("current-snapshot-id", -1) not in (-1, None):
        ref = {"snapshot-id": current["current-snapshot-id"]}
    found = None if ref is None else ref.get("snapshot-id")
    if found != expected:
        if expected is None:
            raise commit_failed(f"Requirement failed: branch or tag {name} was created concurrently")
        raise commit_failed(f"Requirement failed: {name} has changed: expected id {expected} != {found}")


_REQUIREMENTS: dict[str, Callable[[Metadata, dict[str, Any]], None]] = {
    "assert-table-uuid": _equal("table-uuid", "uuid", "table UUID"),
    "assert-ref-snapshot-id": _ref_snapshot,
    "assert-last-assigned-field-id": _equal("last-column-id", "last-assigned-field-id", "last assigned field id"),
    "assert-current-schema-id": _equal("current-schema-id", "current-schema-id", "current schema id"),
    "assert-last-assigned-partition-id": _equal(
        "last-partition-id", "last-assigned-partition-id", "last assigned partition id"
    ),
    "assert-default-spec-id": _equal("default-spec-id", "default-spec-id", "default partition spec id"),
    "assert-default-sort-order-id": _equal("default-sort-order-id", "default-sort-order-id", "default sort order id"),
}


# --- updates -------------------------------------------------------------------------------


class _Builder:
    """Applies updates in order, remembering the last schema, spec and sort order added (an
    update's -1 names it)."""

    def __init__(self, base: Metadata) -> None:
        self.m = copy.deepcopy(base)
        self.last_schema: int | None = None
        self.last_spec: int | None = None
        self.last_order: int | None = None

    def apply(self, update: dict[str, Any]) -> None:
        action = str(update.get("action"))
        handler = getattr(self, "_" + action.replace("-", "_"), None)
        if handler is None:
            raise bad_request(f"unknown or unsupported table update {action!r}")
        handler(update)

    def _assign_uuid(self, u: dict[str, Any]) -> None:
        self.m["table-uuid"] = u["uuid"]

    def _upgrade_format_version(self, u: dict[str, Any]) -> None:
        version = int(u["format-version"])
        if version < int(self.m.get("format-version", 1)):
            raise bad_request(f"cannot downgrade format-version to {version}")
        if version > 3:
            raise bad_request(f"unsupported format-version {version}")
        self.m["format-version"] = version

    def _add_schema(self, u: dict[str, Any]) -> None:
        schema = copy.deepcopy(u["schema"])
        schemas: list[dict[str, Any]] = self.m.setdefault("schemas", [])
        for existing in schemas:
            if existing.get("fields") == schema.get("fields") and existing.get(
                "identifier-field-ids", []
            ) == schema.get("identifier-field-ids", []):
                self.last_schema = int(existing["schema-id"])
                return
        schema_id = max((int(s["schema-id"]) for s in schemas), default=-1) + 1
        schema["schema-id"] = schema_id
        schema.setdefault("type", "struct")
        schemas.append(schema)
        last = max(int(u.get("last-column-id") or 0), _max_field_id(schema.get("fields", [])))
        self.m["last-column-id"] = max(int(self.m.get("last-column-id", 0)), last)
        self.last_schema = schema_id

    def _set_current_schema(self, u: dict[str, Any]) -> None:
        schema_id = int(u["schema-id"])
        if schema_id == -1:
            if self.last_schema is None:
                raise bad_request("set-current-schema -1 without a schema added in this commit")
            schema_id = self.last_schema
        if all(int(s["schema-id"]) != schema_id for s in self.m["schemas"]):
            raise bad_request(f"no schema with id {schema_id}")
        self.m["current-schema-id"] = schema_id

    def _add_spec(self, u: dict[str, Any]) -> None:
        spec = copy.deepcopy(u["spec"])
        specs: list[dict[str, Any]] = self.m.setdefault("partition-specs", [])
        for existing in specs:
            if existing.get("fields") == spec.get("fields"):
                self.last_spec = int(existing["spec-id"])
                return
        spec_id = max((int(s["spec-id"]) for s in specs), default=-1) + 1
        spec["spec-id"] = spec_id
        specs.append(spec)
        last = max((int(f.get("field-id", 0)) for f in spec.get("fields", [])), default=PARTITION_FIELD_BASE)
        self.m["last-partition-id"] = max(int(self.m.get("last-partition-id", PARTITION_FIELD_BASE)), last)
        self.last_spec = spec_id

    def _set_default_spec(self, u: dict[str, Any]) -> None:
        spec_id = int(u["spec-id"])
        if spec_id == -1:
            if self.last_spec is None:
                raise bad_request("set-default-spec -1 without a spec added in this commit")
            spec_id = self.last_spec
        if all(int(s["spec-id"]) != spec_id for s in self.m["partition-specs"]):
            raise bad_request(f"no partition spec with id {spec_id}")
        self.m["default-spec-id"] = spec_id

    def _add_sort_order(self, u: dict[str, Any]) -> None:
        order = copy.deepcopy(u["sort-order"])
        orders: list[dict[str, Any]] = self.m.setdefault("sort-orders", [])
        for existing in orders:
            if existing.get("fields") == order.get("fields"):
                self.last_order = int(existing["order-id"])
                return
        # The unsorted order is always id 0.
        order_id = 0 if not order.get("fields") else max((int(o["order-id"]) for o in orders), default=0) + 1
        order["order-id"] = order_id
        orders.append(order)
        self.last_order = order_id

    def _set_default_sort_order(self, u: dict[str, Any]) -> None:
        order_id = int(u["sort-order-id"])
        if order_id == -1:
            if self.last_order is None:
                raise bad_request("set-default-sort-order -1 without a sort order added in this commit")
            order_id = self.last_order
        if all(int(o["order-id"]) != order_id for o in self.m["sort-orders"]):
            raise bad_request(f"no sort order with id {order_id}")
        self.m["default-sort-order-id"] = order_id

    def _add_snapshot(self, u: dict[str, Any]) -> None:
        snapshot = copy.deepcopy(u["snapshot"])
        snapshots: list[dict[str, Any]] = self.m.setdefault("snapshots", [])
        if any(s["snapshot-id"] == snapshot["snapshot-id"] for s in snapshots):
            raise commit_failed(f"snapshot {snapshot['snapshot-id']} already exists")
        sequence = int(snapshot.get("sequence-number", 0))
        if self.m.get("format-version", 1) >= 2 and sequence <= int(self.m.get("last-sequence-number", 0)):
            raise commit_failed(
                f"cannot add snapshot with sequence number {sequence} older than last sequence number "
                f"{self.m.get('last-sequence-number')}"
            )
        snapshots.append(snapshot)
        self.m["last-sequence-number"] = max(int(self.m.get("last-sequence-number", 0)), sequence)
        self.m["last-updated-ms"] = int(snapshot.get("timestamp-ms", _now_ms()))

    def _set_snapshot_ref(self, u: dict[str, Any]) -> None:
        name = u["ref-name"]
        snapshot_id = u["snapshot-id"]
        if all(s["snapshot-id"] != snapshot_id for s in self.m.get("snapshots", [])):
            raise bad_request(f"cannot set {name} to unknown snapshot {snapshot_id}")
        ref = {k: v for k, v in u.items() if k not in ("action", "ref-name") and v is not None}
        self.m.setdefault("refs", {})[name] = ref
        if name == MAIN:
            self.m["current-snapshot-id"] = snapshot_id
            self.m.setdefault("snapshot-log", []).append(
                {"snapshot-id": snapshot_id, "timestamp-ms": int(self.m.get("last-updated-ms", _now_ms()))}
            )

    def _remove_snapshots(self, u: dict[str, Any]) -> None:
        gone = set(u["snapshot-ids"])
        self.m["snapshots"] = [s for s in self.m.get("snapshots", []) if s["snapshot-id"] not in gone]
        self.m["snapshot-log"] = [e for e in self.m.get("snapshot-log", []) if e["snapshot-id"] not in gone]
        self.m["refs"] = {n: r for n, r in self.m.get("refs", {}).items() if r.get("snapshot-id") not in gone}
        self.m["statistics"] = [s for s in self.m.get("statistics", []) if s.get("snapshot-id") not in gone]
        if self.m.get("current-snapshot-id") in gone:
            self.m["current-snapshot-id"] = -1

    def _remove_snapshot_ref(self, u: dict[str, Any]) -> None:
        self.m.get("refs", {}).pop(u["ref-name"], None)
        if u["ref-name"] == MAIN:
            self.m["current-snapshot-id"] = -1

    def _set_location(self, u: dict[str, Any]) -> None:
        self.m["location"] = u["location"]

    def _set_properties(self, u: dict[str, Any]) -> None:
        self.m.setdefault("properties", {}).update({str(k): str(v) for k, v in u["updates"].items()})

    def _remove_properties(self, u: dict[str, Any]) -> None:
        for key in u["removals"]:
            self.m.get("properties", {}).pop(key, None)

    def _set_statistics(self, u: dict[str, Any]) -> None:
        stats = u["statistics"]
        kept = [s for s in self.m.get("statistics", []) if s.get("snapshot-id") != stats.get("snapshot-id")]
        self.m["statistics"] = [*kept, stats]

    def _remove_statistics(self, u: dict[str, Any]) -> None:
        gone = u["snapshot-id"]
        self.m["statistics"] = [s for s in self.m.get("statistics", []) if s.get("snapshot-id") != gone]

    def _set_partition_statistics(self, u: dict[str, Any]) -> None:
        stats = u["partition-statistics"]
        current = self.m.get("partition-statistics", [])
        kept = [s for s in current if s.get("snapshot-id") != stats.get("snapshot-id")]
        self.m["partition-statistics"] = [*kept, stats]

    def _remove_partition_statistics(self, u: dict[str, Any]) -> None:
        gone = u["snapshot-id"]
        current = self.m.get("partition-statistics", [])
        self.m["partition-statistics"] = [s for s in current if s.get("snapshot-id") != gone]

    def _remove_partition_specs(self, u: dict[str, Any]) -> None:
        gone = set(u["spec-ids"])
        if self.m.get("default-spec-id") in gone:
            raise bad_request("cannot remove the default partition spec")
        self.m["partition-specs"] = [s for s in self.m.get("partition-specs", []) if s["spec-id"] not in gone]

    def _remove_schemas(self, u: dict[str, Any]) -> None:
        gone = set(u["schema-ids"])
        if self.m.get("current-schema-id") in gone:
            raise bad_request("cannot remove the current schema")
        self.m["schemas"] = [s for s in self.m.get("schemas", []) if s["schema-id"] not in gone]

    def _add_encryption_key(self, u: dict[str, Any]) -> None:
        self.m.setdefault("encryption-keys", []).append(u["encryption-key"])

    def _remove_encryption_key(self, u: dict[str, Any]) -> None:
        keys = self.m.get("encryption-keys", [])
        self.m["encryption-keys"] = [k for k in keys if k.get("key-id") != u["key-id"]]


def apply_updates(base: Metadata, updates: list[dict[str, Any]]) -> Metadata:
    """A new metadata: base with updates applied in order (base is left as it was)."""
    builder = _Builder(base)
    try:
        for update in updates:
            builder.apply(update)
    except (KeyError, TypeError, ValueError) as exc:
        raise bad_request(f"malformed table update: {exc!r}") from None
    if updates:
        builder.m["last-updated-ms"] = max(_now_ms(), int(builder.m.get("last-updated-ms", 0)))
    return builder.m
