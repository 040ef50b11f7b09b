import { describe, expect, it } from "vitest";
import { parsePointer, parseTableMetadata, totalSize, typeText } from "../src/pages/iceberg_metadata";

const METADATA = `{
  "format-version": 2,
  "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
  "location": "s3://repo/main/db/events",
  "current-schema-id": 1,
  "schemas": [
    {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "old", "required": false, "type": "int"}]},
    {"type": "struct", "schema-id": 1, "fields": [
      {"id": 1, "name": "id", "required": true, "type": "long"},
      {"id": 2, "name": "tags", "required": false, "type": {"type": "list", "element-id": 4, "element": "string", "element-required": false}},
      {"id": 3, "name": "where", "required": false, "type": {"type": "struct", "fields": [{"id": 5, "name": "city", "type": "string"}]}}
    ]}
  ],
  "current-snapshot-id": 7385931593485043231,
  "snapshots": [
    {"snapshot-id": 1234, "timestamp-ms": 1700000000000, "summary": {"operation": "append", "added-records": "3", "total-records": "3"}},
    {"snapshot-id": 7385931593485043231, "parent-snapshot-id": 1234, "timestamp-ms": 1700000060000,
     "summary": {"operation": "overwrite", "added-records": "2", "deleted-records": "1", "total-records": "4"}}
  ],
  "properties": {"write.format.default": "parquet", "owner": "<b>ann</b>"}
}`;

describe("parsePointer", () => {
  it("names the current metadata file", () => {
    expect(parsePointer('{"metadata-key": "db/t/metadata/00001-a.metadata.json"}')).toBe("db/t/metadata/00001-a.metadata.json");
  });

  it("gives nothing for a renamed table's tombstone or text that is no pointer", () => {
    expect(parsePointer('{"renamed-to": ["db", "u"]}')).toBeNull();
    expect(parsePointer("not json")).toBeNull();
    expect(parsePointer('["db"]')).toBeNull();
    expect(parsePointer('{"metadata-key": 5}')).toBeNull();
  });
});

describe("parseTableMetadata", () => {
  const table = parseTableMetadata(METADATA);

  it("reads the current schema's fields, nested types spelled out", () => {
    expect(table.schemaId).toBe(1);
    expect(table.fields).toEqual([
      { id: 1, name: "id", type: "long", required: true },
      { id: 2, name: "tags", type: "list<string>", required: false },
      { id: 3, name: "where", type: "struct<city: string>", required: false },
    ]);
  });

  it("lists snapshots newest first, 64-bit ids exact, the current one marked", () => {
    expect(table.snapshots.map((snapshot) => snapshot.id)).toEqual(["7385931593485043231", "1234"]);
    expect(table.snapshots[0]).toMatchObject({
      parentId: "1234",
      operation: "overwrite",
      addedRecords: "2",
      deletedRecords: "1",
      totalRecords: "4",
      current: true,
      timestampMs: 1700000060000,
    });
    expect(table.snapshots[1]).toMatchObject({ current: false, deletedRecords: "", parentId: null });
  });

  it("keeps properties as text, sorted", () => {
    expect(table.properties).toEqual([
      ["owner", "<b>ann</b>"],
      ["write.format.default", "parquet"],
    ]);
    expect(table.formatVersion).toBe(2);
    expect(table.location).toBe("s3://repo/main/db/events");
  });

  it("reads a format version 1 table's single schema and no snapshots", () => {
    const v1 = parseTableMetadata('{"format-version": 1, "current-snapshot-id": -1, "schema": {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "double", "required": true}]}}');
    expect(v1.fields).toEqual([{ id: 1, name: "x", type: "double", required: true }]);
    expect(v1.snapshots).toEqual([]);
    expect(v1.properties).toEqual([]);
  });

  it("leaves out what has the wrong shape and refuses what is not an object", () => {
    const odd = parseTableMetadata('{"schemas": "no", "snapshots": [5, {"snapshot-id": 1, "summary": "x"}], "properties": []}');
    expect(odd.fields).toEqual([]);
    expect(odd.snapshots).toHaveLength(1);
    expect(odd.snapshots[0].operation).toBe("");
    expect(() => parseTableMetadata("[1, 2]")).toThrow("not a JSON object");
    expect(() => parseTableMetadata("{")).toThrow(SyntaxError);
  });

  it("orders snapshots of one millisecond as the file does, the later newer", () => {
    const same = parseTableMetadata('{"snapshots": [{"snapshot-id": 1, "timestamp-ms": 5}, {"snapshot-id": 2, "timestamp-ms": 5}, {"snapshot-id": 3, "timestamp-ms": 4}]}');
    expect(same.snapshots.map((snapshot) => snapshot.id)).toEqual(["2", "1", "3"]);
  });

  it("does not mistake a snapshot-id inside a string for a field", () => {
    const tricky = parseTableMetadata('{"properties": {"note": "\\"snapshot-id\\": 12"}, "snapshots": []}');
    expect(tricky.properties).toEqual([["note", '"snapshot-id": 12']]);
  });
});

describe("typeText and totalSize", () => {
  it("spells maps and unknown shapes", () => {
    expect(typeText({ type: "map", key: "string", value: { type: "list", element: "long" } })).toBe("map<string, list<long>>");
    expect(typeText(null)).toBe("?");
    expect(typeText("decimal(10, 2)")).toBe("decimal(10, 2)");
  });

  it("reads the whole size from a Content-Range header", () => {
    expect(totalSize("bytes 0-4194304/9000000")).toBe(9000000);
    expect(totalSize(null)).toBeNull();
    expect(totalSize("bytes */*")).toBeNull();
  });
});
