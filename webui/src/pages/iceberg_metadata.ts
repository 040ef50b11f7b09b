// What the object browser reads of an Iceberg table that Silt's catalog keeps on a ref: the
// pointer `<table>/_iceberg_table.json` naming the current metadata file, and that file's
// schema, snapshots and properties. Parsed defensively: the objects are anyone's writes, so a
// field of the wrong shape is left out rather than trusted.

/** The object that makes a directory an Iceberg table. */
export const TABLE_POINTER = "_iceberg_table.json";
/** The object that makes a directory an Iceberg namespace (its children may be tables). */
export const NAMESPACE_MARKER = "_iceberg_namespace.json";
/** A metadata file larger than this is not parsed in the browser. */
export const MAX_METADATA_BYTES = 4 * 1024 * 1024;

export interface TableField {
  id: number | null;
  name: string;
  type: string;
  required: boolean;
}

export interface TableSnapshot {
  id: string;
  parentId: string | null;
  /** Milliseconds since the epoch, as Iceberg writes them. */
  timestampMs: number | null;
  operation: string;
  addedRecords: string;
  deletedRecords: string;
  totalRecords: string;
  current: boolean;
}

export interface TableMetadata {
  formatVersion: number | null;
  uuid: string;
  location: string;
  schemaId: number | null;
  fields: TableField[];
  /** Newest first. */
  snapshots: TableSnapshot[];
  properties: [string, string][];
}

type Json = Record<string, unknown>;

// Snapshot ids are 64-bit: read as strings, since a JavaScript number would round them. (Inside
// a JSON string the quotes around such a name would be escaped, so only real fields match.)
const SNAPSHOT_IDS = /("(?:snapshot-id|parent-snapshot-id|current-snapshot-id)"\s*:\s*)(-?\d+)/g;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return "";
}

function numberOrNull(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** The metadata file a pointer names, or null for anything else (a renamed table's tombstone,
 * which names the new name instead, or text that is not a pointer). */
export function parsePointer(raw: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  if (!isObject(value)) return null;
  const key = value["metadata-key"];
  return typeof key === "string" && key !== "" ? key : null;
}

/** An Iceberg type as one line: primitives as written, nested ones spelled out
 * (`struct<a: int>`, `list<string>`, `map<string, long>`). */
export function typeText(type: unknown, depth = 0): string {
  if (typeof type === "string") return type;
  if (!isObject(type) || depth > 8) return "?";
  switch (type.type) {
    case "struct": {
      const fields = Array.isArray(type.fields) ? type.fields.filter(isObject) : [];
      return `struct<${fields.map((field) => `${text(field.name)}: ${typeText(field.type, depth + 1)}`).join(", ")}>`;
    }
    case "list":
      return `list<${typeText(type.element, depth + 1)}>`;
    case "map":
      return `map<${typeText(type.key, depth + 1)}, ${typeText(type.value, depth + 1)}>`;
    default:
      return text(type.type) || "?";
  }
}

function currentSchema(metadata: Json): Json | null {
  const schemas = Array.isArray(metadata.schemas) ? metadata.schemas.filter(isObject) : [];
  const wanted = metadata["current-schema-id"];
  const found = schemas.find((schema) => schema["schema-id"] === wanted);
  if (found) return found;
  // Format version 1 may carry only the one `schema`.
  if (isObject(metadata.schema)) return metadata.schema;
  return schemas.at(-1) ?? null;
}

function fieldsOf(schema: Json | null): TableField[] {
  if (!schema || !Array.isArray(schema.fields)) return [];
  return schema.fields.filter(isObject).map((field) => ({
    id: numberOrNull(field.id),
    name: text(field.name),
    type: typeText(field.type),
    required: field.required === true,
  }));
}

function snapshotsOf(metadata: Json): TableSnapshot[] {
  const current = metadata["current-snapshot-id"];
  const snapshots = Array.isArray(metadata.snapshots) ? metadata.snapshots.filter(isObject) : [];
  return snapshots
    .map((snapshot) => {
      const summary = isObject(snapshot.summary) ? snapshot.summary : {};
      const parent = snapshot["parent-snapshot-id"];
      return {
        id: text(snapshot["snapshot-id"]),
        parentId: parent === undefined || parent === null ? null : text(parent),
        timestampMs: numberOrNull(snapshot["timestamp-ms"]),
        operation: text(summary.operation),
        addedRecords: text(summary["added-records"]),
        deletedRecords: text(summary["deleted-records"]),
        totalRecords: text(summary["total-records"]),
        current: current !== undefined && current !== null && text(snapshot["snapshot-id"]) === text(current),
      };
    })
    // Iceberg appends snapshots in order: at one millisecond, the later in the file is newer.
    .map((snapshot, index) => ({ snapshot, index }))
    .sort((a, b) => (b.snapshot.timestampMs ?? 0) - (a.snapshot.timestampMs ?? 0) || b.index - a.index)
    .map(({ snapshot }) => snapshot);
}

/** A metadata file's schema, snapshots (newest first) and properties; throws when the text is
 * not a JSON object. */
export function parseTableMetadata(raw: string): TableMetadata {
  const metadata: unknown = JSON.parse(raw.replace(SNAPSHOT_IDS, '$1"$2"'));
  if (!isObject(metadata)) throw new Error("the metadata file is not a JSON object");
  const schema = currentSchema(metadata);
  const properties = isObject(metadata.properties) ? metadata.properties : {};
  return {
    formatVersion: numberOrNull(metadata["format-version"]),
    uuid: text(metadata["table-uuid"]),
    location: text(metadata.location),
    schemaId: schema ? numberOrNull(schema["schema-id"]) : null,
    fields: fieldsOf(schema),
    snapshots: snapshotsOf(metadata),
    properties: Object.entries(properties)
      .map(([key, value]): [string, string] => [key, text(value)])
      .sort(([a], [b]) => a.localeCompare(b)),
  };
}

/** The whole size of an object from a ranged answer's `Content-Range` (`bytes 0-9/1234`). */
export function totalSize(contentRange: string | null): number | null {
  const match = /\/(\d+)\s*$/.exec(contentRange ?? "");
  return match ? Number(match[1]) : null;
}
